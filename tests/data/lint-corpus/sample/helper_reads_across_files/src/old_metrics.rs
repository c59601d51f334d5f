//! A file no module declares (left over from a refactoring): not part of the crate, so the
//! loops of the crate do not repeat its reads (silent).

use candle_core::{Result, Tensor};

pub fn batch_accuracy(logits: &Tensor) -> Result<f32> {
    logits.mean_all()?.to_scalar::<f32>()
}
