//! False-alarm shape (`out_of_place_update`, off by default; `gpuscope.toml` here sets it to
//! `warn` for this file): a model crate reaches burn only through another crate that
//! re-exports it (`pub use burn::*` as `modelkit::custom`), so the file names no library.
//! Its truncated-BPTT training step sums the per-chunk losses with
//! `sum_loss = sum_loss + loss.mul_scalar(..)` for one `backward`. burn's tensors have no
//! in-place `add_` to suggest, and a tensor type imported from a crate the lint does not know
//! is not gpuscope's: nothing to report.

use modelkit::custom::{
    Tensor,
    tensor::backend::{AutodiffBackend, Backend},
    train::TrainOutput,
};

use crate::data::ChunkedBatch;

pub struct Chunk<B: Backend> {
    pub loss: Tensor<B, 1>,
    pub state: Vec<Tensor<B, 3>>,
}

pub fn train_step<B: AutodiffBackend>(
    model: &Rnn<B>,
    batch: ChunkedBatch<B>,
) -> TrainOutput<Tensor<B, 1>> {
    let device = batch.device();
    let total_len = batch.len();
    let mut state = model.initial_state(&device);
    let mut sum_loss: Tensor<B, 1> = Tensor::zeros([1], &device);
    for (tokens, targets) in batch.chunks() {
        let chunk_len = tokens.dims()[1];
        let out: Chunk<B> = model.forward(tokens, targets, state);
        state = out.state.into_iter().map(|s| s.detach()).collect();
        sum_loss = sum_loss + out.loss.mul_scalar(chunk_len as i32);
    }
    let loss = sum_loss.div_scalar(total_len as i32);
    let grads = loss.backward();
    TrainOutput::new(grads, loss)
}
