//! Matrix products and shapes, f64 on CUDA, in-place operations, the optimizers, and
//! training steps that stay steady on CUDA.

use super::*;

#[test]
fn matmuls_and_shapes() {
    let Some(dev) = cuda() else { return };
    let f = DType::F32;
    let (a, b) = (randn(&[65, 130], 20, f), randn(&[130, 33], 21, f));
    let (at, bt) = (randn(&[130, 65], 22, f), randn(&[33, 130], 23, f));
    compare("matmul", &dev, &[a.clone(), b.clone()], |x| {
        x[0].matmul(&x[1])
    });
    compare("matmul aᵀ b", &dev, &[at.clone(), b.clone()], |x| {
        x[0].matmul_t(&x[1], true, false)
    });
    compare("matmul a bᵀ", &dev, &[a.clone(), bt.clone()], |x| {
        x[0].matmul_t(&x[1], false, true)
    });
    compare("matmul aᵀ bᵀ", &dev, &[at, bt], |x| {
        x[0].matmul_t(&x[1], true, true)
    });
    compare(
        "matvec-like",
        &dev,
        &[randn(&[1, 130], 24, f), b.clone()],
        |x| x[0].matmul(&x[1]),
    );
    compare("reshape", &dev, std::slice::from_ref(&a), |x| {
        x[0].reshape(&[130, 65])
    });
    compare("transpose", &dev, &[a], |x| x[0].transpose());
}

#[test]
fn f64_on_cuda() {
    let Some(dev) = cuda() else { return };
    let d = DType::F64;
    let (a, b) = (randn(&[20, 30], 25, d), randn(&[30, 10], 26, d));
    let t = Tensor::from_vec(
        (0..20).map(|i| (i % 10) as i64).collect::<Vec<_>>(),
        &[20],
        &host(),
    )
    .unwrap();
    compare_tol("mlp f64", &dev, &[a, b, t], 1e-10, |x| {
        x[0].matmul(&x[1])?.gelu()?.cross_entropy(&x[2])
    });
}

#[test]
fn in_place_ops() {
    let Some(dev) = cuda() else { return };
    let a = randn(&[40, 12], 27, DType::F32);
    let b = randn(&[40, 12], 28, DType::F32);
    let row = randn(&[12], 29, DType::F32);
    let both = |f: &dyn Fn(&Tensor, &Tensor, &Tensor)| {
        let (ha, hb, hr) = (
            a.deep_clone().unwrap(),
            b.deep_clone().unwrap(),
            row.deep_clone().unwrap(),
        );
        let (ca, cb, cr) = (
            a.to_device(&dev).unwrap(),
            b.to_device(&dev).unwrap(),
            row.to_device(&dev).unwrap(),
        );
        f(&ha, &hb, &hr);
        f(&ca, &cb, &cr);
        (ha.to_f64_vec().unwrap(), ca.to_f64_vec().unwrap())
    };
    type InPlace = Box<dyn Fn(&Tensor, &Tensor, &Tensor)>;
    let cases: Vec<(&str, InPlace)> = vec![
        ("add_", Box::new(|a, b, _| a.add_(b).unwrap())),
        ("sub_ row", Box::new(|a, _, r| a.sub_(r).unwrap())),
        ("mul_", Box::new(|a, b, _| a.mul_(b).unwrap())),
        (
            "mul_scalar_",
            Box::new(|a, _, _| a.mul_scalar_(0.3).unwrap()),
        ),
        (
            "add_scalar_",
            Box::new(|a, _, _| a.add_scalar_(-2.0).unwrap()),
        ),
        (
            "add_scaled_",
            Box::new(|a, b, _| a.add_scaled_(b, -0.7).unwrap()),
        ),
        (
            "add_scaled_ self",
            Box::new(|a, _, _| a.add_scaled_(a, 0.5).unwrap()),
        ),
        ("add_ self", Box::new(|a, _, _| a.add_(a).unwrap())),
        ("zero_", Box::new(|a, _, _| a.zero_().unwrap())),
        ("fill_", Box::new(|a, _, _| a.fill_(3.5).unwrap())),
    ];
    for (name, f) in cases {
        let (h, c) = both(f.as_ref());
        close(name, "result", &h, &c, 1e-5);
    }
}

#[test]
fn optimizers() {
    let Some(dev) = cuda() else { return };
    for adam in [false, true] {
        let run = |on: &Device| {
            let p = randn(&[50, 20], 30, DType::F32)
                .to_device(on)
                .unwrap()
                .set_requires_grad(true);
            let mut opt: Box<dyn Optimizer> = if adam {
                Box::new(AdamW::new(vec![p.clone()], 0.01))
            } else {
                Box::new(
                    Sgd::new(vec![p.clone()], 0.05)
                        .momentum(0.9)
                        .weight_decay(1e-3)
                        .nesterov(true),
                )
            };
            for step in 0..5 {
                let g = randn(&[50, 20], 31 + step, DType::F32)
                    .to_device(on)
                    .unwrap();
                p.set_grad(Some(g));
                opt.step().unwrap();
            }
            p.to_f64_vec().unwrap()
        };
        close(
            if adam { "adamw" } else { "sgd" },
            "parameters",
            &run(&host()),
            &run(&dev),
            1e-5,
        );
    }
}

#[test]
fn training_steps_are_steady_on_cuda() {
    // A device of its own: the other tests use the shared one in parallel.
    let Some(dev) = private_cuda() else { return };
    let mut g = Generator::new(32);
    let w1 = no_grad(|| Tensor::randn_with(&[2, 64], DType::F32, &mut g, &dev).unwrap())
        .set_requires_grad(true);
    let w2 = no_grad(|| {
        Tensor::randn_with(&[64, 10], DType::F32, &mut g, &dev)
            .unwrap()
            .mul_scalar(0.1)
            .unwrap()
    })
    .set_requires_grad(true);
    let b1 = Tensor::zeros(&[64], &dev).unwrap().set_requires_grad(true);
    let mut opt = AdamW::new(vec![w1.clone(), b1.clone(), w2.clone()], 1e-2);
    let x = randn(&[128, 2], 33, DType::F32).to_device(&dev).unwrap();
    let y = Tensor::from_vec(
        (0..128).map(|i| (i % 10) as i64).collect::<Vec<_>>(),
        &[128],
        &dev,
    )
    .unwrap();
    let mut warm = None;
    let mut first = None;
    let mut last = 0.0;
    for step in 0..30 {
        let loss = x
            .matmul(&w1)
            .unwrap()
            .add(&b1)
            .unwrap()
            .relu()
            .unwrap()
            .matmul(&w2)
            .unwrap()
            .cross_entropy(&y)
            .unwrap();
        loss.backward().unwrap();
        opt.step().unwrap();
        opt.zero_grad();
        last = loss.item().unwrap();
        first.get_or_insert(last);
        drop(loss);
        let st = dev.allocator().stats();
        let now = (st.num_device_alloc, st.allocated_bytes.all.current);
        if step == 1 {
            warm = Some(now);
        } else if let Some(w) = warm {
            assert_eq!(
                now, w,
                "step {step}: device allocations / allocated bytes changed after warm-up"
            );
        }
    }
    let first = first.unwrap_or(0.0);
    assert!(last < first, "loss {first} -> {last}");
}
