use gpuscope::no_grad;

#[no_grad(warn(graph_accumulation, mystery))]
fn eval() -> bool {
    gpuscope::is_grad_enabled()
}

fn main() {
    let _ = eval();
}
