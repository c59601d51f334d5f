//! False-alarm shape (`item_in_hot_loop`, off by default; `gpuscope.toml` here sets it to
//! `warn` for this file), as in an embedding crate's examples and a video model's tests
//! (2026-11-27, fifteenth session): the embeddings come back to the host as `Vec<f32>`,
//! are put in a tensor on `Device::Cpu`, and every pair is compared with `to_scalar` in two
//! nested loops; a test builds its input on the device a helper returns, `Device::Cpu`, and
//! checks the output element by element. Those tensors are in host memory: the reads wait
//! for no device. Reported (true): the pooled embedding of each sequence of each batch, read
//! with `to_vec1` on the model's device, which could be read once per batch.

use candle_core::{Device, IndexOp, Result, Tensor};

use crate::bert::BertModel;
use crate::vae::unpatchify;

pub struct Embedder {
    model: BertModel,
    device: Device,
}

impl Embedder {
    pub fn embed(&self, batches: &[Vec<Vec<u32>>]) -> Result<Vec<Vec<f32>>> {
        let mut out = Vec::new();
        for batch in batches {
            let ids = Tensor::new(batch.concat().as_slice(), &self.device)?.unsqueeze(0)?;
            let hidden = self.model.forward(&ids)?;
            let mut start = 0;
            for seq in batch {
                let pooled = hidden.narrow(1, start, seq.len())?.mean(1)?;
                out.push(pooled.squeeze(0)?.to_vec1::<f32>()?);
                start += seq.len();
            }
        }
        Ok(out)
    }
}

/// Cosine similarity of every pair, most similar first.
pub fn most_similar(embeddings: &[Vec<f32>]) -> Result<Vec<(f32, usize, usize)>> {
    let n = embeddings.len();
    let dim = embeddings[0].len();
    let all = Tensor::from_vec(embeddings.concat(), (n, dim), &Device::Cpu)?;
    let mut similarities = vec![];
    for i in 0..n {
        let e_i = all.get(i)?;
        for j in (i + 1)..n {
            let e_j = all.get(j)?;
            let sum_ij = (&e_i * &e_j)?.sum_all()?.to_scalar::<f32>()?;
            let sum_i2 = (&e_i * &e_i)?.sum_all()?.to_scalar::<f32>()?;
            let sum_j2 = (&e_j * &e_j)?.sum_all()?.to_scalar::<f32>()?;
            similarities.push((sum_ij / (sum_i2 * sum_j2).sqrt(), i, j));
        }
    }
    similarities.sort_by(|a, b| b.0.total_cmp(&a.0));
    Ok(similarities)
}

fn test_device() -> Device {
    Device::Cpu
}

#[test]
fn unpatchify_keeps_each_value() -> Result<()> {
    let device = test_device();
    let input = Tensor::arange(0f32, 8.0, &device)?.reshape((1, 8, 1, 1, 1))?;
    let output = unpatchify(&input, 2, 2)?;
    for y in 0..2 {
        for x in 0..2 {
            let v = output.i((0, 0, 0, y, x))?.to_scalar::<f32>()?;
            assert!(v >= 0.0);
        }
    }
    Ok(())
}
