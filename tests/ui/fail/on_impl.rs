use gpuscope::gpu_scope;

struct Model;

#[gpu_scope]
impl Model {
    fn forward(&self) -> u32 {
        1
    }
}

fn main() {
    let _ = Model.forward();
}
