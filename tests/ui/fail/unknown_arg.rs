use gpuscope::gpu_scope;

#[gpu_scope(sync, frobnicate)]
fn step() -> u32 {
    1
}

fn main() {
    let _ = step();
}
