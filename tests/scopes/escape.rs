//! Escape by return: returned tensors, tuples, options, results, vectors, derived and
//! generic types, early returns; escape by return type; `keep`.

use super::support::*;
use super::*;

#[derive(ScopeValue)]
struct Output {
    logits: Tensor,
    extra: Option<Vec<Tensor>>,
    #[scope_value(skip)]
    label: String,
}

#[derive(ScopeValue)]
struct Pair<T>(T, Tensor);

#[derive(ScopeValue)]
enum Either {
    One(Tensor),
    Two { a: Tensor, b: Tensor },
    Nothing,
}

#[gpu_scope(leaks = "deny")]
fn ret_tensor(dev: &Device) -> Tensor {
    Tensor::zeros(&[8], dev).unwrap()
}

#[gpu_scope(leaks = "deny")]
fn ret_tuple(dev: &Device) -> (Tensor, usize, Tensor) {
    (
        Tensor::zeros(&[1], dev).unwrap(),
        3,
        Tensor::ones(&[2], dev).unwrap(),
    )
}

#[gpu_scope(leaks = "deny")]
fn ret_option(dev: &Device, some: bool) -> Option<Tensor> {
    some.then(|| Tensor::zeros(&[3], dev).unwrap())
}

#[gpu_scope(leaks = "deny")]
fn ret_result(dev: &Device) -> Result<Tensor, TensorError> {
    let t = Tensor::zeros(&[4], dev)?;
    Ok(t)
}

#[gpu_scope(leaks = "deny")]
fn ret_vec(dev: &Device, n: usize) -> Vec<Tensor> {
    (0..n)
        .map(|i| Tensor::zeros(&[i + 1], dev).unwrap())
        .collect()
}

#[gpu_scope(leaks = "deny")]
fn ret_derived(dev: &Device) -> Output {
    let logits = Tensor::randn(&[2, 2], dev).unwrap();
    let extra = Some(vec![Tensor::zeros(&[1], dev).unwrap()]);
    Output {
        logits,
        extra,
        label: "x".into(),
    }
}

#[gpu_scope(leaks = "deny")]
fn ret_generic_pair(dev: &Device) -> Pair<Vec<Tensor>> {
    Pair(
        vec![Tensor::zeros(&[1], dev).unwrap()],
        Tensor::ones(&[1], dev).unwrap(),
    )
}

#[gpu_scope(leaks = "deny")]
fn ret_enum(dev: &Device, which: u8) -> Either {
    match which {
        0 => Either::One(Tensor::zeros(&[1], dev).unwrap()),
        1 => Either::Two {
            a: Tensor::zeros(&[1], dev).unwrap(),
            b: Tensor::zeros(&[2], dev).unwrap(),
        },
        _ => Either::Nothing,
    }
}

#[gpu_scope(leaks = "deny")]
fn early_return(dev: &Device, early: bool) -> Tensor {
    let a = Tensor::zeros(&[1], dev).unwrap();
    if early {
        return a;
    }
    let b = Tensor::ones(&[2], dev).unwrap();
    drop(a);
    b
}

#[gpu_scope(leaks = "deny")]
fn returns_from_loop(dev: &Device) -> Tensor {
    let mut i = 0;
    loop {
        let t = Tensor::zeros(&[i + 1], dev).unwrap();
        if i == 2 {
            return t;
        }
        i += 1;
    }
}

#[gpu_scope(leaks = "deny")]
fn closure_returns_are_their_own(dev: &Device) -> Tensor {
    // The closure's `return` is not the function's: the closure's value is dropped.
    #[allow(clippy::needless_return)]
    let make = || {
        return Tensor::ones(&[5], dev).unwrap();
    };
    let _ = make();
    Tensor::zeros(&[1], dev).unwrap()
}

