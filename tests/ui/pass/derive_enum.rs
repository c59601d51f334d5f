#![deny(warnings)]
use gpuscope::{Device, ScopeValue, Tensor};

#[derive(ScopeValue)]
enum Step {
    Loss(Tensor),
    Both {
        loss: Tensor,
        grads: Vec<Tensor>,
        #[scope_value(skip)]
        note: &'static str,
    },
    Skipped(#[scope_value(skip)] std::time::Duration, u32),
    Done,
}

#[derive(ScopeValue)]
enum Never {}

fn count(v: &impl ScopeValue) -> usize {
    let mut n = 0;
    v.for_each_tensor(&mut |_| n += 1);
    n
}

fn main() {
    let dev = Device::host().unwrap();
    let t = || Tensor::zeros(&[1], &dev).unwrap();
    assert_eq!(count(&Step::Loss(t())), 1);
    let both = Step::Both {
        loss: t(),
        grads: vec![t(), t()],
        note: "x",
    };
    assert_eq!(count(&both), 3);
    if let Step::Both { note, .. } = both {
        assert_eq!(note, "x");
    }
    let skipped = Step::Skipped(Default::default(), 3);
    assert_eq!(count(&skipped), 0);
    if let Step::Skipped(d, _) = skipped {
        assert!(d.is_zero());
    }
    assert_eq!(count(&Step::Done), 0);
    let _ = |n: &Never| count(n);
}
