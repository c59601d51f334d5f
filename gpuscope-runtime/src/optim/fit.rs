//! The largest batch size whose training step fits.

use crate::tensor::TensorError;

/// One batch size tried by [`fit_batch_size`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FitTry {
    /// The batch size.
    pub batch_size: usize,
    /// Whether its step fit.
    pub fit: bool,
}

/// What [`fit_batch_size`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchFit {
    /// The largest batch size that fit.
    pub batch_size: usize,
    /// Every try, in order.
    pub tries: Vec<FitTry>,
}

/// The sizes tried, in order, those that ran out of memory marked `✗`:
/// `1 2 4 8✗ 6 7✗`.
///
/// ```
/// use gpuscope_runtime::optim::{BatchFit, FitTry};
/// let fit = BatchFit {
///     batch_size: 6,
///     tries: vec![
///         FitTry { batch_size: 4, fit: true },
///         FitTry { batch_size: 8, fit: false },
///         FitTry { batch_size: 6, fit: true },
///     ],
/// };
/// assert_eq!(fit.to_string(), "4 8✗ 6");
/// ```
impl std::fmt::Display for BatchFit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, t) in self.tries.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            let mark = if t.fit { "" } else { "✗" };
            write!(f, "{sep}{}{mark}", t.batch_size)?;
        }
        Ok(())
    }
}

/// Finds the largest batch size in `1..=max` whose `step` fits: doubles from 1 until a
/// step runs out of memory (or `max` fits), then bisects between the last size that fit
/// and the first that did not.
///
/// A step that fails with the allocator's out-of-memory error
/// (`TensorError::OutOfMemory(_)` or `TensorError::Alloc(AllocError::OutOfMemory(_))`,
/// see [`TensorError::is_out_of_memory`]) counts as "does not fit"; any other error ends
/// the search and is returned. Everything a try allocated is freed when `step` returns
/// (its tensors are dropped as the error unwinds through `?`), so a failed try leaves
/// nothing behind; make `step` clear what it stores elsewhere (call `zero_grad()`).
/// Memory is whatever the device has, or the allocator's cap:
/// `device.allocator().set_memory_limit(Some(bytes))`.
///
/// Returns the out-of-memory error of batch size 1 when not even that fits.
///
/// ```
/// use gpuscope_runtime::{Device, Tensor, optim::fit_batch_size};
/// # use std::sync::Arc;
/// # use gpuscope_runtime::{alloc::AllocConfig, backend::host::HostBackend};
/// # let dev = Device::with_backend(Arc::new(HostBackend::new()), AllocConfig::default()).unwrap();
/// dev.allocator().set_memory_limit(Some(8 << 20)); // 8 MiB
/// let fit = fit_batch_size(4096, |batch| {
///     let x = Tensor::zeros(&[batch, 1024], &dev)?; // 4 KiB a row
///     let _y = x.relu()?;
///     Ok(())
/// })
/// .unwrap();
/// // Two 4 KiB-a-row tensors under 8 MiB: about 1024 rows.
/// assert!((512..=1024).contains(&fit.batch_size), "{fit:?}");
/// ```
pub fn fit_batch_size<F>(max: usize, mut step: F) -> Result<BatchFit, TensorError>
where
    F: FnMut(usize) -> Result<(), TensorError>,
{
    let mut tries = Vec::new();
    let mut run = |b: usize, tries: &mut Vec<FitTry>| -> Result<Option<TensorError>, TensorError> {
        match step(b) {
            Ok(()) => {
                tries.push(FitTry {
                    batch_size: b,
                    fit: true,
                });
                Ok(None)
            }
            Err(e) if e.is_out_of_memory() => {
                tries.push(FitTry {
                    batch_size: b,
                    fit: false,
                });
                Ok(Some(e))
            }
            Err(e) => Err(e),
        }
    };
    if max == 0 {
        return Err(TensorError::InvalidArgument {
            op: "fit_batch_size",
            reason: "the largest batch size to try must be at least 1".into(),
        });
    }
    // `good` fits; `bad` does not (max + 1: not tried).
    let (mut good, mut bad) = (0usize, max + 1);
    let mut b = 1usize;
    loop {
        match run(b, &mut tries)? {
            None => {
                good = b;
                if b == max {
                    break;
                }
                b = (b * 2).min(max);
            }
            Some(e) => {
                if b == 1 {
                    return Err(e);
                }
                bad = b;
                break;
            }
        }
    }
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        match run(mid, &mut tries)? {
            None => good = mid,
            Some(_) => bad = mid,
        }
    }
    Ok(BatchFit {
        batch_size: good,
        tries,
    })
}
