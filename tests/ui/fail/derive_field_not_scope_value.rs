use gpuscope::{ScopeValue, Tensor};

struct Tokenizer;

#[derive(ScopeValue)]
struct Output {
    logits: Tensor,
    tokenizer: Tokenizer,
}

fn main() {
    let _ = |o: Output| (o.logits, o.tokenizer);
}
