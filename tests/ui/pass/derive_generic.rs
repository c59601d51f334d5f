#![deny(warnings)]
use gpuscope::{Device, ScopeValue, Tensor, gpu_scope};

#[derive(ScopeValue)]
struct Batch<'a, T, M, const N: usize>
where
    T: Clone,
{
    items: [T; N],
    extra: Option<Box<T>>,
    // Only used in a skipped field: no `M: ScopeValue` bound.
    #[scope_value(skip)]
    meta: &'a M,
}

struct NotAValue;

#[gpu_scope(leaks = "deny")]
fn make<'a>(dev: &Device, meta: &'a NotAValue) -> Batch<'a, Tensor, NotAValue, 2> {
    Batch {
        items: [
            Tensor::zeros(&[1], dev).unwrap(),
            Tensor::zeros(&[2], dev).unwrap(),
        ],
        extra: None,
        meta,
    }
}

fn count(v: &impl ScopeValue) -> usize {
    let mut n = 0;
    v.for_each_tensor(&mut |_| n += 1);
    n
}

fn main() {
    gpuscope::scope::set_tracking(true);
    let dev = Device::host().unwrap();
    let b = make(&dev, &NotAValue);
    assert_eq!(count(&b), 2);
    let _: &NotAValue = b.meta;
}
