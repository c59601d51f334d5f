use gpuscope::no_grad;

#[no_grad]
struct Evaluator;

fn main() {
    let _ = Evaluator;
}
