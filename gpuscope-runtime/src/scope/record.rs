//! What gpuscope remembers about each tracked tensor: where it was made, how big it is,
//! and which scope owns it now.

use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use smallvec::SmallVec;

use crate::device::Device;
use crate::tensor::DType;

/// Ownership state of a tracked tensor's storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum TrackState {
    /// Owned by the scope it was made in (or moved to).
    Scoped = 0,
    /// Returned from its scope: moves to the parent when the scope exits.
    Escaping = 1,
    /// Adopted by the parent scope through [`keep`](crate::scope::keep).
    Kept = 2,
    /// Reported as leaked by a scope; later scopes do not report it again.
    Leaked = 3,
}

/// Ids are handed out in per-thread blocks, so making a record takes no shared atomic.
static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1);
const ID_BLOCK: u64 = 1 << 16;

thread_local! {
    static IDS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

fn next_id() -> u64 {
    IDS.with(|c| {
        let (mut next, mut end) = c.get();
        if next == end {
            next = NEXT_BLOCK.fetch_add(ID_BLOCK, Ordering::Relaxed);
            end = next + ID_BLOCK;
        }
        c.set((next + 1, end));
        next
    })
}

/// One tracked tensor storage.
#[derive(Debug)]
pub struct TrackRecord {
    id: u64,
    site: &'static Location<'static>,
    bytes: usize,
    dtype: DType,
    shape: SmallVec<[usize; 4]>,
    device: Device,
    alive: AtomicBool,
    state: AtomicU8,
    /// Name and site of the scope that reported it leaked (set once).
    leaked_from: std::sync::OnceLock<String>,
}

impl TrackRecord {
    /// Makes this (unshared, dropped) record describe a new storage.
    pub(crate) fn reuse(
        &mut self,
        site: &'static Location<'static>,
        bytes: usize,
        dtype: DType,
        shape: &[usize],
        device: &Device,
    ) {
        self.id = next_id();
        self.site = site;
        self.bytes = bytes;
        self.dtype = dtype;
        self.shape.clear();
        self.shape.extend_from_slice(shape);
        if &self.device != device {
            self.device = device.clone();
        }
        *self.alive.get_mut() = true;
        *self.state.get_mut() = TrackState::Scoped as u8;
        self.leaked_from = std::sync::OnceLock::new();
    }

    pub(crate) fn new(
        site: &'static Location<'static>,
        bytes: usize,
        dtype: DType,
        shape: &[usize],
        device: &Device,
    ) -> TrackRecord {
        TrackRecord {
            id: next_id(),
            site,
            bytes,
            dtype,
            shape: SmallVec::from_slice(shape),
            device: device.clone(),
            alive: AtomicBool::new(true),
            state: AtomicU8::new(TrackState::Scoped as u8),
            leaked_from: std::sync::OnceLock::new(),
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

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The scope that reported it leaked, if one did.
    pub fn leaked_from(&self) -> Option<&str> {
        self.leaked_from.get().map(String::as_str)
    }

    #[inline]
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    #[inline]
    pub(crate) fn mark_dropped(&self) {
        self.alive.store(false, Ordering::Release);
    }

    #[inline]
    pub(crate) fn state(&self) -> TrackState {
        match self.state.load(Ordering::Acquire) {
            0 => TrackState::Scoped,
            1 => TrackState::Escaping,
            2 => TrackState::Kept,
            _ => TrackState::Leaked,
        }
    }

    #[inline]
    pub(crate) fn set_state(&self, state: TrackState) {
        self.state.store(state as u8, Ordering::Release);
    }

    pub(crate) fn mark_leaked(&self, scope: &str) {
        self.set_state(TrackState::Leaked);
        let _ = self.leaked_from.set(scope.to_string());
    }
}
