use gpuscope::gpu_scope;

struct Model {
    device: String,
}

impl Model {
    #[gpu_scope(sync, device = self.device)]
    fn step(&self) -> u32 {
        1
    }
}

fn main() {
    let _ = Model {
        device: String::new(),
    }
    .step();
}
