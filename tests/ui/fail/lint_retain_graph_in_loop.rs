// retain_graph_in_loop (warn): a backward call keeping the graph inside a loop.
#![deny(warnings)]

use gpuscope::{Tensor, TensorError, gpu_scope};

fn backward_retaining(loss: &Tensor, retain_graph: bool) -> Result<(), TensorError> {
    let _ = retain_graph;
    loss.backward()
}

#[gpu_scope]
fn train(batches: &[Tensor]) -> Result<(), TensorError> {
    for batch in batches {
        let loss = batch.mean()?;
        backward_retaining(&loss, true)?;
    }
    Ok(())
}

fn main() {
    let _ = train(&[]);
}
