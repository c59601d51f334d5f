//! Views: strided copies, binary operations, matrix products and in-place operations
//! on views, and `CudaView` refusing non-contiguous tensors.

use super::*;

#[test]
fn strided_copies() {
    let Some(dev) = cuda() else { return };
    let f = DType::F32;
    let a = randn(&[37, 19], 40, f);
    let c = randn(&[6, 7, 8, 9], 41, f);
    compare(
        "contiguous of a transpose",
        &dev,
        std::slice::from_ref(&a),
        |x| x[0].t()?.contiguous(),
    );
    compare(
        "reshape of a transpose",
        &dev,
        std::slice::from_ref(&a),
        |x| x[0].t()?.reshape(&[19 * 37]),
    );
    compare("permuted 4-D", &dev, std::slice::from_ref(&c), |x| {
        x[0].permute(&[3, 1, 0, 2])?.contiguous()
    });
    compare(
        "narrowed (an offset)",
        &dev,
        std::slice::from_ref(&c),
        |x| x[0].narrow(2, 3, 4)?.contiguous(),
    );
    compare(
        "narrowed and transposed",
        &dev,
        std::slice::from_ref(&a),
        |x| x[0].narrow(0, 5, 20)?.t()?.narrow(0, 2, 10)?.contiguous(),
    );
    // Many blocks, and the grid-stride loop.
    compare(
        "transpose of 2048x1024",
        &dev,
        &[randn(&[2048, 1024], 42, f)],
        |x| x[0].t()?.contiguous(),
    );
    // More merged dimensions than one launch takes (9, reversed): one launch per index
    // of the outermost.
    let rev: Vec<usize> = (0..9).rev().collect();
    compare(
        "reversed 9-D",
        &dev,
        &[randn(&[2, 3, 2, 2, 3, 2, 2, 2, 3], 43, f)],
        |x| x[0].permute(&rev)?.contiguous(),
    );
    // Every element size (1, 2, 4, 8 bytes) gathered on CUDA, read back in order.
    let h: Vec<half::f16> = (0..210u8).map(|v| half::f16::from_f64(v.into())).collect();
    let per_dtype = [
        Tensor::from_vec((0..210i64).collect::<Vec<_>>(), &[5, 6, 7], &host()),
        Tensor::from_vec((0..210i32).collect::<Vec<_>>(), &[5, 6, 7], &host()),
        Tensor::from_vec((0..210u8).collect::<Vec<_>>(), &[5, 6, 7], &host()),
        Tensor::from_vec(h, &[5, 6, 7], &host()),
        Ok(randn(&[5, 6, 7], 44, DType::F64)),
    ];
    for t in per_dtype {
        let t = t.unwrap();
        let on_host = t.permute(&[2, 0, 1]).unwrap().to_f64_vec().unwrap();
        let d = t.to_device(&dev).unwrap();
        let v = d.permute(&[2, 0, 1]).unwrap();
        assert_eq!(v.to_f64_vec().unwrap(), on_host, "{}", t.dtype());
        let dense = v.contiguous().unwrap();
        assert!(dense.is_contiguous());
        assert_eq!(dense.to_f64_vec().unwrap(), on_host, "{}", t.dtype());
        // Back to the host from the view: gathered on CUDA, then copied.
        let back = v.to_device(&host()).unwrap();
        assert_eq!(back.to_f64_vec().unwrap(), on_host, "{}", t.dtype());
        // Scatter: zero a narrowed view of an integer or float tensor on each device.
        let (hz, cz) = (t.deep_clone().unwrap(), t.to_device(&dev).unwrap());
        for z in [&hz, &cz] {
            z.narrow(1, 1, 3)
                .unwrap()
                .transpose_dims(0, 2)
                .unwrap()
                .zero_()
                .unwrap();
        }
        assert_eq!(
            hz.to_f64_vec().unwrap(),
            cz.to_f64_vec().unwrap(),
            "{}",
            t.dtype()
        );
    }
}

