//! A picture of a device's memory as plain data: every segment and block with its
//! state, and for the blocks of live tensors what they hold and where they were made.
//! [`memory::snapshot`](crate::memory::snapshot) fills it; `gpuscope view` also makes
//! one from other inputs (a PyTorch snapshot).

use crate::dtype::DType;

/// The format name written in every snapshot (`format` in the JSON).
pub const SNAPSHOT_FORMAT: &str = "gpuscope-memory/1";

/// What a block is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "snake_case")
)]
pub enum BlockState {
    /// Handed out and not freed.
    Allocated,
    /// Freed, but another stream may still use it: waiting for its work.
    PendingFree,
    /// Cached, free for reuse.
    Free,
}

/// A scope, as data: its name and the annotated function's `file:line:column`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ScopeInfo {
    /// The scope's name.
    pub name: String,
    /// `file:line:column`.
    pub site: String,
}

impl From<&super::ScopeSite> for ScopeInfo {
    fn from(s: &super::ScopeSite) -> ScopeInfo {
        ScopeInfo {
            name: s.name.to_string(),
            site: s.location(),
        }
    }
}

/// The tracked tensor whose storage a block is.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TensorInfo {
    /// Its record's id ([`TrackRecord::id`](super::TrackRecord::id)).
    pub id: u64,
    /// Element type.
    pub dtype: DType,
    /// Shape when created.
    pub shape: Vec<usize>,
    /// Bytes of its storage.
    pub bytes: u64,
    /// The scope that holds it now (`None`: outside every scope).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub scope: Option<ScopeInfo>,
    /// The scope that reported it leaked.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub leaked_from: Option<ScopeInfo>,
}

/// One block of a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct BlockSnapshot {
    /// Its address.
    pub addr: u64,
    /// Its size in bytes (after rounding).
    pub size: u64,
    /// Bytes asked for (allocated blocks; else 0).
    pub requested: u64,
    /// What it is doing.
    pub state: BlockState,
    /// The line that allocated it (`file:line:column`; for a PyTorch snapshot, the
    /// innermost frame outside PyTorch), when known.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub site: Option<String>,
    /// The tracked tensor it holds.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub tensor: Option<TensorInfo>,
}

/// One segment (memory reserved from the device in one piece) and its blocks, which
/// tile it in address order.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SegmentSnapshot {
    /// Where it starts.
    pub addr: u64,
    /// Its size in bytes.
    pub size: u64,
    /// The stream whose pool it belongs to.
    pub stream: u64,
    /// `small` or `large`.
    pub pool: String,
    /// Its blocks.
    pub blocks: Vec<BlockSnapshot>,
}

impl SegmentSnapshot {
    /// Bytes in allocated blocks.
    pub fn allocated(&self) -> u64 {
        self.blocks
            .iter()
            .filter(|b| b.state == BlockState::Allocated)
            .map(|b| b.size)
            .sum()
    }
}

/// A device's memory at one moment, and its allocation history when one was being
/// recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MemorySnapshot {
    /// [`SNAPSHOT_FORMAT`].
    pub format: String,
    /// The device (`cuda:0 (NVIDIA H100 80GB HBM3)`).
    pub device: String,
    /// Bytes in allocated blocks (after rounding).
    pub allocated: u64,
    /// Bytes reserved from the device.
    pub reserved: u64,
    /// Every segment, in address order.
    pub segments: Vec<SegmentSnapshot>,
    /// Live tracked tensors whose storage is on this device but in no block of the
    /// snapshot (none, unless they were freed while it was taken).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub unplaced: Vec<TensorInfo>,
    /// The allocation history, when one was being recorded.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub history: Option<super::History>,
}

impl MemorySnapshot {
    /// Every block of every segment.
    pub fn blocks(&self) -> impl Iterator<Item = &BlockSnapshot> {
        self.segments.iter().flat_map(|s| s.blocks.iter())
    }
}
