//! Where tracking records live: slots in chunks that are never freed, so that a tensor's
//! storage can point at its record with a plain `&'static` reference.
//!
//! Tracking a tensor costs no atomic read-modify-write and no lock: a thread takes a
//! free slot from its own list, fills it, and lists it in its innermost scope; dropping
//! the storage is one atomic store. Other threads only *read* slots ([`report_live`]
//! scans every chunk), so each slot is a sequence lock with a single writer: the thread
//! whose scope (or root list) holds the slot. A reader retries when it sees a write in
//! progress, so it never mixes the fields of two tensors.
//!
//! A slot is reused only after its storage was dropped *and* the list holding it let it
//! go (at scope exit, or when a thread's root list is pruned); free slots of threads
//! that ended go to a shared pool that new threads draw from.
//!
//! [`report_live`]: super::report_live

use std::panic::Location;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize};

use smallvec::SmallVec;

use crate::dtype::DType;
use crate::intern;
use crate::record::{ScopeSite, TrackRecord};

use super::record::TrackState;
use super::seqlock::SeqLock;

/// Dimensions stored in the slot itself; longer shapes are interned once and pointed to.
const INLINE_DIMS: usize = 6;
/// Slots per chunk.
const CHUNK_SLOTS: usize = 256;
/// Slots a thread takes from the shared pool at once.
const REFILL: usize = 256;

/// A `&'static str` in two atomics.
struct StrCell {
    ptr: AtomicPtr<u8>,
    len: AtomicUsize,
}

impl StrCell {
    const fn new() -> StrCell {
        StrCell {
            ptr: AtomicPtr::new(std::ptr::null_mut()),
            len: AtomicUsize::new(0),
        }
    }

    #[inline]
    fn set(&self, s: &'static str) {
        self.ptr.store(s.as_ptr().cast_mut(), Ordering::Relaxed);
        self.len.store(s.len(), Ordering::Relaxed);
    }

    #[inline]
    fn clear(&self) {
        self.ptr.store(std::ptr::null_mut(), Ordering::Relaxed);
    }

    /// The string, read inside a sequence-lock read that validates it afterwards.
    fn get(&self) -> Option<&'static str> {
        let ptr = self.ptr.load(Ordering::Relaxed);
        if ptr.is_null() {
            return None;
        }
        let len = self.len.load(Ordering::Relaxed);
        // SAFETY: `ptr` and `len` were stored together from one `&'static str` (by the
        // slot's single writer, inside its write section); the caller discards the value
        // unless the section it read is unchanged, and a `&'static str` stays valid
        // however old the pair is.
        Some(unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(ptr, len)) })
    }
}

/// A [`ScopeSite`] in atomics (`None` while the name is unset).
struct SiteCell {
    name: StrCell,
    file: StrCell,
    line_column: AtomicU64,
}

impl SiteCell {
    const fn new() -> SiteCell {
        SiteCell {
            name: StrCell::new(),
            file: StrCell::new(),
            line_column: AtomicU64::new(0),
        }
    }

    #[inline]
    fn set(&self, site: Option<&ScopeSite>) {
        match site {
            Some(s) => {
                self.name.set(s.name);
                self.file.set(s.file);
                self.line_column
                    .store(((s.line as u64) << 32) | s.column as u64, Ordering::Relaxed);
            }
            None => self.name.clear(),
        }
    }

    fn get(&self) -> Option<ScopeSite> {
        let name = self.name.get()?;
        let file = self.file.get().unwrap_or("");
        let lc = self.line_column.load(Ordering::Relaxed);
        Some(ScopeSite {
            name,
            file,
            line: (lc >> 32) as u32,
            column: lc as u32,
        })
    }
}

/// What a new record describes.
pub(crate) struct NewRecord<'a> {
    pub site: &'static Location<'static>,
    pub bytes: usize,
    pub dtype: DType,
    pub shape: &'a [usize],
    pub device: &'static str,
    pub device_id: u32,
    pub addr: u64,
    pub owner: Option<&'a ScopeSite>,
}

