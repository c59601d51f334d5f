//! Views on the host: `transpose`/`t`, `transpose_dims`, `permute`, `narrow`, `view`,
//! `reshape` and `contiguous` share storage as PyTorch's do, in-place changes write
//! through them, and every operation gives on a view what it gives on the view's
//! contiguous copy.

use gpuscope_runtime::optim::{AdamW, Optimizer, Sgd};
use gpuscope_runtime::tensor::{DType, Generator};
use gpuscope_runtime::{Device, Tensor, TensorError, no_grad};

fn dev() -> Device {
    Device::host().unwrap()
}

/// A host device with an allocator of its own, whose counts other tests running in
/// parallel do not change.
fn private_host() -> Device {
    Device::with_backend(
        std::sync::Arc::new(gpuscope_runtime::backend::host::HostBackend::new()),
        gpuscope_runtime::alloc::AllocConfig::default(),
    )
    .unwrap()
}

/// `0, 1, 2, ...` as f64 of `shape`.
fn iota(shape: &[usize], dev: &Device) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec((0..n).map(|i| i as f64).collect::<Vec<_>>(), shape, dev).unwrap()
}

fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn_with(shape, DType::F64, &mut Generator::new(seed), &dev()).unwrap()
}

fn positive(shape: &[usize], seed: u64) -> Tensor {
    randn(shape, seed).exp().unwrap().add_scalar(0.1).unwrap()
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().unwrap()
}

fn allocations(dev: &Device) -> i64 {
    dev.allocator().stats().allocation.all.allocated
}

fn assert_close(name: &str, a: &[f64], b: &[f64]) {
    assert_close_tol(name, a, b, 1e-12)
}

fn assert_close_tol(name: &str, a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{name}: lengths differ");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + x.abs().max(y.abs())),
            "{name}[{i}]: view {x}, contiguous {y}"
        );
    }
}

#[test]
fn views_share_storage_and_allocate_nothing() {
    let dev = private_host();
    let t = iota(&[2, 3, 4], &dev);
    let before = allocations(&dev);
    let views = [
        t.transpose_dims(0, 2).unwrap(),
        t.transpose_dims(-1, -2).unwrap(),
        t.permute(&[2, 0, 1]).unwrap(),
        t.narrow(1, 1, 2).unwrap(),
        t.view(&[6, 4]).unwrap(),
        t.reshape(&[4, 6]).unwrap(),
        t.view(&[6, 4]).unwrap().t().unwrap(),
        t.contiguous().unwrap(),
        t.detach(),
    ];
    assert_eq!(allocations(&dev), before, "a view allocated");
    for v in &views {
        assert!(v.same_storage(&t), "{v:?}");
    }
    assert_eq!(views[0].shape(), &[4, 3, 2]);
    assert_eq!(views[0].strides(), &[1, 4, 12]);
    assert_eq!(views[1].strides(), &[12, 1, 4]);
    assert_eq!(views[2].strides(), &[1, 12, 4]);
    assert_eq!(views[3].strides(), &[12, 4, 1]);
    assert_eq!(views[3].storage_offset(), 4);
    assert_eq!(views[3].addr().0, t.addr().0 + 4 * 8);
    assert_eq!(views[6].strides(), &[1, 4]);
    assert!(!views[0].is_contiguous() && !views[3].is_contiguous());
    assert!(views[4].is_contiguous() && views[5].is_contiguous());
    // Element (i, j, k) of the first is element (k, j, i) of the original.
    let (o, v) = (vals(&t), vals(&views[0]));
    for i in 0..4 {
        for j in 0..3 {
            for k in 0..2 {
                assert_eq!(v[(i * 3 + j) * 2 + k], o[(k * 3 + j) * 4 + i]);
            }
        }
    }
}

#[test]
fn in_place_changes_show_through_every_view() {
    let dev = dev();
    let t = iota(&[2, 3], &dev);
    let tt = t.t().unwrap();
    tt.narrow(0, 1, 1).unwrap().fill_(-1.0).unwrap(); // column 1 of `t`
    assert_eq!(vals(&t), vec![0.0, -1.0, 2.0, 3.0, -1.0, 5.0]);
    t.narrow(0, 1, 1).unwrap().mul_scalar_(10.0).unwrap(); // row 1
    assert_eq!(vals(&tt), vec![0.0, 30.0, -1.0, -10.0, 2.0, 50.0]);
    // A constructor's tensor written in place: the view sees it.
    t.zero_().unwrap();
    assert_eq!(vals(&tt), vec![0.0; 6]);
}