#[test]
fn binary_operations_on_views() {
    let Some(dev) = cuda() else { return };
    let f = DType::F32;
    let (a, b) = (randn(&[37, 19], 45, f), randn(&[19, 37], 46, f));
    compare("add of a view", &dev, &[a.clone(), b.clone()], |x| {
        x[0].t()?.add(&x[1])
    });
    compare(
        "div by a view",
        &dev,
        &[b.clone(), uniform(&[37, 19], 47, 0.5, 2.0)],
        |x| x[0].div(&x[1].t()?),
    );
    compare(
        "broadcast on a view",
        &dev,
        &[a.clone(), uniform(&[37], 48, 0.5, 2.0)],
        |x| x[0].t()?.mul(&x[1]),
    );
    compare("narrowed operands", &dev, &[a.clone(), b.clone()], |x| {
        x[0].narrow(0, 4, 19)?.sub(&x[1].narrow(1, 2, 19)?)
    });
    // More than 4 merged dimensions for the broadcast kernel: gathered first.
    compare(
        "reversed 6-D add",
        &dev,
        &[
            randn(&[2, 3, 2, 3, 2, 3], 49, f),
            randn(&[3, 2, 3, 2, 3, 2], 50, f),
        ],
        |x| x[0].permute(&[5, 4, 3, 2, 1, 0])?.add(&x[1]),
    );
    // Gathered inputs: unary, reductions, softmax, losses.
    compare("gelu of a view", &dev, std::slice::from_ref(&a), |x| {
        x[0].t()?.gelu()
    });
    compare("sum_axis of a view", &dev, std::slice::from_ref(&a), |x| {
        x[0].t()?.sum_axis(1, false)
    });
    compare("softmax of a view", &dev, std::slice::from_ref(&a), |x| {
        x[0].t()?.softmax()
    });
    let t = Tensor::from_vec(
        (0..19).map(|i| (i % 7) as i64).collect::<Vec<_>>(),
        &[19],
        &host(),
    )
    .unwrap();
    compare(
        "cross_entropy of a view",
        &dev,
        &[a.narrow(0, 0, 7).unwrap(), t],
        |x| x[0].t()?.cross_entropy(&x[1]),
    );
}

#[test]
fn matmuls_with_views() {
    let Some(dev) = cuda() else { return };
    let f = DType::F32;
    let (a, b) = (randn(&[65, 130], 51, f), randn(&[130, 33], 52, f));
    let (at, w) = (randn(&[130, 65], 53, f), randn(&[33, 130], 54, f));
    compare("x @ wᵀ (view)", &dev, &[a.clone(), w.clone()], |x| {
        x[0].matmul(&x[1].t()?)
    });
    compare("xᵀ (view) @ b", &dev, &[at.clone(), b.clone()], |x| {
        x[0].t()?.matmul(&x[1])
    });
    compare("both views", &dev, &[at.clone(), w.clone()], |x| {
        x[0].t()?.matmul(&x[1].t()?)
    });
    compare("views and flags", &dev, &[a.clone(), w.clone()], |x| {
        x[0].t()?.matmul_t(&x[1].t()?, true, false)
    });
    // Leading dimensions larger than a row: narrowed operands, one of them transposed.
    compare(
        "narrowed operands",
        &dev,
        &[randn(&[70, 140], 55, f), randn(&[40, 150], 56, f)],
        |x| {
            x[0].narrow(0, 3, 65)?
                .narrow(1, 5, 130)?
                .matmul(&x[1].narrow(1, 10, 130)?.narrow(0, 2, 33)?.t()?)
        },
    );
    // A single row of a transposed matrix (column-major, any leading dimension), and a
    // narrowed column.
    compare("row of a transpose", &dev, &[b.clone(), b.clone()], |x| {
        x[0].t()?.narrow(0, 3, 1)?.matmul(&x[1])
    });
    compare("narrowed column", &dev, &[a.clone(), b.clone()], |x| {
        x[0].matmul(&x[1].narrow(1, 4, 1)?)
    });
    compare_tol(
        "f64 views",
        &dev,
        &[
            randn(&[20, 30], 57, DType::F64),
            randn(&[10, 30], 58, DType::F64),
        ],
        1e-10,
        |x| x[0].matmul(&x[1].t()?)?.t(),
    );
}

