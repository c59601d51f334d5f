use gpuscope::{Device, Tensor, TensorError, gpu_scope, no_grad};

// Raised to `deny`: an error.
#[gpu_scope(deny(graph_accumulation))]
fn strict(batches: &[Tensor]) -> Result<usize, TensorError> {
    let mut kept = Vec::new();
    for batch in batches {
        let loss = batch.mean()?;
        kept.push(loss);
    }
    Ok(kept.len())
}

// `backward_in_no_grad` (deny) knows the function is `#[no_grad]` even though
// `#[gpu_scope]` expands first.
#[gpu_scope]
#[no_grad]
fn evaluate(batch: &Tensor) -> Result<f64, TensorError> {
    let loss = batch.mean()?;
    loss.backward()?;
    loss.item()
}

fn main() {
    let dev = Device::host().unwrap();
    let _ = strict(&[]);
    let _ = evaluate(&Tensor::zeros(&[1], &dev).unwrap());
}