/// One tracking record.
pub(crate) struct Slot {
    /// Odd while the writer is changing the fields below.
    seq: SeqLock,
    /// Whether the storage is alive (cleared by the storage's drop, on any thread).
    alive: AtomicBool,
    /// [`TrackState`], set by `escape`/`keep` and at scope exit.
    state: AtomicU8,
    dtype: AtomicU8,
    ndim: AtomicU8,
    device_id: AtomicU32,
    id: AtomicU64,
    addr: AtomicU64,
    site: AtomicPtr<Location<'static>>,
    bytes: AtomicUsize,
    device: StrCell,
    dims: [AtomicUsize; INLINE_DIMS],
    /// Dimensions of a shape longer than [`INLINE_DIMS`] (interned, never freed).
    long_dims: AtomicPtr<usize>,
    /// The scope that holds it now (`None`: outside every scope).
    owner: SiteCell,
    /// The scope that reported it leaked.
    leaked: SiteCell,
}

/// A record, as a storage and a scope hold it.
pub(crate) type SlotRef = &'static Slot;

impl Slot {
    const fn new() -> Slot {
        Slot {
            seq: SeqLock::new(),
            alive: AtomicBool::new(false),
            state: AtomicU8::new(0),
            dtype: AtomicU8::new(0),
            ndim: AtomicU8::new(0),
            device_id: AtomicU32::new(0),
            id: AtomicU64::new(0),
            addr: AtomicU64::new(0),
            site: AtomicPtr::new(std::ptr::null_mut()),
            bytes: AtomicUsize::new(0),
            device: StrCell::new(),
            dims: [const { AtomicUsize::new(0) }; INLINE_DIMS],
            long_dims: AtomicPtr::new(std::ptr::null_mut()),
            owner: SiteCell::new(),
            leaked: SiteCell::new(),
        }
    }

    /// Runs `write` as the slot's single writer, inside its sequence lock.
    #[inline]
    fn write(&self, write: impl FnOnce(&Slot)) {
        self.seq.write(|| write(self));
    }

    /// Reads a consistent value through the sequence lock.
    fn read<T>(&self, read: impl Fn(&Slot) -> T) -> T {
        self.seq.read(|| read(self))
    }

