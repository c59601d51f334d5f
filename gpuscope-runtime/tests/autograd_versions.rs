//! Version counters: every in-place write counts one in its storage's version (shared by
//! views, clones and detached aliases), and `backward()` refuses a step whose saved
//! tensors have changed since they were saved, naming the operation, its line, the
//! tensor and the versions.

use std::sync::Arc;

use gpuscope_runtime::alloc::AllocConfig;
use gpuscope_runtime::backend::host::HostBackend;
use gpuscope_runtime::optim::{AdamW, Optimizer, Sgd};
use gpuscope_runtime::{Device, Tensor, TensorError, no_grad};

fn private_device() -> Device {
    Device::with_backend(Arc::new(HostBackend::new()), AllocConfig::default()).unwrap()
}

fn allocated(dev: &Device) -> i64 {
    dev.allocator().stats().allocated_bytes.all.current
}

fn iota(shape: &[usize], dev: &Device) -> Tensor {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 1.0).collect();
    Tensor::from_vec(data, shape, dev).unwrap()
}

/// The message of an autograd error (any other error fails the test).
fn autograd_message(r: Result<(), TensorError>) -> String {
    match r {
        Err(TensorError::Autograd(m)) => m,
        other => panic!("expected an autograd error, got {other:?}"),
    }
}

#[test]
fn a_saved_input_changed_in_place_fails_backward_with_the_op_site_and_versions() {
    let dev = private_device();
    let x = iota(&[3, 4], &dev); // saved by matmul; requires no grad, so add_ is allowed
    let w = iota(&[4, 2], &dev).set_requires_grad(true);
    let line = line!() + 1;
    let y = x.matmul(&w).unwrap();
    let loss = y.sum().unwrap();
    assert_eq!(x.version(), 0);
    x.add_scalar_(1.0).unwrap();
    assert_eq!(x.version(), 1);

    let msg = autograd_message(loss.backward());
    let site = format!("{}:{line}", file!());
    for part in [
        "modified by an in-place operation",
        "`matmul`",
        site.as_str(),
        "f32[3, 4]",
        "is at version 1",
        "saved at version 0",
        "out of place",
        "deep_clone()",
    ] {
        assert!(msg.contains(part), "`{part}` missing from: {msg}");
    }
    // The check runs before the step: nothing reached the leaf.
    assert!(w.grad().is_none());
    // The graph cannot be walked again (its root step ran): an error, not wrong grads.
    autograd_message(loss.backward());
    assert!(w.grad().is_none());
}

#[test]
fn the_error_names_the_saved_output_of_exp() {
    let dev = private_device();
    let w = iota(&[5], &dev).set_requires_grad(true);
    let h = w.exp().unwrap(); // exp saves its output
    let loss = h.sum().unwrap();
    // `h` requires grad: refused under grad mode, allowed under no_grad.
    assert!(matches!(h.mul_scalar_(2.0), Err(TensorError::Autograd(_))));
    assert_eq!(
        h.version(),
        0,
        "a refused in-place operation writes nothing"
    );
    no_grad(|| h.mul_scalar_(2.0)).unwrap();
    let msg = autograd_message(loss.backward());
    assert!(msg.contains("`exp`") && msg.contains("f32[5]"), "{msg}");
    assert!(
        msg.contains("is at version 1") && msg.contains("saved at version 0"),
        "{msg}"
    );
}

#[test]
fn changing_tensors_no_node_saved_is_fine() {
    let dev = private_device();
    let w = iota(&[3, 4], &dev).set_requires_grad(true);
    let x = iota(&[3, 4], &dev);
    let b = iota(&[4], &dev);
    let unrelated = iota(&[3, 4], &dev);
    // add saves nothing: changing its input `b` afterwards does not change gradients.
    let loss = w.mul(&x).unwrap().add(&b).unwrap().sum().unwrap();
    unrelated.mul_scalar_(3.0).unwrap();
    unrelated.copy_from(&x).unwrap();
    b.fill_(7.0).unwrap();
    assert_eq!(unrelated.version(), 2);
    loss.backward().unwrap();
    assert_eq!(
        w.grad().unwrap().to_vec::<f32>().unwrap(),
        x.to_vec::<f32>().unwrap()
    );
}

