//! [`DistributedDataParallel`]: data-parallel training over a [`ProcessGroup`], one
//! process per GPU, as PyTorch's `DistributedDataParallel` does it.
//!
//! - At construction, rank 0's parameters are broadcast to every rank.
//! - Parameters are packed, in reverse order of registration (the order backward
//!   reaches them), into buckets of about `bucket_cap_bytes`. Each bucket is one flat
//!   tensor, allocated once.
//! - [`backward`](DistributedDataParallel::backward) runs the backward pass with a hook
//!   that sees each parameter's gradient the moment it is final (after every use of a
//!   tied parameter); when a bucket's gradients are all final, they are copied into
//!   the bucket on the compute stream and the bucket is averaged across ranks on the
//!   communication stream, while backward goes on. Buckets start in the same order on
//!   every rank, as NCCL requires.
//! - At the end, the compute stream waits for the all-reduces and the averaged
//!   gradients are copied back into each parameter's `.grad()`. Every rank then holds
//!   the same gradients, so the same optimizer step keeps the parameters identical bit
//!   for bit.

use std::collections::HashMap;
use std::sync::Mutex;

use super::DistError;
use super::group::{ProcessGroup, ReduceOp, Work};
use crate::backend::DeviceAddr;
use crate::tensor::{DType, Tensor};

/// PyTorch's default bucket size.
pub const DEFAULT_BUCKET_CAP_BYTES: usize = 25 << 20;

struct Bucket {
    /// The flat tensor the bucket's gradients are packed into.
    flat: Tensor,
    /// (parameter index, element offset in `flat`).
    params: Vec<(usize, usize)>,
}

#[derive(Default)]
struct Pass {
    /// Final gradients still missing, per bucket.
    missing: Vec<usize>,
    /// Buckets launched so far (in index order).
    launched: usize,
    works: Vec<Work>,
    error: Option<DistError>,
}

/// See the [module docs](self).
pub struct DistributedDataParallel {
    group: ProcessGroup,
    params: Vec<Tensor>,
    buckets: Vec<Bucket>,
    /// Parameter storage address → parameter index.
    index: HashMap<DeviceAddr, usize>,
    /// Parameter index → bucket index.
    bucket_of: Vec<usize>,
}

impl std::fmt::Debug for DistributedDataParallel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistributedDataParallel")
            .field("params", &self.params.len())
            .field("buckets", &self.buckets.len())
            .finish()
    }
}

impl DistributedDataParallel {
    /// Wraps `params` (the model's parameters on this rank's device, in the order the
    /// model uses them) and broadcasts rank 0's values to every rank.
    pub fn new(
        group: &ProcessGroup,
        params: &[Tensor],
        bucket_cap_bytes: usize,
    ) -> Result<DistributedDataParallel, DistError> {
        const OP: &str = "DistributedDataParallel";
        let devices = group.devices();
        if devices.len() != 1 {
            return Err(DistError::Argument {
                op: OP,
                problem: format!(
                    "the group drives {} devices from this process: data parallelism runs one process per GPU (launch with torchrun, or gpuscope::dist::launch)",
                    devices.len()
                ),
            });
        }
        let device = &devices[0];
        let mut index = HashMap::new();
        for (i, p) in params.iter().enumerate() {
            if p.device() != device || !p.is_contiguous() || p.dtype() != params[0].dtype() {
                return Err(DistError::Argument {
                    op: OP,
                    problem: format!(
                        "parameter {i} ({}{:?} on {}) must be contiguous, {:?}, on {}",
                        p.dtype(),
                        p.shape(),
                        p.device().description(),
                        params[0].dtype(),
                        device.description()
                    ),
                });
            }
            if index.insert(p.addr(), i).is_some() {
                return Err(DistError::Argument {
                    op: OP,
                    problem: format!(
                        "parameter {i} is given twice (a tied weight is one parameter)"
                    ),
                });
            }
        }
        let dtype = params.first().map_or(DType::F32, Tensor::dtype);
        // Reverse order: the last parameters' gradients are final first.
        let mut buckets: Vec<Bucket> = Vec::new();
        let mut bucket_of = vec![0; params.len()];
        let mut current: Vec<(usize, usize)> = Vec::new();
        let mut elems = 0usize;
        let flush = |current: &mut Vec<(usize, usize)>,
                     elems: &mut usize,
                     buckets: &mut Vec<Bucket>|
         -> Result<(), DistError> {
            if current.is_empty() {
                return Ok(());
            }
            let flat = Tensor::zeros_dtype(&[*elems], dtype, device)?;
            crate::keep(&flat);
            buckets.push(Bucket {
                flat,
                params: std::mem::take(current),
            });
            *elems = 0;
            Ok(())
        };
        for i in (0..params.len()).rev() {
            let n = params[i].numel();
            if !current.is_empty() && (elems + n) * dtype.size() > bucket_cap_bytes {
                flush(&mut current, &mut elems, &mut buckets)?;
            }
            bucket_of[i] = buckets.len();
            current.push((i, elems));
            elems += n;
        }
        flush(&mut current, &mut elems, &mut buckets)?;
        // Every rank starts from rank 0's parameters.
        for p in params {
            group.broadcast(&[p], 0)?.wait()?;
        }
        Ok(DistributedDataParallel {
            group: group.clone(),
            params: params.to_vec(),
            buckets,
            index,
            bucket_of,
        })
    }