    /// Makes this (free) slot describe a new live storage. Only the thread that took it
    /// from a free list calls this.
    #[inline]
    pub fn fill(&self, id: u64, r: &NewRecord<'_>) {
        self.write(|s| {
            s.id.store(id, Ordering::Relaxed);
            s.site.store(
                (r.site as *const Location<'static>).cast_mut(),
                Ordering::Relaxed,
            );
            s.bytes.store(r.bytes, Ordering::Relaxed);
            s.dtype.store(r.dtype as u8, Ordering::Relaxed);
            s.device.set(r.device);
            s.device_id.store(r.device_id, Ordering::Relaxed);
            s.addr.store(r.addr, Ordering::Relaxed);
            let n = r.shape.len();
            s.ndim
                .store(n.min(u8::MAX as usize) as u8, Ordering::Relaxed);
            if n <= INLINE_DIMS {
                for (cell, &d) in s.dims.iter().zip(r.shape) {
                    cell.store(d, Ordering::Relaxed);
                }
            } else {
                s.long_dims.store(
                    intern::shape(r.shape).as_ptr().cast_mut(),
                    Ordering::Relaxed,
                );
            }
            s.owner.set(r.owner);
            s.leaked.set(None);
            s.state.store(TrackState::Scoped as u8, Ordering::Relaxed);
        });
        self.alive.store(true, Ordering::Release);
    }

    /// Records the scope that holds it now.
    #[inline]
    pub fn set_owner(&self, owner: Option<&ScopeSite>) {
        self.write(|s| s.owner.set(owner));
    }

    /// Marks it leaked from `scope`.
    pub fn mark_leaked(&self, scope: &ScopeSite) {
        self.write(|s| s.leaked.set(Some(scope)));
        self.set_state(TrackState::Leaked);
    }

    /// The device the record names (a single load: a hint, checked again by the full
    /// copy's sequence lock).
    #[inline]
    pub fn device_id(&self) -> u32 {
        self.device_id.load(Ordering::Relaxed)
    }

    #[inline]
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// The storage is gone: the last thing a storage does with its slot.
    #[inline]
    pub fn mark_dropped(&self) {
        self.alive.store(false, Ordering::Release);
    }

    #[inline]
    pub fn state(&self) -> TrackState {
        TrackState::from_u8(self.state.load(Ordering::Acquire))
    }

    #[inline]
    pub fn set_state(&self, state: TrackState) {
        self.state.store(state as u8, Ordering::Release);
    }

    /// A copy of what the record says now.
    pub fn snapshot(&self) -> TrackRecord {
        self.read(|s| {
            let n = s.ndim.load(Ordering::Relaxed) as usize;
            let mut shape: SmallVec<[usize; 4]> = SmallVec::new();
            if n <= INLINE_DIMS {
                shape.extend(s.dims[..n].iter().map(|d| d.load(Ordering::Relaxed)));
            } else {
                let p = s.long_dims.load(Ordering::Relaxed);
                if !p.is_null() {
                    // SAFETY: `long_dims` points at an interned `[usize]` of `ndim`
                    // elements that is never freed; the pair is validated by the lock.
                    shape.extend_from_slice(unsafe { std::slice::from_raw_parts(p, n) });
                }
            }
            let site = s.site.load(Ordering::Relaxed);
            TrackRecord {
                id: s.id.load(Ordering::Relaxed),
                // SAFETY: `site` is null only before the first fill; it then always
                // holds a `&'static Location`.
                site: unsafe { site.as_ref() }.unwrap_or(Location::caller()),
                bytes: s.bytes.load(Ordering::Relaxed),
                dtype: dtype_from_u8(s.dtype.load(Ordering::Relaxed)),
                shape,
                device: s.device.get().unwrap_or("?"),
                device_id: s.device_id.load(Ordering::Relaxed),
                addr: s.addr.load(Ordering::Relaxed),
                owner: s.owner.get(),
                leaked_from: s.leaked.get(),
            }
        })
    }
}

fn dtype_from_u8(v: u8) -> DType {
    DType::ALL.get(v as usize).copied().unwrap_or(DType::U8)
}

// ---------------------------------------------------------------------------------------
// Chunks and the shared pool.

/// Every chunk ever made (scanned by `report_live`).
static CHUNKS: Mutex<Vec<&'static [Slot]>> = Mutex::new(Vec::new());
/// Free slots of threads that ended.
static POOL: Mutex<Vec<SlotRef>> = Mutex::new(Vec::new());
/// Slots still alive that a thread which ended was holding; they go to [`POOL`] once
/// their storage is dropped.
static ORPHANS: Mutex<Vec<SlotRef>> = Mutex::new(Vec::new());

/// Fills `free` with slots: from the shared pool, else a new chunk.
#[cold]
pub(crate) fn refill(free: &mut Vec<SlotRef>) {
    // The first tracked tensor of the process arms the exit summary.
    super::exit::arm();
    {
        let mut orphans = super::stack::lock(&ORPHANS);
        if !orphans.is_empty() {
            let mut pool = super::stack::lock(&POOL);
            orphans.retain(|s| {
                let alive = s.is_alive();
                if !alive {
                    pool.push(s);
                }
                alive
            });
        }
    }
    {
        let mut pool = super::stack::lock(&POOL);
        let take = pool.len().min(REFILL);
        let at = pool.len() - take;
        free.extend(pool.drain(at..));
    }
    if free.is_empty() {
        let chunk: &'static [Slot] = Box::leak(
            (0..CHUNK_SLOTS)
                .map(|_| Slot::new())
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        );
        super::stack::lock(&CHUNKS).push(chunk);
        free.extend(chunk.iter().rev());
    }
}

/// A thread is ending: its free slots go to the pool, the live ones it still lists wait
/// in the orphan list.
pub(crate) fn retire(free: Vec<SlotRef>, listed: impl Iterator<Item = SlotRef>) {
    let mut dead = free;
    let mut alive = Vec::new();
    for s in listed {
        if s.is_alive() {
            alive.push(s);
        } else {
            dead.push(s);
        }
    }
    super::stack::lock(&POOL).extend(dead);
    super::stack::lock(&ORPHANS).extend(alive);
}

/// Every live record, in creation order (ids are handed out in per-thread blocks, so
/// this is creation order on each thread).
pub(crate) fn live_records() -> Vec<TrackRecord> {
    let mut out = live_records_where(|_| true);
    out.sort_by_key(|r| r.id);
    out
}

