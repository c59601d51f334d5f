use candle_core::{D, Result, Tensor};

/// The batch's accuracy, read to the host: called every batch of every epoch (true).
pub fn batch_accuracy(logits: &Tensor, labels: &Tensor) -> Result<f32> {
    let correct = logits.argmax(D::Minus1)?.eq(labels)?.to_dtype(candle_core::DType::F32)?;
    correct.mean_all()?.to_scalar::<f32>()
}

/// The final loss, read once after training (silent).
pub fn final_report(loss: &Tensor) -> Result<f32> {
    loss.to_scalar::<f32>()
}

/// A dump of the logits, called only while debugging (silent).
pub fn dump(logits: &Tensor) -> Result<Vec<f32>> {
    logits.flatten_all()?.to_vec1::<f32>()
}
