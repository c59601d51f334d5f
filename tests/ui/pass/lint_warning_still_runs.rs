// A function with a lint warning compiles and behaves the same.
use gpuscope::{Device, Tensor, TensorError, gpu_scope};

#[gpu_scope(leaks = "deny")]
fn train(batches: &[Tensor]) -> Result<Vec<f64>, TensorError> {
    let mut history = Vec::new();
    let mut kept = Vec::new();
    for batch in batches {
        let loss = batch.mean()?;
        history.push(loss.item()?);
        kept.push(loss); // graph_accumulation: warning
    }
    Ok(history)
}

fn main() {
    gpuscope::scope::set_tracking(true);
    let dev = Device::host().unwrap();
    let batches = vec![
        Tensor::ones(&[4], &dev).unwrap(),
        Tensor::zeros(&[2], &dev).unwrap(),
    ];
    assert_eq!(train(&batches).unwrap(), vec![1.0, 0.0]);
}