#[test]
fn matmul_of_a_transposed_view_copies_nothing_on_cuda() {
    // A device of its own: the other tests allocate on the shared one in parallel.
    let Some(dev) = private_cuda() else { return };
    let x = randn(&[64, 128], 59, DType::F32).to_device(&dev).unwrap();
    let w = randn(&[256, 128], 60, DType::F32).to_device(&dev).unwrap();
    let expected = x.matmul_t(&w, false, true).unwrap().to_f64_vec().unwrap();
    let before = dev.allocator().stats().allocation.all.allocated;
    let y = x.matmul(&w.t().unwrap()).unwrap();
    assert_eq!(
        dev.allocator().stats().allocation.all.allocated - before,
        1,
        "only the output is allocated"
    );
    close(
        "x @ w.t()",
        "output",
        &expected,
        &y.to_f64_vec().unwrap(),
        1e-5,
    );
}

#[test]
fn in_place_on_views() {
    let Some(dev) = cuda() else { return };
    let a = randn(&[40, 12], 61, DType::F32);
    let b = randn(&[12, 40], 62, DType::F32);
    let row = randn(&[40], 63, DType::F32);
    // Runs `f` on copies of (a, b, row) on both devices; compares all of `a`'s storage.
    let both = |f: &dyn Fn(&Tensor, &Tensor, &Tensor) -> Result<(), TensorError>| {
        let h = [&a, &b, &row].map(|t| t.deep_clone().unwrap());
        let c = [&a, &b, &row].map(|t| t.to_device(&dev).unwrap());
        f(&h[0], &h[1], &h[2]).unwrap();
        f(&c[0], &c[1], &c[2]).unwrap();
        (h[0].to_f64_vec().unwrap(), c[0].to_f64_vec().unwrap())
    };
    type InPlace = Box<dyn Fn(&Tensor, &Tensor, &Tensor) -> Result<(), TensorError>>;
    let cases: Vec<(&str, InPlace)> = vec![
        ("add_", Box::new(|a, b, _| a.t()?.add_(b))),
        ("sub_ row", Box::new(|a, _, r| a.t()?.sub_(r))),
        ("mul_ by a view", Box::new(|a, b, _| a.mul_(&b.t()?))),
        ("mul_scalar_", Box::new(|a, _, _| a.t()?.mul_scalar_(0.3))),
        (
            "add_scalar_",
            Box::new(|a, _, _| a.narrow(1, 2, 5)?.add_scalar_(-2.0)),
        ),
        (
            "add_scaled_",
            Box::new(|a, b, _| a.t()?.add_scaled_(b, -0.7)),
        ),
        (
            "add_scaled_ self",
            Box::new(|a, _, _| {
                let v = a.t()?;
                v.add_scaled_(&v, 0.5)
            }),
        ),
        (
            "add_ self",
            Box::new(|a, _, _| {
                let v = a.t()?;
                v.add_(&v)
            }),
        ),
        (
            "add_ own transpose",
            Box::new(|a, _, _| {
                let s = a.narrow(0, 3, 12)?;
                s.add_(&s.t()?)
            }),
        ),
        ("zero_", Box::new(|a, _, _| a.t()?.narrow(0, 1, 4)?.zero_())),
        (
            "fill_",
            Box::new(|a, _, _| a.narrow(1, 7, 3)?.t()?.fill_(3.5)),
        ),
        ("copy_from", Box::new(|a, b, _| a.t()?.copy_from(b))),
    ];
    for (name, f) in cases {
        let (h, c) = both(f.as_ref());
        close(name, "result", &h, &c, 1e-5);
    }
}

#[test]
fn cuda_view_refuses_non_contiguous_tensors() {
    use cudarc::driver::{DevicePtr, DeviceSlice};
    let Some(dev) = cuda() else { return };
    let t = Tensor::zeros(&[4, 8], &dev).unwrap();
    let rows = t.narrow(0, 1, 2).unwrap(); // contiguous, 8 elements in
    let view = rows.cuda_view::<f32>().unwrap();
    assert_eq!(view.len(), 16);
    let stream = view.stream().clone();
    let (p, sync) = view.device_ptr(&stream);
    assert_eq!(
        p,
        t.addr().0 + 8 * 4,
        "the view starts at the storage offset"
    );
    drop(sync);
    for v in [t.t().unwrap(), t.narrow(1, 2, 3).unwrap()] {
        match v.cuda_view::<f32>() {
            Err(TensorError::InvalidArgument { op, reason }) => {
                assert_eq!(op, "cuda_view");
                assert!(reason.contains("contiguous()"), "{reason}");
            }
            other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
        }
    }
    assert!(
        t.t()
            .unwrap()
            .contiguous()
            .unwrap()
            .cuda_view::<f32>()
            .is_ok()
    );
}
