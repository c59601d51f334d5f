use gpuscope::gpu_scope;

#[gpu_scope(name = "a", leaks = "warn", name = "b")]
fn step() -> u32 {
    1
}

fn main() {
    let _ = step();
}
