//! The model of the reference script (`bench/torch_gpt.py`): a decoder-only transformer,
//! pre-LayerNorm, learned positions, causal multi-head attention, a GELU MLP four times
//! wider, the output head tied to the token embedding; GPT-2's initialisation (weights
//! N(0, 0.02), biases 0, layer norms 1 and 0).

use std::panic::Location;
use std::sync::{Arc, OnceLock};

use gpuscope::autograd::{checkpoint, on_backward};
use gpuscope::tensor::{DType, Generator};
use gpuscope::{Device, Tensor, TensorError, no_grad};

/// PyTorch's `nn.LayerNorm` default.
const EPS: f64 = 1e-5;

/// The sizes of a model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub layers: usize,
    pub heads: usize,
    pub embd: usize,
    pub block: usize,
    pub vocab: usize,
}

impl Config {
    /// Checks the sizes fit together; the error says which flag to change.
    pub fn check(&self) -> Result<(), String> {
        let positive = [
            ("--layers", self.layers),
            ("--heads", self.heads),
            ("--embd", self.embd),
            ("--block", self.block),
            ("--vocab", self.vocab),
        ];
        for (flag, v) in positive {
            if v == 0 {
                return Err(format!("{flag} must be at least 1"));
            }
        }
        if self.embd % self.heads != 0 {
            return Err(format!(
                "--heads {} does not divide --embd {}: each head takes embd/heads channels; \
                 choose heads among the divisors of {} (e.g. {})",
                self.heads,
                self.embd,
                self.embd,
                divisors(self.embd)
            ));
        }
        if self.vocab > 1 << 16 {
            return Err(format!(
                "--vocab {} is more than tokens stored as u16 can name (65536)",
                self.vocab
            ));
        }
        Ok(())
    }
}

fn divisors(n: usize) -> String {
    let d: Vec<String> = (1..=n.min(64))
        .filter(|d| n % d == 0)
        .map(|d| d.to_string())
        .collect();
    d.join(", ")
}

/// A weight and a bias.
#[derive(Clone)]
pub struct Affine {
    pub w: Tensor,
    pub b: Tensor,
}

/// One transformer block.
#[derive(Clone)]
pub struct Block {
    pub ln1: Affine,
    /// `[3·embd, embd]`: queries, keys and values in one product.
    pub qkv: Affine,
    pub proj: Affine,
    pub ln2: Affine,
    pub fc: Affine,
    pub out: Affine,
    pub heads: usize,
    /// Keep only q, k, v for backward and compute the attention matrix again there
    /// (`Tensor::causal_attention_recomputed`; the example's `--sdpa`).
    pub recompute_attention: bool,
}

/// The attention of a block; its tensors are made at the caller's line, which it notes
/// as `ATTENTION_SITE` (both variants).
#[track_caller]
fn attend(qkv: &Tensor, heads: usize, recompute: bool) -> Result<Tensor, TensorError> {
    let here = Location::caller();
    ATTENTION_SITE.get_or_init(|| here);
    if recompute {
        qkv.causal_attention_recomputed(heads)
    } else {
        qkv.causal_attention(heads)
    }
}

/// Where the attention's tensors are made (the line of `causal_attention`), for the
/// memory timeline.
pub static ATTENTION_SITE: OnceLock<&'static Location<'static>> = OnceLock::new();

impl Block {
    /// `x + attn(ln1(x))`, then `+ mlp(ln2(·))`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor, TensorError> {
        let h = x.layer_norm(&self.ln1.w, &self.ln1.b, EPS)?;
        let qkv = h.linear(&self.qkv.w, Some(&self.qkv.b))?;
        let a = attend(&qkv, self.heads, self.recompute_attention)?;
        drop(qkv);
        let x = x.add(&a.linear(&self.proj.w, Some(&self.proj.b))?)?;
        let h = x.layer_norm(&self.ln2.w, &self.ln2.b, EPS)?;
        let f = h.linear(&self.fc.w, None)?.bias_gelu(&self.fc.b)?;
        x.add(&f.linear(&self.out.w, Some(&self.out.b))?)
    }
}

/// Called with the name of each point of a step the memory timeline samples.
pub type Probe = Arc<dyn Fn(&str) + Send + Sync>;

/// The model.
pub struct Gpt {
    pub cfg: Config,
    /// The token embedding, also the output head (tied).
    pub wte: Tensor,
    pub wpe: Tensor,
    pub blocks: Vec<Block>,
    pub lnf: Affine,
}

