// An unknown rule in `#[gpuscope::lints::allow(..)]` is an error with the known rules, on an
// item and on a statement.
use gpuscope::{Tensor, gpu_scope};

#[gpuscope::lints::allow(forget_tensors)]
fn item(t: Tensor) {
    drop(t);
}

#[gpu_scope]
fn statement(t: Tensor) {
    #[gpuscope::lints::allow(graph_acumulation)]
    drop(t);
}

fn main() {}
