use gpuscope::gpu_scope;

#[gpu_scope]
pub const fn size() -> usize {
    4
}

fn main() {
    const N: usize = size();
    let _ = N;
}
