//! Tensors on a real GPU: round trips of every dtype, copies between host and device,
//! and a user kernel (NVRTC) launched on a tensor through cudarc. Skips with a printed
//! reason where there is no CUDA driver or device.

#![cfg(feature = "cuda")]

mod common;

use common::cuda;
use cudarc::driver::{DeviceSlice, LaunchConfig, PushKernelArg};
use gpuscope_runtime::scope::{LeakPolicy, ScopeGuard, ScopeOptions, set_tracking};
use gpuscope_runtime::tensor::DType;
use gpuscope_runtime::{Device, Tensor};

#[test]
fn every_dtype_round_trips() {
    let Some(dev) = cuda() else { return };
    let values: Vec<f64> = (0..100).map(|i| (i as f64) * 0.5 - 7.0).collect();
    for dtype in DType::ALL {
        let expect: Vec<f64> = values
            .iter()
            .map(|&v| match dtype {
                DType::U8 => (v as u8) as f64,
                DType::I32 | DType::I64 => v.trunc(),
                _ => v,
            })
            .collect();
        let t = Tensor::full_dtype(&[100], 0.0, dtype, &dev).unwrap();
        let src = Tensor::from_slice(&values, &[100], &Device::host().unwrap()).unwrap();
        // f64 -> dtype on the host, then to the GPU and back.
        let host_typed = Tensor::from_f64_values(&values, dtype);
        t.copy_from(&host_typed).unwrap();
        assert_eq!(t.to_f64_vec().unwrap(), expect, "{dtype}");
        assert_eq!(
            src.to_device(&dev).unwrap().to_vec::<f64>().unwrap(),
            values
        );
    }
}

trait FromValues {
    fn from_f64_values(values: &[f64], dtype: DType) -> Tensor;
}
impl FromValues for Tensor {
    fn from_f64_values(values: &[f64], dtype: DType) -> Tensor {
        let host = Device::host().unwrap();
        match dtype {
            DType::F32 => Tensor::from_slice(
                &values.iter().map(|&v| v as f32).collect::<Vec<_>>(),
                &[values.len()],
                &host,
            ),
            DType::F64 => Tensor::from_slice(values, &[values.len()], &host),
            DType::F16 => Tensor::from_slice(
                &values
                    .iter()
                    .map(|&v| half::f16::from_f64(v))
                    .collect::<Vec<_>>(),
                &[values.len()],
                &host,
            ),
            DType::BF16 => Tensor::from_slice(
                &values
                    .iter()
                    .map(|&v| half::bf16::from_f64(v))
                    .collect::<Vec<_>>(),
                &[values.len()],
                &host,
            ),
            DType::I32 => Tensor::from_slice(
                &values.iter().map(|&v| v as i32).collect::<Vec<_>>(),
                &[values.len()],
                &host,
            ),
            DType::I64 => Tensor::from_slice(
                &values.iter().map(|&v| v as i64).collect::<Vec<_>>(),
                &[values.len()],
                &host,
            ),
            DType::U8 => Tensor::from_slice(
                &values.iter().map(|&v| v as u8).collect::<Vec<_>>(),
                &[values.len()],
                &host,
            ),
        }
        .unwrap()
    }
}

#[test]
fn a_user_kernel_runs_on_a_tensor() {
    let Some(dev) = cuda() else { return };
    let t = Tensor::from_slice(
        &(0..4096).map(|i| i as f32).collect::<Vec<_>>(),
        &[4096],
        &dev,
    )
    .unwrap();
    let ptx = cudarc::nvrtc::compile_ptx(
        "extern \"C\" __global__ void twice(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }",
    )
    .unwrap();
    let view = t.cuda_view::<f32>().unwrap();
    assert_eq!(view.len(), 4096);
    let stream = view.stream().clone();
    let module = stream.context().load_module(ptx).unwrap();
    let f = module.load_function("twice").unwrap();
    let n = 4096i32;
    let mut launch = stream.launch_builder(&f);
    launch.arg(&view).arg(&n);
    unsafe { launch.launch(LaunchConfig::for_num_elems(4096)).unwrap() };
    drop(view);
    let back = t.to_vec::<f32>().unwrap();
    assert!(back.iter().enumerate().all(|(i, &v)| v == 2.0 * i as f32));
    assert!(
        t.cuda_view::<i32>().is_err(),
        "a view of the wrong dtype is refused"
    );
    let host = Tensor::zeros(&[4], &Device::host().unwrap()).unwrap();
    assert!(
        host.cuda_view::<f32>().is_err(),
        "a host tensor has no CUDA view"
    );
}

#[test]
fn a_scope_on_the_gpu_reports_a_leak_with_its_site() {
    let Some(dev) = cuda() else { return };
    set_tracking(true);
    let mut stash = Vec::new();
    let line = line!() + 3;
    {
        let _scope = ScopeGuard::enter(ScopeOptions::new("gpu step").leaks(LeakPolicy::Allow));
        stash.push(Tensor::zeros(&[256, 256], &dev).unwrap());
    }
    let r = stash[0].track_record().expect("tracked");
    assert_eq!(r.site().line(), line);
    assert_eq!(r.bytes(), 256 * 256 * 4);
    assert!(r.device().starts_with("cuda:0"));
}
