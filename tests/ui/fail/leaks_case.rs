use gpuscope::gpu_scope;

#[gpu_scope(leaks = "Deny")]
fn step() -> u32 {
    1
}

fn main() {
    let _ = step();
}
