use gpuscope::gpu_scope;

#[gpu_scope(name = "x")]
pub enum Mode {
    Train,
    Eval,
}

fn main() {
    let _ = Mode::Train;
    let _ = Mode::Eval;
}
