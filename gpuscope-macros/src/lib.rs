//! Attribute macros for gpuscope (`#[gpu_scope]`, `#[no_grad]`).
