// `graph_accumulation` is `warn` by default: a compiler warning over the accumulation
// (`#![deny(warnings)]` makes the test fail to compile, so that the text is checked). A
// function with errors would hide it: rustc stops before its lints.
#![deny(warnings)]

use gpuscope::{Tensor, TensorError, gpu_scope};

#[gpu_scope]
fn train(batches: &[Tensor]) -> Result<Vec<Tensor>, TensorError> {
    let mut history = Vec::new();
    for batch in batches {
        let loss = batch.mean()?;
        loss.backward()?;
        history.push(loss);
    }
    Ok(history)
}

fn main() {
    let _ = train(&[]);
}