    /// How many buckets the gradients travel in.
    pub fn num_buckets(&self) -> usize {
        self.buckets.len()
    }

    /// The buckets' flat gradient buffers: device memory that lives as long as `self`
    /// (a leak check counts them with the parameters and the optimizer's state).
    pub fn bucket_buffers(&self) -> impl Iterator<Item = &Tensor> {
        self.buckets.iter().map(|b| &b.flat)
    }

    /// The group.
    pub fn group(&self) -> &ProcessGroup {
        &self.group
    }

    /// `loss.backward()`, with each bucket averaged across ranks as soon as its
    /// gradients are final; on return every parameter's `.grad()` holds the average
    /// over ranks (a parameter no gradient reached counts as zero).
    pub fn backward(&self, loss: &Tensor) -> Result<(), DistError> {
        let pass = Mutex::new(Pass {
            missing: self.buckets.iter().map(|b| b.params.len()).collect(),
            ..Pass::default()
        });
        let hook = |leaf: &Tensor| {
            let Some(&i) = self.index.get(&leaf.addr()) else {
                return; // not one of ours
            };
            let mut pass = pass.lock().unwrap_or_else(|e| e.into_inner());
            if pass.error.is_some() {
                return;
            }
            pass.missing[self.bucket_of[i]] -= 1;
            if let Err(e) = self.launch_ready(&mut pass) {
                pass.error = Some(e);
            }
        };
        crate::autograd::with_leaf_grad_hook(&hook, || loss.backward())?;
        let mut pass = pass.into_inner().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = pass.error.take() {
            return Err(e);
        }
        // Buckets with parameters that got no gradient go now, zeros for those.
        for m in pass.missing.iter_mut() {
            *m = 0;
        }
        self.launch_ready(&mut pass)?;
        for w in pass.works.drain(..) {
            w.wait()?;
        }
        for b in &self.buckets {
            for &(i, off) in &b.params {
                let p = &self.params[i];
                let avg = b.flat.narrow(0, off, p.numel())?;
                match p.grad() {
                    Some(g) => g.copy_from(&avg)?,
                    None => {
                        let g = avg.reshape(p.shape())?.deep_clone()?;
                        crate::keep(&g);
                        p.set_grad(Some(g));
                    }
                }
            }
        }
        Ok(())
    }

    /// Launches, in index order, every bucket whose gradients are all final.
    fn launch_ready(&self, pass: &mut Pass) -> Result<(), DistError> {
        while pass.launched < self.buckets.len() && pass.missing[pass.launched] == 0 {
            let b = &self.buckets[pass.launched];
            for &(i, off) in &b.params {
                let p = &self.params[i];
                let slot = b.flat.narrow(0, off, p.numel())?;
                match p.grad() {
                    Some(g) => slot.copy_from(&g)?,
                    None => slot.fill_(0.0)?,
                }
            }
            pass.works
                .push(self.group.all_reduce(&[&b.flat], ReduceOp::Avg)?);
            pass.launched += 1;
        }
        Ok(())
    }
}