#[test]
fn an_optimizer_step_between_forward_and_backward_is_refused() {
    let dev = private_device();
    let x = iota(&[2, 3], &dev);
    for adamw in [false, true] {
        let w = iota(&[3, 4], &dev).set_requires_grad(true);
        let mut opt: Box<dyn Optimizer> = if adamw {
            Box::new(AdamW::new(vec![w.clone()], 0.01))
        } else {
            Box::new(Sgd::new(vec![w.clone()], 0.1).momentum(0.9))
        };
        // A correct step first: forward, backward, step.
        let loss = x.matmul(&w).unwrap().sum().unwrap();
        loss.backward().unwrap();
        opt.step().unwrap();
        let after_step = w.version();
        assert_eq!(after_step, 1, "one step, one write of the parameter");
        // Then the wrong order: the step changes the weight matmul saved.
        let line = line!() + 1;
        let loss = x.matmul(&w).unwrap().sum().unwrap();
        opt.step().unwrap(); // w.grad from the last backward is still there
        let msg = autograd_message(loss.backward());
        let site = format!("{}:{line}", file!());
        assert!(
            msg.contains("`matmul`") && msg.contains(&site) && msg.contains("f32[3, 4]"),
            "{msg}"
        );
        assert!(
            msg.contains("is at version 2") && msg.contains("saved at version 1"),
            "{msg}"
        );
    }
}

#[test]
fn in_place_through_a_view_of_a_saved_tensor_is_refused() {
    let dev = private_device();
    let w = iota(&[4, 2], &dev).set_requires_grad(true);
    type Change = fn(&Tensor) -> Result<(), TensorError>;
    let changes: [(&str, Change); 4] = [
        ("narrow().fill_", |x| x.narrow(0, 1, 1)?.fill_(0.0)),
        ("t().mul_scalar_", |x| x.t()?.mul_scalar_(2.0)),
        ("t().copy_from", |x| {
            let src = Tensor::zeros(&[4, 3], x.device())?;
            x.t()?.copy_from(&src)
        }),
        ("view().zero_", |x| x.view(&[12])?.zero_()),
    ];
    for (name, change) in changes {
        let x = iota(&[3, 4], &dev);
        let loss = x.matmul(&w).unwrap().sum().unwrap();
        change(&x).unwrap();
        assert_eq!(x.version(), 1, "{name}: one write through the view");
        let msg = autograd_message(loss.backward());
        assert!(
            msg.contains("`matmul`") && msg.contains("is at version 1"),
            "{name}: {msg}"
        );
    }
    // The saved tensor itself a view (matmul reads x.t() in place): changing its base
    // is refused too.
    let x = iota(&[4, 3], &dev);
    let loss = x.t().unwrap().matmul(&w).unwrap().sum().unwrap();
    x.add_scalar_(1.0).unwrap();
    let msg = autograd_message(loss.backward());
    assert!(msg.contains("f32[3, 4]"), "the saved view's shape: {msg}");
}

#[test]
fn in_place_on_a_detached_alias_is_refused() {
    let dev = private_device();
    let w = iota(&[6], &dev).set_requires_grad(true);
    let x = iota(&[6], &dev).set_requires_grad(true);
    let loss = w.mul(&x).unwrap().sum().unwrap(); // mul saves both
    let d = x.detach();
    assert_eq!(d.version(), x.version());
    // `x` requires grad, so `x.add_` is refused under grad mode; its detached alias is
    // not, and shares the counter (as in PyTorch).
    d.add_scalar_(1.0).unwrap();
    assert_eq!(x.version(), 1);
    let msg = autograd_message(loss.backward());
    assert!(msg.contains("`mul`") && msg.contains("f32[6]"), "{msg}");
}

