// Each mistake in `#[scope_value(..)]` is one error, and the type still implements
// `ScopeValue` (a fallback impl), so no second error follows where it is used as one.
use gpuscope::{ScopeValue, Tensor};

#[derive(ScopeValue)]
#[scope_value(skip)]
struct OnType {
    t: Tensor,
}

#[derive(ScopeValue)]
enum OnVariant {
    #[scope_value(skip)]
    A(Tensor),
    B,
}

#[derive(ScopeValue)]
struct SkipTwice {
    #[scope_value(skip, skip)]
    label: String,
}

#[derive(ScopeValue)]
struct SkipAgain {
    #[scope_value(skip)]
    #[scope_value(skip)]
    label: String,
}

#[derive(ScopeValue)]
struct Bare {
    #[scope_value]
    label: String,
}

#[derive(ScopeValue)]
struct Empty {
    #[scope_value()]
    label: String,
}

#[derive(ScopeValue)]
struct WithValue {
    #[scope_value(skip = true)]
    label: String,
}

#[derive(ScopeValue)]
struct Misspelt {
    t: Tensor,
    #[scope_value(skp)]
    label: String,
}

// Two mistakes in one type: two errors.
#[derive(ScopeValue)]
struct Two {
    #[scope_value(skip, skip)]
    a: String,
    #[scope_value(Skip)]
    b: String,
}

#[derive(ScopeValue)]
union Bits {
    f: f32,
    u: u32,
}

fn used<T: ScopeValue>(_: &T) {}

fn main() {
    let _ = |v: OnType| used(&v);
    let _ = |v: OnVariant| used(&v);
    let _ = |v: SkipTwice| used(&v);
    let _ = |v: SkipAgain| used(&v);
    let _ = |v: Bare| used(&v);
    let _ = |v: Empty| used(&v);
    let _ = |v: WithValue| used(&v);
    let _ = |v: Misspelt| used(&v);
    let _ = |v: Two| used(&v);
    let _ = |v: Bits| used(&v);
}
