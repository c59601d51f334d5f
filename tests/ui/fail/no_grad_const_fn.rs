use gpuscope::no_grad;

#[no_grad]
const fn eval() -> bool {
    false
}

fn main() {
    let _ = eval();
}