#[test]
fn accumulating_into_a_grad_that_a_node_saved_is_refused() {
    let dev = private_device();
    let w = iota(&[3], &dev).set_requires_grad(true);
    let v = iota(&[3], &dev).set_requires_grad(true);
    w.set_grad(Some(Tensor::ones(&[3], &dev).unwrap()));
    let g = w.grad().unwrap(); // shares the storage of w's .grad
    // add's backward adds into w.grad (in place) before mul's step runs: mul saved g.
    let loss = v.mul(&g).unwrap().add(&w).unwrap().sum().unwrap();
    let msg = autograd_message(loss.backward());
    assert!(
        msg.contains("`mul`") && msg.contains("is at version 1"),
        "{msg}"
    );
    assert_eq!(g.version(), 1, "the accumulation counted one write");
}

#[test]
fn each_in_place_operation_counts_exactly_one() {
    let dev = private_device();
    let t = iota(&[2, 3], &dev);
    let row = iota(&[3], &dev);
    let same = iota(&[2, 3], &dev);
    type Op = fn(&Tensor, &Tensor, &Tensor) -> Result<(), TensorError>;
    let ops: [(&str, Op); 16] = [
        ("add_", |t, r, _| t.add_(r)),
        ("sub_", |t, r, _| t.sub_(r)),
        ("mul_", |t, _, s| t.mul_(s)),
        ("mul_ of itself", |t, _, _| t.mul_(t)),
        ("mul_scalar_", |t, _, _| t.mul_scalar_(0.5)),
        ("add_scalar_", |t, _, _| t.add_scalar_(0.5)),
        ("add_scaled_", |t, _, s| t.add_scaled_(s, 2.0)),
        ("add_scaled_ of itself", |t, _, _| t.add_scaled_(t, 2.0)),
        ("fill_", |t, _, _| t.fill_(3.0)),
        ("zero_", |t, _, _| t.zero_()),
        ("copy_from", |t, _, s| t.copy_from(s)),
        ("copy_from itself", |t, _, _| t.copy_from(t)),
        ("copy_from a view", |t, _, s| {
            t.copy_from(&s.t()?.contiguous()?.t()?)
        }),
        ("copy_from another shape", |t, _, s| {
            t.copy_from(&s.reshape(&[3, 2])?)
        }),
        ("t().add_", |t, _, _| {
            t.t()?.add_(&Tensor::ones(&[3, 2], t.device())?)
        }),
        ("narrow().zero_", |t, _, _| t.narrow(1, 0, 2)?.zero_()),
    ];
    for (i, (name, op)) in ops.iter().enumerate() {
        let before = t.version();
        op(&t, &row, &same).unwrap();
        assert_eq!(t.version(), before + 1, "{name}");
        assert_eq!(t.version(), i as u64 + 1);
    }
    // Reading and out-of-place operations count nothing, on their inputs or outputs.
    let v = t.version();
    let outs = [
        t.add(&row).unwrap(),
        t.mul_scalar(2.0).unwrap(),
        t.t().unwrap().contiguous().unwrap(),
        t.deep_clone().unwrap(),
        t.t().unwrap().deep_clone().unwrap(),
        t.to_device(&Device::host().unwrap()).unwrap(),
        t.sum().unwrap(),
    ];
    t.to_vec::<f32>().unwrap();
    assert_eq!(t.version(), v);
    for o in &outs {
        assert_eq!(o.version(), 0, "a new tensor starts at 0: {o:?}");
    }
    // Copies between devices count one on the destination only.
    let elsewhere = Tensor::zeros(&[2, 3], &Device::host().unwrap()).unwrap();
    elsewhere.copy_from(&t).unwrap();
    t.t().unwrap().copy_from(&elsewhere.t().unwrap()).unwrap();
    assert_eq!((elsewhere.version(), t.version()), (1, v + 1));
    // An empty tensor counts too; a refused operation does not.
    let empty = Tensor::zeros(&[0, 3], &dev).unwrap();
    empty.zero_().unwrap();
    empty.add_scalar_(1.0).unwrap();
    assert_eq!(empty.version(), 2);
    let v = t.version();
    assert!(t.add_(&iota(&[4], &dev)).is_err());
    assert!(t.copy_from(&iota(&[7], &dev)).is_err());
    assert_eq!(t.version(), v);
}

