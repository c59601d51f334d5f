use gpuscope::no_grad;

#[no_grad(enabled = false)]
fn eval() -> bool {
    gpuscope::is_grad_enabled()
}

fn main() {
    let _ = eval();
}
