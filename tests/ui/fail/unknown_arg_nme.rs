use gpuscope::gpu_scope;

#[gpu_scope(nme = "train")]
fn step() -> u32 {
    1
}

fn main() {
    let _ = step();
}
