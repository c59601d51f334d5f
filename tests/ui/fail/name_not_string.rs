use gpuscope::gpu_scope;

#[gpu_scope(name = 3)]
fn step() -> u32 {
    1
}

fn main() {
    let _ = step();
}
