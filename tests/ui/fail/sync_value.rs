use gpuscope::gpu_scope;

#[gpu_scope(sync = 1)]
fn step() -> u32 {
    1
}

fn main() {
    let _ = step();
}
