// scope_escape (warn, an error under `#![deny(warnings)]`): a tensor made inside a
// `#[gpu_scope]` stored into a `&mut` argument or a field of `self`, with the note saying
// how to keep it on purpose. A tensor given to `gpuscope::keep` does not fire.
#![deny(warnings)]

use gpuscope::{Device, Tensor, TensorError, gpu_scope, keep};

struct Cache {
    last: Option<Tensor>,
}

impl Cache {
    #[gpu_scope]
    fn remember(&mut self, dev: &Device) -> Result<(), TensorError> {
        let t = Tensor::zeros(&[4], dev)?;
        self.last = Some(t.relu()?);
        Ok(())
    }
}

#[gpu_scope]
fn collect(dev: &Device, history: &mut Vec<Tensor>) -> Result<(), TensorError> {
    let activation = Tensor::ones(&[2, 2], dev)?;
    history.push(activation.clone());
    let kept = Tensor::ones(&[2], dev)?;
    keep(&kept);
    history.push(kept);
    Ok(())
}

fn main() {
    let dev = Device::host().unwrap();
    let mut cache = Cache { last: None };
    let _ = cache.remember(&dev);
    let mut history = Vec::new();
    let _ = collect(&dev, &mut history);
}