#[test]
fn optimizers_count_one_write_of_each_parameter_and_state_tensor() {
    let dev = private_device();
    // SGD with momentum and weight decay: the buffer is made at the first step (a new
    // tensor, then `add_scaled_` of the decay), updated in place afterwards.
    let p = iota(&[4], &dev).set_requires_grad(true);
    p.set_grad(Some(Tensor::ones(&[4], &dev).unwrap()));
    let mut sgd = Sgd::new(vec![p.clone()], 0.1).momentum(0.9);
    sgd.step().unwrap();
    assert_eq!(p.version(), 1);
    let buf = sgd.momentum_buffers()[0].clone().unwrap();
    assert_eq!(buf.version(), 0, "made by the first step");
    sgd.step().unwrap();
    assert_eq!(p.version(), 2);
    assert_eq!(buf.version(), 2, "mul_scalar_ then add_scaled_");
    // AdamW: one fused kernel writes the parameter and both moments.
    let q = iota(&[2, 2], &dev).set_requires_grad(true);
    q.set_grad(Some(Tensor::ones(&[2, 2], &dev).unwrap()));
    let mut adamw = AdamW::new(vec![q.clone()], 0.01);
    adamw.step().unwrap();
    adamw.step().unwrap();
    assert_eq!(q.version(), 2);
    let (m, v) = adamw.moments()[0].clone().unwrap();
    assert_eq!((m.version(), v.version()), (2, 2));
    // A parameter that is a view of a larger storage: the base counts the writes.
    let base = iota(&[2, 4], &dev);
    let pv = base.t().unwrap().set_requires_grad(true);
    pv.set_grad(Some(Tensor::ones(&[4, 2], &dev).unwrap()));
    let mut adamw = AdamW::new(vec![pv.clone()], 0.01);
    adamw.step().unwrap();
    assert_eq!(base.version(), 1);
}

#[test]
fn gradient_accumulation_counts_a_write_of_the_grad() {
    let dev = private_device();
    let w = iota(&[3], &dev).set_requires_grad(true);
    let x = iota(&[3], &dev);
    w.mul(&x).unwrap().sum().unwrap().backward().unwrap();
    let g = w.grad().unwrap();
    assert_eq!(g.version(), 0, "the first gradient is a new tensor");
    assert_eq!(w.version(), 0, "backward does not write the leaf");
    w.mul(&x).unwrap().sum().unwrap().backward().unwrap();
    assert!(w.grad().unwrap().same_storage(&g), "added in place");
    assert_eq!(g.version(), 1);
}

#[test]
fn a_failed_backward_still_frees_the_graph() {
    let dev = private_device();
    let w = iota(&[64, 32], &dev).set_requires_grad(true);
    let x = iota(&[16, 64], &dev);
    let before = allocated(&dev);
    let (loss, during) = {
        let h = x.matmul(&w).unwrap().gelu().unwrap();
        let loss = h
            .matmul(&w.t().unwrap())
            .unwrap()
            .exp()
            .unwrap()
            .mean()
            .unwrap();
        (loss, allocated(&dev))
    };
    assert!(during > before, "the graph holds memory");
    let mut held = 0;
    loss.for_each_graph_tensor(&mut |_| held += 1);
    assert!(held >= 4, "saved tensors listed: {held}");
    no_grad(|| w.mul_scalar_(0.5)).unwrap();
    let msg = autograd_message(loss.backward());
    assert!(msg.contains("`matmul`"), "{msg}");
    // Some steps ran (exp, mean); the rest of the graph is pending, and goes with it.
    drop(loss);
    assert_eq!(allocated(&dev), before, "nothing of the graph is left");
    assert!(w.grad().is_none());
}

