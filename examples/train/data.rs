//! The example's data and model: ten Gaussian blobs in the plane, an MLP, accuracy.

use gpuscope::tensor::{DType, Generator};
use gpuscope::{Device, Tensor, TensorError, no_grad};

/// Classes (blobs) in the data set.
pub const CLASSES: usize = 10;

/// Ten Gaussian blobs: class `c`'s centre is on a circle of radius 4 at angle `c·36°`.
pub struct Dataset {
    x: Vec<f32>,
    y: Vec<i64>,
}

impl Dataset {
    pub fn blobs(n: usize, g: &mut Generator) -> Dataset {
        let mut x = Vec::with_capacity(2 * n);
        let mut y = Vec::with_capacity(n);
        for i in 0..n {
            let c = i % CLASSES;
            let angle = c as f64 * std::f64::consts::TAU / CLASSES as f64;
            x.push((4.0 * angle.cos() + 0.7 * g.normal()) as f32);
            x.push((4.0 * angle.sin() + 0.7 * g.normal()) as f32);
            y.push(c as i64);
        }
        Dataset { x, y }
    }

    pub fn len(&self) -> usize {
        self.y.len()
    }

    /// The rows `idx` as tensors on `dev` (`[b, 2]` f32 and `[b]` i64).
    pub fn batch(&self, idx: &[usize], dev: &Device) -> Result<(Tensor, Tensor), TensorError> {
        let x: Vec<f32> = idx
            .iter()
            .flat_map(|&i| [self.x[2 * i], self.x[2 * i + 1]])
            .collect();
        let y: Vec<i64> = idx.iter().map(|&i| self.y[i]).collect();
        Ok((
            Tensor::from_vec(x, &[idx.len(), 2], dev)?,
            Tensor::from_vec(y, &[idx.len()], dev)?,
        ))
    }
}

/// `2 → hidden → hidden → 10`, GELU between layers.
pub struct Mlp {
    pub params: Vec<Tensor>,
}

impl Mlp {
    pub fn new(hidden: usize, dev: &Device, g: &mut Generator) -> Result<Mlp, TensorError> {
        let mut params = Vec::new();
        for (fan_in, fan_out) in [(2, hidden), (hidden, hidden), (hidden, CLASSES)] {
            let w = no_grad(|| {
                Tensor::randn_with(&[fan_in, fan_out], DType::F32, g, dev)?
                    .mul_scalar((2.0 / fan_in as f64).sqrt())
            })?;
            params.push(w.set_requires_grad(true));
            params.push(Tensor::zeros(&[fan_out], dev)?.set_requires_grad(true));
        }
        Ok(Mlp { params })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor, TensorError> {
        let p = &self.params;
        let h = x.matmul(&p[0])?.add(&p[1])?.gelu()?;
        let h = h.matmul(&p[2])?.add(&p[3])?.gelu()?;
        h.matmul(&p[4])?.add(&p[5])
    }

    pub fn bytes(&self) -> usize {
        self.params.iter().map(Tensor::nbytes).sum()
    }
}

/// How many rows of `logits` pick their target.
pub fn correct(logits: &Tensor, targets: &Tensor) -> Result<usize, TensorError> {
    let l = logits.to_vec::<f32>()?;
    let t = targets.to_vec::<i64>()?;
    Ok(l.chunks_exact(CLASSES)
        .zip(&t)
        .filter(|(row, t)| {
            let best = row
                .iter()
                .enumerate()
                .fold(0, |b, (i, v)| if *v > row[b] { i } else { b });
            best as i64 == **t
        })
        .count())
}

/// `0..n` in a random order.
pub fn shuffled(n: usize, g: &mut Generator) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (g.uniform() * (i + 1) as f64) as usize;
        idx.swap(i, j.min(i));
    }
    idx
}