#[test]
fn escape_by_return_is_not_reported() {
    let dev = dev();
    let (_, events) = capture(|| {
        assert_eq!(ret_tensor(&dev).shape(), &[8]);
        let (a, n, b) = ret_tuple(&dev);
        assert_eq!((a.shape(), n, b.shape()), (&[1][..], 3, &[2][..]));
        assert!(ret_option(&dev, true).is_some());
        assert!(ret_option(&dev, false).is_none());
        assert_eq!(ret_result(&dev).unwrap().shape(), &[4]);
        assert_eq!(ret_vec(&dev, 3).len(), 3);
        let out = ret_derived(&dev);
        assert_eq!(
            (
                out.logits.shape(),
                out.extra.as_ref().map(Vec::len),
                out.label.as_str()
            ),
            (&[2, 2][..], Some(1), "x")
        );
        let pair = ret_generic_pair(&dev);
        assert_eq!((pair.0.len(), pair.1.shape()), (1, &[1][..]));
        for which in 0..3 {
            let _ = ret_enum(&dev, which);
        }
        assert_eq!(early_return(&dev, true).shape(), &[1]);
        assert_eq!(early_return(&dev, false).shape(), &[2]);
        assert_eq!(returns_from_loop(&dev).shape(), &[3]);
        assert_eq!(closure_returns_are_their_own(&dev).shape(), &[1]);
    });
    assert!(events.is_empty(), "no leak expected: {events:?}");
    assert_eq!(scope_depth(), 0);
}

/// An error type that is not a `ScopeValue`.
#[derive(Debug)]
struct PlainError;

/// A type holding a tensor that is not a `ScopeValue`.
struct Holder(Tensor);

#[gpu_scope(name = "rung_ok", leaks = "deny")]
fn rung_ok(dev: &Device, fail: bool) -> Result<Tensor, PlainError> {
    if fail {
        return Err(PlainError);
    }
    Ok(Tensor::zeros(&[12], dev).unwrap())
}

#[gpu_scope(name = "rung_none")]
fn rung_none(dev: &Device) -> Holder {
    Holder(Tensor::zeros(&[14], dev).unwrap())
}

#[gpu_scope(name = "async_rung_ok", leaks = "deny")]
async fn async_rung_ok(dev: &Device) -> Result<Tensor, PlainError> {
    yield_now().await;
    Ok(Tensor::zeros(&[15], dev).unwrap())
}

#[gpu_scope(name = "async_rung_none")]
async fn async_rung_none(dev: &Device) -> Holder {
    yield_now().await;
    Holder(Tensor::zeros(&[17], dev).unwrap())
}

#[test]
fn escape_dispatch_by_return_type() {
    let dev = dev();
    // A `Result` whose `Ok` type is a `ScopeValue` and whose error type is not: the `Ok`
    // value escapes.
    let (r, events) = capture(|| (rung_ok(&dev, false), rung_ok(&dev, true)));
    assert_eq!(r.0.unwrap().shape(), &[12]);
    assert!(r.1.is_err());
    assert!(events.is_empty(), "{events:?}");
    let (r, events) = capture(|| block_on(async_rung_ok(&dev)));
    assert_eq!(r.unwrap().shape(), &[15]);
    assert!(events.is_empty(), "{events:?}");
    // Any other type is let through untouched: the tensor inside cannot be found, and is
    // reported.
    let (h, events) = capture(|| rung_none(&dev));
    assert_eq!(h.0.shape(), &[14]);
    assert_eq!(leaks_of(&events, "rung_none").len(), 1, "{events:?}");
    let (h, events) = capture(|| block_on(async_rung_none(&dev)));
    assert_eq!(h.0.shape(), &[17]);
    assert_eq!(leaks_of(&events, "async_rung_none").len(), 1, "{events:?}");
}

#[gpu_scope(name = "keeper", leaks = "deny")]
fn keeps(dev: &Device, params: &mut Vec<Tensor>) -> usize {
    let w = Tensor::randn(&[4, 4], dev).unwrap();
    keep(&w);
    params.push(w);
    params.len()
}

#[test]
fn kept_tensors_are_not_reported() {
    let dev = dev();
    let mut params = Vec::new();
    let (n, events) = capture(|| keeps(&dev, &mut params));
    assert_eq!(n, 1);
    assert!(events.is_empty(), "{events:?}");
    assert!(
        gpuscope::report_live()
            .iter()
            .any(|l| l.record.site().line() == params[0].track_record().unwrap().site().line())
    );
}