#[test]
fn a_training_loop_in_the_right_order_passes() {
    let dev = private_device();
    let x = iota(&[8, 4], &dev).mul_scalar(0.2).unwrap();
    let target = iota(&[8, 2], &dev).mul_scalar(0.1).unwrap().neg().unwrap();
    let w1 = iota(&[4, 16], &dev)
        .mul_scalar(0.05)
        .unwrap()
        .set_requires_grad(true);
    let w2 = iota(&[16, 2], &dev)
        .mul_scalar(0.05)
        .unwrap()
        .set_requires_grad(true);
    let params = vec![w1.clone(), w2.clone()];
    let mut sgd = Sgd::new(params.clone(), 0.01).momentum(0.9);
    let mut adamw = AdamW::new(params, 0.01);
    let mut first = None;
    let mut last = 0.0;
    for step in 0..40 {
        let opt: &mut dyn Optimizer = if step % 2 == 0 { &mut sgd } else { &mut adamw };
        // Two micro-batches accumulate into .grad, then one step.
        for half in [x.narrow(0, 0, 4).unwrap(), x.narrow(0, 4, 4).unwrap()] {
            let t = if half.storage_offset() == 0 {
                target.narrow(0, 0, 4).unwrap()
            } else {
                target.narrow(0, 4, 4).unwrap()
            };
            let loss = half
                .matmul(&w1)
                .unwrap()
                .relu()
                .unwrap()
                .matmul(&w2)
                .unwrap()
                .mse_loss(&t)
                .unwrap();
            loss.backward().unwrap();
            last = loss.item().unwrap();
            first.get_or_insert(last);
        }
        opt.step().unwrap();
        opt.zero_grad();
    }
    let first = first.unwrap();
    println!("loss: {first} -> {last}");
    assert!(last < first * 0.5, "the loss went from {first} to {last}");
    assert_eq!(w1.version(), 40, "one write a step");
}

#[cfg(feature = "cuda")]
mod common;

#[cfg(feature = "cuda")]
mod cuda {
    use super::*;
    use crate::common::cuda;

    #[test]
    fn versions_and_the_check_on_cuda() {
        let Some(dev) = cuda() else { return };
        let x = iota(&[3, 4], &dev);
        let w = iota(&[4, 2], &dev).set_requires_grad(true);
        // In-place operations, through views too, count one each.
        x.add_scalar_(1.0).unwrap();
        x.t().unwrap().mul_scalar_(2.0).unwrap();
        x.narrow(1, 1, 2).unwrap().zero_().unwrap();
        x.copy_from(&iota(&[3, 4], &dev)).unwrap();
        assert_eq!(x.version(), 4);
        // A saved input changed: refused.
        let loss = x.matmul(&w).unwrap().sum().unwrap();
        x.narrow(0, 0, 1).unwrap().fill_(0.0).unwrap();
        let msg = autograd_message(loss.backward());
        assert!(
            msg.contains("`matmul`") && msg.contains("is at version 5"),
            "{msg}"
        );
        // AdamW on CUDA between forward and backward: refused; its moments count.
        let loss = x.matmul(&w).unwrap().sum().unwrap();
        loss.backward().unwrap();
        let mut opt = AdamW::new(vec![w.clone()], 0.01);
        let loss = x.matmul(&w).unwrap().sum().unwrap();
        opt.step().unwrap();
        let msg = autograd_message(loss.backward());
        assert!(msg.contains("f32[4, 2]"), "{msg}");
        let (m, v) = opt.moments()[0].clone().unwrap();
        assert_eq!((w.version(), m.version(), v.version()), (1, 1, 1));
    }

    #[test]
    fn cudarc_writes_through_a_view_count() {
        let Some(dev) = cuda() else { return };
        let t = Tensor::ones(&[16], &dev).unwrap();
        {
            let mut view = t.cuda_view::<f32>().unwrap();
            let stream = cudarc::driver::DeviceSlice::stream(&view).clone();
            stream.memset_zeros(&mut view).unwrap();
        }
        assert_eq!(t.version(), 1);
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![0.0; 16]);
        // Reading through a view counts nothing.
        let _ = t.cuda_view::<f32>().unwrap();
        assert_eq!(t.version(), 1);
    }
}
