//! What gpuscope remembers about each tracked tensor storage, as a copy taken at one
//! moment: where it was made, what it holds, where it lives, which scope holds it.

use std::panic::Location;

use smallvec::SmallVec;

use crate::dtype::DType;

use super::site::ScopeSite;

/// A tracked tensor storage, as it was when this copy was taken: from
/// [`Tensor::track_record`](crate::Tensor::track_record), a [`LeakReport`](super::LeakReport)
/// or [`report_live`](crate::scope::report_live).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackRecord {
    pub(crate) id: u64,
    pub(crate) site: &'static Location<'static>,
    pub(crate) bytes: usize,
    pub(crate) dtype: DType,
    pub(crate) shape: SmallVec<[usize; 4]>,
    pub(crate) device: &'static str,
    pub(crate) device_id: u32,
    pub(crate) addr: u64,
    pub(crate) owner: Option<ScopeSite>,
    pub(crate) leaked_from: Option<ScopeSite>,
}

impl TrackRecord {
    /// For tests: an `f32` record of `bytes` bytes made at `site`, on the host, in no
    /// scope.
    #[cfg(test)]
    pub(crate) fn for_test(site: &'static Location<'static>, bytes: usize) -> TrackRecord {
        TrackRecord {
            id: 1,
            site,
            bytes,
            dtype: DType::F32,
            shape: smallvec::smallvec![bytes / 4],
            device: "host:0 (host)",
            device_id: 1,
            addr: 0,
            owner: None,
            leaked_from: None,
        }
    }

    /// A number unique to this storage in the process (increasing on each thread).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Where the tensor was created (file, line, column).
    pub fn site(&self) -> &'static Location<'static> {
        self.site
    }

    /// Bytes of its storage.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Shape when created.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The device, as [`Device::description`](crate::Device::description) names it.
    pub fn device(&self) -> &'static str {
        self.device
    }

    /// The device's number in this process ([`Device::id`](crate::Device::id)).
    pub fn device_id(&self) -> u32 {
        self.device_id
    }

    /// The device address of its storage (the allocator's block).
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// The open scope that holds it (`None`: outside every scope).
    pub fn owner(&self) -> Option<ScopeSite> {
        self.owner
    }

    /// The scope that reported it leaked, as "`name` at file:line:column".
    pub fn leaked_from(&self) -> Option<String> {
        self.leaked_from.map(|s| s.to_string())
    }

    /// The scope that reported it leaked.
    pub fn leaked_scope(&self) -> Option<ScopeSite> {
        self.leaked_from
    }
}
