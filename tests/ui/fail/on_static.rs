use gpuscope::gpu_scope;

#[gpu_scope]
static mut COUNTER: u32 = 0;

fn main() {}
