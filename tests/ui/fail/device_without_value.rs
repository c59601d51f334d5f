use gpuscope::gpu_scope;

#[gpu_scope(sync, device)]
fn step() -> u32 {
    1
}

fn main() {
    let _ = step();
}
