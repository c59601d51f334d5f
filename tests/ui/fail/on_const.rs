use gpuscope::gpu_scope;

#[gpu_scope]
const SIZE: usize = 4;

fn main() {
    let _ = SIZE;
}
