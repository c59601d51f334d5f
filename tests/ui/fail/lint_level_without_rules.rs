use gpuscope::gpu_scope;

#[gpu_scope(name = "x", deny)]
fn step() -> u32 {
    1
}

fn main() {
    let _ = step();
}
