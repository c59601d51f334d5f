//! The attribute's arguments, and the documented limits of what escapes.

use super::support::*;
use super::*;

struct Model {
    device: Device,
    steps: u32,
}

impl Model {
    #[gpu_scope(name = "model_step", leaks = "deny", sync, device = &self.device)]
    fn step(&mut self) -> Tensor {
        self.steps += 1; // `device` borrowed `self` only while the scope opened
        Tensor::zeros(&[self.steps as usize], &self.device).unwrap()
    }
}

#[test]
fn all_arguments() {
    let dev = dev();
    let mut m = Model {
        device: dev,
        steps: 0,
    };
    let (t, events) = capture(|| {
        m.step();
        m.step()
    });
    assert_eq!((t.shape(), m.steps), (&[2][..], 2));
    assert!(events.is_empty(), "{events:?}");
}

#[gpu_scope(sync, device = gpuscope::Device::host().unwrap())]
fn sync_without_tracking(dev: &Device) -> f32 {
    let t = Tensor::ones(&[2], dev).unwrap();
    t.to_vec::<f32>().unwrap()[0]
}

#[test]
fn sync_scope_runs_with_tracking_off() {
    let dev = Device::host().unwrap();
    // Tracking is process-wide: only check that the function runs and returns.
    assert_eq!(sync_without_tracking(&dev), 1.0);
}

// ---------------------------------------------------------------------------------------
// Documented limits.

#[gpu_scope(name = "err_holds_tensor")]
fn err_holds_tensor(dev: &Device) -> Result<(), Tensor> {
    let t = Tensor::zeros(&[13], dev).unwrap();
    let r: Result<(), Tensor> = Err(t);
    r?;
    Ok(())
}

#[test]
fn question_mark_does_not_escape() {
    let dev = dev();
    let (r, events) = capture(|| err_holds_tensor(&dev));
    assert_eq!(r.unwrap_err().shape(), &[13]);
    // `?` returns are not rewritten: the tensor in the `Err` is reported.
    assert_eq!(leaks_of(&events, "err_holds_tensor").len(), 1, "{events:?}");
}