#[test]
fn view_refuses_non_contiguous_tensors_with_help() {
    let t = iota(&[2, 3], &dev());
    let err = t.t().unwrap().view(&[6]).unwrap_err();
    match &err {
        TensorError::InvalidArgument { op, reason } => {
            assert_eq!(*op, "view");
            assert!(
                reason.contains(".contiguous()") && reason.contains(".reshape()"),
                "{reason}"
            );
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    // The same through contiguous() or reshape().
    let a = t.t().unwrap().contiguous().unwrap().view(&[6]).unwrap();
    let b = t.t().unwrap().reshape(&[6]).unwrap();
    assert_eq!(vals(&a), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    assert_eq!(vals(&a), vals(&b));
    assert!(!b.same_storage(&t));
    assert!(matches!(
        t.view(&[4]),
        Err(TensorError::InvalidArgument { .. })
    ));
}

#[test]
fn bad_arguments_are_errors() {
    let t = iota(&[2, 3], &dev());
    assert!(matches!(
        t.permute(&[0]),
        Err(TensorError::InvalidArgument { .. })
    ));
    assert!(matches!(
        t.permute(&[1, 1]),
        Err(TensorError::InvalidArgument { .. })
    ));
    assert!(matches!(
        t.permute(&[0, 2]),
        Err(TensorError::InvalidArgument { .. })
    ));
    assert!(matches!(
        t.transpose_dims(0, 2),
        Err(TensorError::InvalidArgument { .. })
    ));
    assert!(matches!(
        t.narrow(1, 2, 2),
        Err(TensorError::InvalidArgument { .. })
    ));
    assert!(matches!(
        t.narrow(1, usize::MAX, 2),
        Err(TensorError::InvalidArgument { .. })
    ));
    let three = iota(&[2, 3, 4], &dev());
    let err = three.t().unwrap_err();
    assert!(err.to_string().contains("transpose_dims"), "{err}");
    assert_eq!(t.narrow(1, 3, 0).unwrap().numel(), 0);
}

#[test]
fn contiguous_is_the_tensor_itself_when_it_can_be() {
    let t = iota(&[3, 4], &dev()).set_requires_grad(true);
    let c = t.contiguous().unwrap();
    assert!(c.same_storage(&t) && c.is_leaf());
    let tt = t.t().unwrap();
    let c = tt.contiguous().unwrap();
    assert!(!c.same_storage(&t) && c.is_contiguous());
    assert_eq!(c.grad_fn_name(), Some("contiguous"));
    assert_eq!(tt.grad_fn_name(), Some("transpose"));
    assert_eq!(c.strides(), &[3, 1]);
}

/// Runs `f` on `x` (a view) and on its contiguous copy: the results agree.
fn same_on_view(name: &str, x: &Tensor, f: impl Fn(&Tensor) -> Result<Tensor, TensorError>) {
    assert!(!x.is_contiguous(), "{name}: the input should be a view");
    let dense = x.contiguous().unwrap();
    let a = f(x).unwrap_or_else(|e| panic!("{name} on the view: {e}"));
    let b = f(&dense).unwrap();
    assert_eq!(a.shape(), b.shape(), "{name}");
    assert_close(name, &vals(&a), &vals(&b));
}

#[test]
fn every_operation_on_a_transposed_input_matches_its_contiguous_copy() {
    let x = randn(&[5, 7], 1).t().unwrap(); // [7, 5]
    let p = positive(&[5, 7], 2).t().unwrap();
    let other = randn(&[7, 5], 3);
    let row = randn(&[5], 4);
    let col = randn(&[7, 1], 5);
    let w = randn(&[5, 3], 6);
    let targets = Tensor::from_slice(&[0i64, 4, 1, 3, 2, 2, 0], &[7], &dev()).unwrap();
    type Op<'a> = (
        &'a str,
        Box<dyn Fn(&Tensor) -> Result<Tensor, TensorError> + 'a>,
    );
    let ops: Vec<Op> = vec![
        ("add", Box::new(|x| x.add(&other))),
        ("add (view right)", Box::new(|x| other.add(x))),
        ("add self", Box::new(|x| x.add(x))),
        ("sub row", Box::new(|x| x.sub(&row))),
        ("mul column", Box::new(|x| x.mul(&col))),
        ("div", Box::new(|x| x.div(&p))),
        ("add_scalar", Box::new(|x| x.add_scalar(1.5))),
        ("mul_scalar", Box::new(|x| x.mul_scalar(-2.0))),
        ("neg", Box::new(|x| x.neg())),
        ("relu", Box::new(|x| x.relu())),
        ("gelu", Box::new(|x| x.gelu())),
        ("exp", Box::new(|x| x.exp())),
        ("sum", Box::new(|x| x.sum())),
        ("mean", Box::new(|x| x.mean())),
        ("sum_axis 0", Box::new(|x| x.sum_axis(0, false))),
        ("sum_axis 1", Box::new(|x| x.sum_axis(1, true))),
        ("mean_axis -1", Box::new(|x| x.mean_axis(-1, false))),
        ("softmax", Box::new(|x| x.softmax())),
        ("log_softmax", Box::new(|x| x.log_softmax())),
        ("cross_entropy", Box::new(|x| x.cross_entropy(&targets))),
        ("nll_loss", Box::new(|x| x.nll_loss(&targets))),
        ("mse_loss", Box::new(|x| x.mse_loss(&other))),
        ("matmul", Box::new(|x| x.matmul(&w))),
        ("matmul (view right)", Box::new(|x| w.t()?.matmul(&x.t()?))),
        ("matmul_t", Box::new(|x| x.matmul_t(&other, true, false))),
        ("reshape", Box::new(|x| x.reshape(&[35]))),
        ("reshape 3-D", Box::new(|x| x.reshape(&[5, 7, 1]))),
        ("transpose back", Box::new(|x| x.t())),
        ("narrow", Box::new(|x| x.narrow(1, 1, 3))),
        ("deep_clone", Box::new(|x| x.deep_clone())),
        ("to_device", Box::new(|x| x.to_device(&dev()))),
    ];
    for (name, f) in &ops {
        same_on_view(name, &x, f);
    }
    // Logs and square roots of positive values.
    same_on_view("log", &p, |x| x.log());
    same_on_view("sqrt", &p, |x| x.sqrt());
}

#[test]
fn operations_on_permuted_and_narrowed_inputs_match() {
    let x = randn(&[3, 4, 5], 7);
    let perm = x.permute(&[2, 0, 1]).unwrap(); // [5, 3, 4]
    let narrow = x.narrow(2, 1, 3).unwrap(); // [3, 4, 3], rows of 3 in 5
    let bias = randn(&[4], 8);
    let inputs = [("permuted", perm), ("narrowed", narrow)];
    for (what, v) in &inputs {
        same_on_view(&format!("{what} add bias"), v, |x| {
            x.add(&bias.narrow(0, 0, x.shape()[2])?)
        });
        same_on_view(&format!("{what} mul self"), v, |x| x.mul(x));
        same_on_view(&format!("{what} gelu"), v, |x| x.gelu());
        same_on_view(&format!("{what} sum_axis 1"), v, |x| x.sum_axis(1, false));
        same_on_view(&format!("{what} softmax"), v, |x| x.softmax());
        same_on_view(&format!("{what} reshape"), v, |x| x.reshape(&[v.numel()]));
        same_on_view(&format!("{what} transpose_dims"), v, |x| {
            x.transpose_dims(0, 1)?.contiguous()
        });
    }
    // 2-D views whose rows are strided (a leading dimension larger than a row) in matmul.
    let m = randn(&[6, 9], 9);
    let rows = m.narrow(1, 2, 4).unwrap(); // [6, 4], row stride 9
    same_on_view("narrowed matmul", &rows, |x| x.matmul(&randn(&[4, 3], 10)));
    same_on_view("narrowed matmul, transposed", &rows, |x| {
        x.t()?.matmul(&randn(&[6, 2], 11))
    });
    same_on_view("narrowed right operand", &rows, |x| {
        randn(&[2, 6], 12).matmul(x)
    });
}

#[test]
fn matmul_of_a_transposed_view_allocates_only_its_output() {
    let dev = private_host();
    let x = Tensor::randn_with(&[8, 16], DType::F32, &mut Generator::new(13), &dev).unwrap();
    let w = Tensor::randn_with(&[32, 16], DType::F32, &mut Generator::new(14), &dev).unwrap();
    let expected = x.matmul_t(&w, false, true).unwrap();
    type Product<'a> = (&'a str, Box<dyn Fn() -> Result<Tensor, TensorError> + 'a>);
    let products: Vec<Product> = vec![
        ("x @ w.t()", Box::new(|| x.matmul(&w.t()?))),
        ("(w @ x.t()).t()", Box::new(|| w.matmul(&x.t()?)?.t())),
        (
            "(w.t().t() @ x.t()).t()",
            Box::new(|| w.t()?.t()?.matmul(&x.t()?)?.t()),
        ),
        (
            "x.t().t() @ w.t()",
            Box::new(|| x.t()?.t()?.matmul(&w.t()?)),
        ),
    ];
    for (name, f) in &products {
        let before = allocations(&dev);
        let y = f().unwrap();
        assert_eq!(
            allocations(&dev) - before,
            1,
            "{name}: only the output is allocated"
        );
        assert_eq!(y.shape(), &[8, 32]);
        assert_close_tol(name, &vals(&y), &vals(&expected), 1e-5);
    }
    // With autograd: the forward pass still copies nothing; w's gradient is xᵀ-shaped
    // back through the transpose, and contiguous.
    drop(products);
    let w = w.set_requires_grad(true);
    let before = allocations(&dev);
    let y = x.matmul(&w.t().unwrap()).unwrap();
    assert_eq!(allocations(&dev) - before, 1);
    y.sum().unwrap().backward().unwrap();
    let g = w.grad().unwrap();
    assert_eq!(g.shape(), &[32, 16]);
    assert!(g.is_contiguous());
    // d/dw Σ x wᵀ = 1ᵀ x for every row of w: the column sums of x.
    let col_sums = vals(&x.sum_axis(0, false).unwrap());
    for r in vals(&g).chunks(16) {
        assert_close_tol("w.grad row", r, &col_sums, 1e-5);
    }
}

/// Applies `op` in place to a view made by `view` of a copy of `base`, and to a
/// contiguous copy of that view; the view's elements agree, and every element of the
/// storage outside the view is unchanged.
fn in_place_through(
    name: &str,
    base: &Tensor,
    view: &dyn Fn(&Tensor) -> Tensor,
    op: &dyn Fn(&Tensor) -> Result<(), TensorError>,
) {
    let storage = base.deep_clone().unwrap();
    let v = view(&storage);
    assert!(
        !v.is_contiguous(),
        "{name}: the view should not be contiguous"
    );
    let expected = v.contiguous().unwrap();
    op(&expected).unwrap();
    // Mark the view's elements to find those outside it.
    let outside = storage.deep_clone().unwrap();
    view(&outside).fill_(f64::NAN).unwrap();
    op(&v).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(v.same_storage(&storage));
    assert_close(name, &vals(&v), &vals(&expected));
    for (i, (o, s)) in vals(&outside).iter().zip(vals(&storage)).enumerate() {
        if !o.is_nan() {
            assert_eq!(*o, s, "{name}: element {i} outside the view changed");
        }
    }
}

#[test]
fn in_place_operations_write_through_views() {
    let base = randn(&[6, 6], 15);
    let other = randn(&[6, 4], 16);
    let row = randn(&[4], 17);
    type View = Box<dyn Fn(&Tensor) -> Tensor>;
    let views: Vec<(&str, View)> = vec![
        (
            "transposed",
            Box::new(|t| {
                t.narrow(1, 0, 6)
                    .unwrap()
                    .t()
                    .unwrap()
                    .narrow(1, 1, 4)
                    .unwrap()
            }),
        ),
        ("narrowed", Box::new(|t| t.narrow(1, 1, 4).unwrap())),
        (
            // [6, 6] seen as [3, 2, 6], reversed ([6, 2, 3], strides [1, 6, 12]),
            // narrowed to [6, 2, 2].
            "permuted 3-D",
            Box::new(|t| {
                t.view(&[3, 2, 6])
                    .unwrap()
                    .permute(&[2, 1, 0])
                    .unwrap()
                    .narrow(2, 0, 2)
                    .unwrap()
            }),
        ),
    ];
    type InPlace = Box<dyn Fn(&Tensor) -> Result<(), TensorError>>;
    for (vname, view) in &views {
        let shape = view(&base).shape().to_vec();
        let (o, r) = if shape == [6, 4] {
            (other.clone(), row.clone())
        } else {
            (randn(&shape, 18), randn(&[shape[shape.len() - 1]], 19))
        };
        let (o2, r2, o3) = (o.clone(), r.clone(), o.clone());
        let ops: Vec<(&str, InPlace)> = vec![
            ("add_", Box::new(move |v| v.add_(&o))),
            ("sub_ row", Box::new(move |v| v.sub_(&r))),
            ("mul_ row", Box::new(move |v| v.mul_(&r2))),
            ("add_ self", Box::new(|v| v.add_(v))),
            ("mul_ self", Box::new(|v| v.mul_(v))),
            ("mul_scalar_", Box::new(|v| v.mul_scalar_(0.5))),
            ("add_scalar_", Box::new(|v| v.add_scalar_(-1.0))),
            ("add_scaled_", Box::new(move |v| v.add_scaled_(&o2, -0.25))),
            ("add_scaled_ self", Box::new(|v| v.add_scaled_(v, 2.0))),
            ("zero_", Box::new(|v| v.zero_())),
            ("fill_", Box::new(|v| v.fill_(7.0))),
            ("copy_from", Box::new(move |v| v.copy_from(&o3))),
        ];
        for (oname, op) in &ops {
            in_place_through(
                &format!("{oname} on {vname}"),
                &base,
                view.as_ref(),
                op.as_ref(),
            );
        }
    }
}

#[test]
fn in_place_with_an_overlapping_operand_reads_it_before_writing() {
    let base = iota(&[3, 3], &dev());
    // t += tᵀ: the transposed operand is the same storage.
    let t = base.deep_clone().unwrap();
    t.add_(&t.t().unwrap()).unwrap();
    assert_eq!(
        vals(&t),
        vec![0.0, 4.0, 8.0, 4.0, 8.0, 12.0, 8.0, 12.0, 16.0]
    );
    // tᵀ += t (the view written).
    let t = base.deep_clone().unwrap();
    t.t().unwrap().add_(&t).unwrap();
    assert_eq!(
        vals(&t),
        vec![0.0, 4.0, 8.0, 4.0, 8.0, 12.0, 8.0, 12.0, 16.0]
    );
    // Overlapping contiguous rows: rows 0..2 = rows 1..3 (read first).
    let t = base.deep_clone().unwrap();
    t.narrow(0, 0, 2)
        .unwrap()
        .copy_from(&t.narrow(0, 1, 2).unwrap())
        .unwrap();
    assert_eq!(vals(&t), vec![3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 6.0, 7.0, 8.0]);
    let t = base.deep_clone().unwrap();
    t.narrow(0, 1, 2)
        .unwrap()
        .add_scaled_(&t.narrow(0, 0, 2).unwrap(), 1.0)
        .unwrap();
    assert_eq!(
        vals(&t),
        vec![0.0, 1.0, 2.0, 3.0, 5.0, 7.0, 9.0, 11.0, 13.0]
    );
    // t = tᵀ through copy_from.
    let t = base.deep_clone().unwrap();
    t.copy_from(&t.t().unwrap()).unwrap();
    assert_eq!(vals(&t), vals(&base.t().unwrap()));
}

#[test]
fn reading_and_copying_views_follows_logical_order() {
    let dev = dev();
    let t = iota(&[2, 3], &dev);
    let tt = t.t().unwrap();
    let expected = vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0];
    assert_eq!(tt.to_vec::<f64>().unwrap(), expected);
    assert_eq!(tt.to_f64_vec().unwrap(), expected);
    assert_eq!(
        tt.narrow(0, 2, 1)
            .unwrap()
            .narrow(1, 1, 1)
            .unwrap()
            .item()
            .unwrap(),
        5.0
    );
    let c = tt.deep_clone().unwrap();
    assert!(c.is_contiguous() && !c.same_storage(&t));
    assert_eq!(vals(&c), expected);
    let d = tt.to_device(&dev).unwrap();
    assert_eq!((d.shape(), vals(&d)), (&[3usize, 2][..], expected.clone()));
    // copy_from between shapes with as many elements, in logical order.
    let flat = Tensor::zeros_dtype(&[6], DType::F64, &dev).unwrap();
    flat.copy_from(&tt).unwrap();
    assert_eq!(vals(&flat), expected);
    let back = Tensor::zeros_dtype(&[3, 2], DType::F64, &dev).unwrap();
    back.t().unwrap().copy_from(&flat).unwrap();
    // backᵀ[i][j] = flat[3i + j], so back[j][i] = flat[3i + j].
    assert_eq!(vals(&back), vec![0.0, 4.0, 3.0, 2.0, 1.0, 5.0]);
}

#[test]
fn views_of_every_dtype() {
    let dev = dev();
    let i = Tensor::from_slice(&[1i64, 2, 3, 4, 5, 6], &[2, 3], &dev).unwrap();
    assert_eq!(
        i.t().unwrap().to_vec::<i64>().unwrap(),
        vec![1, 4, 2, 5, 3, 6]
    );
    let b = Tensor::from_slice(&[1u8, 2, 3, 4, 5, 6], &[3, 2], &dev).unwrap();
    assert_eq!(
        b.t().unwrap().contiguous().unwrap().to_vec::<u8>().unwrap(),
        vec![1, 3, 5, 2, 4, 6]
    );
    let h: Vec<half::f16> = (1..=6).map(|v| half::f16::from_f64(v as f64)).collect();
    let h = Tensor::from_slice(&h, &[2, 3], &dev).unwrap();
    assert_eq!(vals(&h.t().unwrap()), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    let n = Tensor::from_slice(&[1i32, 2, 3, 4, 5, 6], &[2, 3], &dev).unwrap();
    n.narrow(1, 0, 2).unwrap().t().unwrap().zero_().unwrap();
    assert_eq!(n.to_vec::<i32>().unwrap(), vec![0, 0, 3, 0, 0, 6]);
    // Integer targets as a (contiguous) view of a transposed column.
    let targets = Tensor::from_slice(&[1i64, 0, 2], &[3, 1], &dev)
        .unwrap()
        .t()
        .unwrap();
    let logits = randn(&[3, 3], 20);
    let a = logits
        .cross_entropy(&targets.reshape(&[3]).unwrap())
        .unwrap();
    let b = logits
        .cross_entropy(&Tensor::from_slice(&[1i64, 0, 2], &[3], &dev).unwrap())
        .unwrap();
    assert_eq!(a.item().unwrap(), b.item().unwrap());
}

#[test]
fn optimizers_update_parameters_that_are_views() {
    for adam in [false, true] {
        let run = |as_view: bool| {
            let storage = randn(&[4, 3], 21);
            let p = if as_view {
                storage.t().unwrap()
            } else {
                storage.t().unwrap().contiguous().unwrap()
            }
            .set_requires_grad(true);
            let mut opt: Box<dyn Optimizer> = if adam {
                Box::new(AdamW::new(vec![p.clone()], 0.1))
            } else {
                Box::new(
                    Sgd::new(vec![p.clone()], 0.1)
                        .momentum(0.9)
                        .weight_decay(0.01),
                )
            };
            for step in 0..3 {
                // A gradient that is itself a view, then a contiguous one.
                let g = if step % 2 == 0 {
                    randn(&[4, 3], 22 + step).t().unwrap()
                } else {
                    randn(&[3, 4], 22 + step)
                };
                p.set_grad(Some(g));
                opt.step().unwrap();
            }
            // The parameter, and the [4, 3] storage it was taken from (for the dense
            // run, its transpose).
            let behind = if as_view { storage } else { p.t().unwrap() };
            (vals(&p), vals(&behind))
        };
        let (view, view_storage) = run(true);
        let (dense, dense_t) = run(false);
        let name = if adam { "adamw" } else { "sgd" };
        assert_close(name, &view, &dense);
        assert_close(name, &view_storage, &dense_t);
        // And the step did change them.
        assert!(
            view_storage != vals(&randn(&[4, 3], 21)),
            "{name}: nothing moved"
        );
    }
}

#[test]
fn no_grad_views_are_leaves_and_grad_views_record() {
    let w = randn(&[3, 4], 23).set_requires_grad(true);
    let v = no_grad(|| w.t().unwrap());
    assert!(v.is_leaf() && !v.requires_grad() && v.same_storage(&w));
    let v = w.t().unwrap();
    assert_eq!(v.grad_fn_name(), Some("transpose"));
    assert_eq!(w.permute(&[1, 0]).unwrap().grad_fn_name(), Some("permute"));
    assert_eq!(w.narrow(0, 1, 1).unwrap().grad_fn_name(), Some("narrow"));
    assert_eq!(w.view(&[12]).unwrap().grad_fn_name(), Some("view"));
    assert_eq!(v.reshape(&[12]).unwrap().grad_fn_name(), Some("reshape"));
    // In place on a view of a tensor that requires grad: refused under grad mode.
    assert!(matches!(v.mul_scalar_(2.0), Err(TensorError::Autograd(_))));
}
