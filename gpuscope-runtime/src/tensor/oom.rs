//! Out of memory while making a tensor: the allocator's report, plus the live tensors
//! that hold the memory, grouped by the line that made them (with tracking on).

use std::fmt;
use std::panic::Location;

use crate::alloc::AllocError;
use crate::device::Device;
use crate::format_bytes;

use super::DType;

/// The live tracked tensors of one creation site, for an out-of-memory report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveSite {
    /// The line that made them (`file:line:column`).
    pub site: String,
    /// How many are alive.
    pub tensors: usize,
    /// Their bytes together.
    pub bytes: usize,
    /// The dtype and shape of the largest of them, e.g. `f32[32, 8, 256, 256]`.
    pub largest: String,
}

/// A tensor that could not be made for lack of device memory: what it was, the
/// allocator's report, and the largest live tensors by site.
#[derive(Debug)]
pub struct TensorOom {
    /// The allocator's error (its report names the device, the sizes, the cache and
    /// what to try).
    pub error: AllocError,
    /// The tensor asked for, e.g. `f32[32, 8, 256, 256]`.
    pub wanted: String,
    /// The line that asked for it.
    pub site: &'static Location<'static>,
    /// The live tracked tensors on that device, by creation site, most bytes first (at
    /// most [`TensorOom::SITES`]; empty with tracking off).
    pub live: Vec<LiveSite>,
}

impl TensorOom {
    /// How many sites the report lists.
    pub const SITES: usize = 8;

    /// The report for `error` when making `dtype[shape]` at `site` on `device`.
    pub(crate) fn new(
        error: AllocError,
        device: &Device,
        dtype: DType,
        shape: &[usize],
        site: &'static Location<'static>,
    ) -> TensorOom {
        let mut by_site: Vec<LiveSite> = Vec::new();
        let label = device.label();
        for t in crate::scope::report_live() {
            let r = &t.record;
            if r.device() != label {
                continue;
            }
            let at = format!(
                "{}:{}:{}",
                r.site().file(),
                r.site().line(),
                r.site().column()
            );
            let shape = format!("{}{:?}", r.dtype(), r.shape());
            match by_site.iter_mut().find(|s| s.site == at) {
                Some(s) => {
                    s.tensors += 1;
                    s.bytes += r.bytes();
                    if r.bytes() * s.tensors > s.bytes {
                        s.largest = shape;
                    }
                }
                None => by_site.push(LiveSite {
                    site: at,
                    tensors: 1,
                    bytes: r.bytes(),
                    largest: shape,
                }),
            }
        }
        by_site.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.site.cmp(&b.site)));
        by_site.truncate(Self::SITES);
        TensorOom {
            error,
            wanted: format!("{dtype}{shape:?}"),
            site,
            live: by_site,
        }
    }
}

impl fmt::Display for TensorOom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "making a tensor {} at {}:{}:{}: {}",
            self.wanted,
            self.site.file(),
            self.site.line(),
            self.site.column(),
            self.error
        )?;
        if self.live.is_empty() {
            return write!(
                f,
                "  (turn tracking on, gpuscope::scope::set_tracking(true) or GPUSCOPE_TRACK=1, \
                 to see the live tensors by the line that made them)"
            );
        }
        write!(f, "  Largest live tensors by the line that made them:")?;
        for s in &self.live {
            write!(
                f,
                "\n    {:>12} in {} tensor(s) made at {} (largest {})",
                format_bytes(s.bytes),
                s.tensors,
                s.site,
                s.largest
            )?;
        }
        Ok(())
    }
}
