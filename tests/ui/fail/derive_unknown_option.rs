use gpuscope::{ScopeValue, Tensor};

#[derive(ScopeValue)]
struct Output {
    logits: Tensor,
    #[scope_value(skp)]
    label: String,
}

fn main() {
    let _ = |o: Output| (o.logits, o.label);
}
