//! The code shown in the README's tour, compiled and run.

use gpuscope::{Device, Tensor, gpu_scope};

#[gpu_scope(leaks = "deny")]
fn step(x: &Tensor, dev: &Device) -> Result<Tensor, gpuscope::TensorError> {
    let tmp = Tensor::ones(x.shape(), dev)?; // released at scope exit
    let out = Tensor::zeros(x.shape(), dev)?; // returned: moves to the caller's scope
    drop(tmp);
    Ok(out)
}

#[test]
fn the_readme_tour_runs_without_a_leak() {
    gpuscope::scope::set_tracking(true);
    let dev = Device::host().unwrap();
    let x = Tensor::randn(&[4, 4], &dev).unwrap();
    let out = step(&x, &dev).unwrap();
    assert_eq!(out.shape(), &[4, 4]);
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![0.0; 16]);
}

/// The tour's `main`, as a new program runs it: the best device there is (the host in CI).
#[test]
fn the_readme_tour_main_runs_on_the_best_device() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::best()?; // the first GPU, else the host
    let x = Tensor::randn(&[64, 128], &dev)?;
    let y = step(&x, &dev)?;
    println!("{:?} on {}", y.shape(), dev.description());
    assert_eq!(y.shape(), &[64, 128]);
    Ok(())
}