fn normal(shape: &[usize], g: &mut Generator, dev: &Device) -> Result<Tensor, TensorError> {
    let w = no_grad(|| Tensor::randn_with(shape, DType::F32, g, dev)?.mul_scalar(0.02))?;
    Ok(w.set_requires_grad(true))
}

fn filled(n: usize, v: f32, dev: &Device) -> Result<Tensor, TensorError> {
    Ok(Tensor::full(&[n], v, dev)?.set_requires_grad(true))
}

fn linear(out: usize, inp: usize, g: &mut Generator, dev: &Device) -> Result<Affine, TensorError> {
    Ok(Affine {
        w: normal(&[out, inp], g, dev)?,
        b: filled(out, 0.0, dev)?,
    })
}

fn layer_norm(n: usize, dev: &Device) -> Result<Affine, TensorError> {
    Ok(Affine {
        w: filled(n, 1.0, dev)?,
        b: filled(n, 0.0, dev)?,
    })
}

impl Gpt {
    /// A model of `cfg` on `dev`, initialised from `seed`.
    pub fn new(cfg: Config, dev: &Device, seed: u64) -> Result<Gpt, TensorError> {
        let mut g = Generator::new(seed);
        let c = cfg.embd;
        let wte = normal(&[cfg.vocab, c], &mut g, dev)?;
        let wpe = normal(&[cfg.block, c], &mut g, dev)?;
        let mut blocks = Vec::with_capacity(cfg.layers);
        for _ in 0..cfg.layers {
            blocks.push(Block {
                ln1: layer_norm(c, dev)?,
                qkv: linear(3 * c, c, &mut g, dev)?,
                proj: linear(c, c, &mut g, dev)?,
                ln2: layer_norm(c, dev)?,
                fc: linear(4 * c, c, &mut g, dev)?,
                out: linear(c, 4 * c, &mut g, dev)?,
                heads: cfg.heads,
                recompute_attention: false,
            });
        }
        Ok(Gpt {
            cfg,
            wte,
            wpe,
            blocks,
            lnf: layer_norm(c, dev)?,
        })
    }

    /// Every parameter (each once: the head is `wte`).
    pub fn params(&self) -> Vec<Tensor> {
        let mut p = vec![self.wte.clone(), self.wpe.clone()];
        for b in &self.blocks {
            for a in [&b.ln1, &b.qkv, &b.proj, &b.ln2, &b.fc, &b.out] {
                p.push(a.w.clone());
                p.push(a.b.clone());
            }
        }
        p.push(self.lnf.w.clone());
        p.push(self.lnf.b.clone());
        p
    }

    /// Every block's attention keeps only q, k, v for backward (`recompute`) or also its
    /// attention matrix.
    pub fn set_recompute_attention(&mut self, recompute: bool) {
        for b in &mut self.blocks {
            b.recompute_attention = recompute;
        }
    }

    /// The number of parameters.
    pub fn numel(&self) -> usize {
        self.params().iter().map(Tensor::numel).sum()
    }

    /// The mean cross-entropy of predicting `targets` (`[batch·block]`, `i32`) from
    /// `idx` (`[batch, block]`, `i32`). With `checkpoint`, each block keeps only its input
    /// and runs again during `backward()`. `probe` is called after each block's forward
    /// step and when the backward pass reaches each block's output.
    pub fn loss(
        &self,
        idx: &Tensor,
        targets: &Tensor,
        checkpointed: bool,
        probe: Option<&Probe>,
    ) -> Result<Tensor, TensorError> {
        let (b, t) = (idx.shape()[0], idx.shape()[1]);
        let pos = self.wpe.narrow(0, 0, t)?;
        let mut x = self.wte.embedding(idx)?.add(&pos)?;
        for (i, block) in self.blocks.iter().enumerate() {
            x = if checkpointed {
                let block = block.clone();
                checkpoint(&x, move |x| block.forward(x))?
            } else {
                block.forward(&x)?
            };
            if let Some(p) = probe {
                p(&format!("forward: block {i}"));
                let p = p.clone();
                x = on_backward(&x, move |_| {
                    p(&format!("backward: block {i}"));
                    Ok(())
                });
            }
        }
        let h = x.layer_norm(&self.lnf.w, &self.lnf.b, EPS)?;
        drop(x);
        let logits = h
            .reshape(&[b * t, self.cfg.embd])?
            .matmul_t(&self.wte, false, true)?;
        drop(h);
        let loss = logits.cross_entropy(targets)?;
        if let Some(p) = probe {
            p("forward: loss");
        }
        Ok(loss)
    }
}
