//! # gpuscope-runtime
//!
//! The runtime half of gpuscope: device backends, a caching device allocator with
//! PyTorch's semantics, tensors (with operations, autograd and optimizers) whose
//! storage comes from it, scopes that track them, and allocation traces.
//!
//! Where things live, from the bottom layer up (each module uses only modules listed
//! before it; `tests/architecture.rs` checks that no import cycle appears):
//! - leaves that import nothing else of the crate: [`dtype`] ([`DType`]), [`intern`]
//!   (device labels, long shapes), [`trace_format`] (the allocation trace format),
//!   [`grad`] (grad mode, [`no_grad`]) and [`precision`] (how precise `f32` matrix
//!   products must be on the GPU, as `torch.set_float32_matmul_precision`);
//! - [`record`]: plain data: tracking records, leak reports, allocation histories,
//!   memory snapshots;
//! - [`backend`]: the [`Backend`](backend::Backend) trait (raw memory, streams, events,
//!   memory information) and its implementations: `cuda` (cudarc, feature `cuda`),
//!   [`host`](backend::host) (the embedded default), [`test`](backend::test)
//!   (deterministic, with fault injection); [`kernels`]: the CUDA C source of the
//!   kernels, compiled by NVRTC, with the per-device modules and cuBLAS handles;
//! - [`alloc`]: the [`CachingAllocator`](alloc::CachingAllocator): pools, blocks,
//!   segments, stream fences, statistics, configuration, out-of-memory reports;
//!   [`trace`]: traces replayed through it;
//! - [`device`]: [`Device`], one allocator per device, and [`DeviceBuffer`];
//! - [`scope`]: per-thread scopes that track records of what is made inside them, leak
//!   reports (through `tracing`, or to stderr when no subscriber is set, with a summary
//!   at exit), [`report_live`]; a scope fences the streams its memory used when it
//!   exits;
//! - [`tensor`]: [`Tensor`]: storage from the allocator, dtype, shape and strides (views
//!   such as `transpose` share storage), device, stream; constructors that remember
//!   the line that called them; the kernels of every operation, which record nothing
//!   (`tensor::compute`); a tensor holds its autograd node behind a small trait;
//! - [`escape`]: what leaves a scope on purpose: [`ScopeValue`], [`keep`],
//!   `ScopeGuard::escape`, [`escape::scoped`];
//! - [`autograd`]: the recorded graph and `Tensor::backward`; saved tensors live
//!   exactly as long as the graph, and `backward()` refuses those changed in place
//!   since they were saved ([`Tensor::version`]); activation checkpointing;
//! - [`ops`]: the operations on tensors (arithmetic, activations, reductions, losses,
//!   matrix products, views, layer norm, embedding, attention), each recording its
//!   backward step; [`optim`]: optimizers ([`Sgd`], [`AdamW`]) and [`fit_batch_size`];
//! - [`memory`]: [`memory::snapshot`] (and [`memory::snapshot_all`], every device), [`memory::record_history`], their JSON format
//!   (feature `serde`) and the HTML memory viewer (feature `viewer`);
//! - [`dist`]: several GPUs and processes: `torchrun`'s launch variables, a rendezvous
//!   store, NCCL collectives on tensors, data parallelism;
//! - `private` (hidden): what the expansions of `gpuscope-macros` call (the escape
//!   dispatch, the async scope, the `sync` device guard, the `no_grad` future).
//!
//! ```
//! use gpuscope_runtime::Device;
//! let device = Device::host().unwrap();
//! let buf = device.alloc(1 << 20).unwrap();
//! assert!(device.allocator().stats().allocated_bytes.all.current >= 1 << 20);
//! drop(buf); // back to the cache
//! ```

pub mod alloc;
pub mod autograd;
pub mod backend;
pub mod device;
pub mod dist;
pub mod dtype;
mod error_fmt;
pub mod escape;
pub mod grad;
pub mod intern;
pub mod kernels;
pub mod memory;
pub mod ops;
pub mod optim;
pub mod precision;
/// Support for the expansions of `gpuscope-macros`, reached as `gpuscope::__private`.
/// Not a public API: it changes without notice.
#[doc(hidden)]
pub mod private;
pub mod record;
pub mod scope;
pub mod tensor;
pub mod trace;
pub mod trace_format;

pub use device::{Device, DeviceBuffer, DeviceError};
pub use escape::{ScopeValue, keep};
pub use grad::{is_grad_enabled, no_grad};
pub use optim::{AdamW, Optimizer, Sgd, fit_batch_size};
pub use precision::{MatmulPrecision, float32_matmul_precision, set_float32_matmul_precision};
pub use scope::{LeakPolicy, report_live};
pub use tensor::{DType, Tensor, TensorError};

/// Formats a byte count for people: `512 B`, `1.50 KiB`, `2.00 GiB`.
///
/// ```
/// assert_eq!(gpuscope_runtime::format_bytes(3 << 29), "1.50 GiB");
/// ```
pub fn format_bytes(bytes: usize) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}