/// The live records whose slot passes `keep` (a quick look before the full copy), in
/// no order.
pub(crate) fn live_records_where(keep: impl Fn(&Slot) -> bool) -> Vec<TrackRecord> {
    let chunks: Vec<&'static [Slot]> = super::stack::lock(&CHUNKS).clone();
    let mut out = Vec::new();
    for chunk in chunks {
        for slot in chunk {
            if slot.is_alive() && keep(slot) {
                out.push(slot.snapshot());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site() -> &'static Location<'static> {
        Location::caller()
    }

    #[test]
    fn a_slot_reads_back_what_was_written_including_long_shapes() {
        let slot: SlotRef = Box::leak(Box::new(Slot::new()));
        let scope = ScopeSite {
            name: "step",
            file: "src/x.rs",
            line: 3,
            column: 4,
        };
        let shape = [1, 2, 3, 4, 5, 6, 7, 8];
        slot.fill(
            7,
            &NewRecord {
                site: site(),
                bytes: 40320 * 4,
                dtype: DType::BF16,
                shape: &shape,
                device: "host:0 (host)",
                device_id: 1,
                addr: 4096,
                owner: Some(&scope),
            },
        );
        let r = slot.snapshot();
        assert_eq!(r.id(), 7);
        assert_eq!(r.shape(), &shape);
        assert_eq!(r.dtype(), DType::BF16);
        assert_eq!(r.device(), "host:0 (host)");
        assert_eq!(r.owner(), Some(scope));
        assert!(slot.is_alive());
        slot.mark_leaked(&scope);
        assert_eq!(slot.state(), TrackState::Leaked);
        assert!(
            slot.snapshot()
                .leaked_from()
                .unwrap()
                .contains("`step` at src/x.rs:3:4")
        );
        slot.mark_dropped();
        assert!(!slot.is_alive());
        // Reused for a short shape, with no owner.
        slot.fill(
            8,
            &NewRecord {
                site: site(),
                bytes: 4,
                dtype: DType::F32,
                shape: &[1],
                device: "host:0 (host)",
                device_id: 1,
                addr: 4096,
                owner: None,
            },
        );
        let r = slot.snapshot();
        assert_eq!(
            (r.id(), r.shape(), r.owner(), r.leaked_from()),
            (8, &[1][..], None, None)
        );
        assert_eq!(slot.state(), TrackState::Scoped);
    }

    #[test]
    fn every_dtype_survives_the_round_trip() {
        for d in DType::ALL {
            assert_eq!(dtype_from_u8(d as u8), d);
        }
    }

    /// A reader on another thread never sees the fields of two different records
    /// mixed, while the writer keeps rewriting the slot. The writer goes on until the
    /// reader has checked many records (a release build writes 200,000 before a new
    /// thread may even be scheduled).
    #[test]
    fn readers_never_see_a_torn_record() {
        use std::sync::atomic::AtomicU64;
        let slot: SlotRef = Box::leak(Box::new(Slot::new()));
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let seen = std::sync::Arc::new(AtomicU64::new(0));
        let (stop2, seen2) = (stop.clone(), seen.clone());
        let reader = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                let r = slot.snapshot();
                if r.id() == 0 {
                    continue;
                }
                // Writer invariant: bytes == id * 4 and shape == [id].
                assert_eq!(r.bytes() as u64, r.id() * 4, "torn record");
                assert_eq!(r.shape(), &[r.id() as usize], "torn record");
                seen2.fetch_add(1, Ordering::Relaxed);
            }
        });
        let start = std::time::Instant::now();
        let mut id = 1u64;
        while id < 200_000
            || seen.load(Ordering::Relaxed) < 10_000 && start.elapsed().as_secs() < 20
        {
            slot.fill(
                id,
                &NewRecord {
                    site: site(),
                    bytes: (id * 4) as usize,
                    dtype: DType::F32,
                    shape: &[id as usize],
                    device: "host:0 (host)",
                    device_id: 1,
                    addr: id * 4,
                    owner: None,
                },
            );
            id += 1;
        }
        stop.store(true, Ordering::Relaxed);
        reader.join().expect("reader");
        assert!(
            seen.load(Ordering::Relaxed) >= 10_000,
            "the reader checked too few records"
        );
    }
}
