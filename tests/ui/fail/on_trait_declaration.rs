use gpuscope::gpu_scope;

trait Module {
    #[gpu_scope]
    fn forward(&self) -> u32;
}

struct M;

impl Module for M {
    fn forward(&self) -> u32 {
        1
    }
}

fn main() {
    let _ = M.forward();
}
