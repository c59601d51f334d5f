use gpuscope::gpu_scope;

#[gpu_scope(allow(forget_tensr))]
fn step() -> u32 {
    1
}

fn main() {
    let _ = step();
}
