//! The per-thread scope stack: which scope holds each tracked tensor, and what happens
//! when a scope exits.
//!
//! Each thread's stack is thread-local and never locked: tracking a tensor takes a free
//! record slot (`slot`) from the thread's own list, fills it and lists it in the
//! innermost frame. At exit, records of dropped tensors go back to the free list,
//! returned and kept ones move to the parent frame (or the thread's root list outside
//! any scope), the rest are leaks; then the scope records a fence on every stream its
//! tensors used, so that the memory they gave back reaches other streams only after
//! that work is done. [`report_live`](super::report_live) reads the slots, not the
//! stacks, so it sees every thread's tensors without stopping them.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use smallvec::SmallVec;

use crate::backend::StreamId;
use crate::device::Device;
use crate::dtype::DType;

use super::policy::{LeakPolicy, leak_policy, tracking};
use super::record::{TrackState, next_id};
use super::report::{LeakReport, ScopeSite};
use super::slot::{self, NewRecord, SlotRef};

/// One open scope.
pub(crate) struct Frame {
    pub site: ScopeSite,
    pub policy: Option<LeakPolicy>,
    pub sync: bool,
    pub records: Vec<SlotRef>,
    /// Streams its tensors used, per device: each gets a fence at exit (and a wait with
    /// `sync`).
    pub streams: Streams,
}

/// The streams of a scope (rarely more than two).
pub(crate) type Streams = SmallVec<[(Device, StreamId); 2]>;

/// Open frames with `sync`, on every thread: while there are any, tensors made with
/// tracking off still tell the innermost scope their stream (so that it can wait for
/// it); while there are none, they touch no thread-local at all.
static SYNC_FRAMES: AtomicUsize = AtomicUsize::new(0);

/// Most record lists a thread keeps for reuse by its next scopes.
const SPARE_LISTS: usize = 16;

impl Frame {
    #[inline]
    fn note_stream(&mut self, device: &Device, stream: StreamId) {
        if !self
            .streams
            .iter()
            .any(|(d, s)| *s == stream && d == device)
        {
            self.streams.push((device.clone(), stream));
        }
    }
}

/// A thread's scopes, the records that outlived every scope, and its free slots.
#[derive(Default)]
pub(crate) struct ThreadScopes {
    pub frames: Vec<Frame>,
    root: Vec<SlotRef>,
    /// Length of `root` after its last pruning.
    pruned_len: usize,
    free: Vec<SlotRef>,
    /// Emptied record lists of closed scopes (saves an allocation per scope).
    spare_lists: Vec<Vec<SlotRef>>,
}

impl ThreadScopes {
    fn push_root(&mut self, r: SlotRef) {
        self.root.push(r);
        if self.root.len() >= 2 * self.pruned_len.max(64) {
            let free = &mut self.free;
            self.root.retain(|r| {
                let alive = r.is_alive();
                if !alive {
                    free.push(r);
                }
                alive
            });
            self.pruned_len = self.root.len();
        }
    }
}

impl Drop for ThreadScopes {
    fn drop(&mut self) {
        let frames = std::mem::take(&mut self.frames);
        let syncs = frames.iter().filter(|f| f.sync).count();
        SYNC_FRAMES.fetch_sub(syncs, Ordering::Relaxed);
        let listed = std::mem::take(&mut self.root)
            .into_iter()
            .chain(frames.into_iter().flat_map(|f| f.records));
        slot::retire(std::mem::take(&mut self.free), listed);
    }
}

thread_local! {
    static LOCAL: RefCell<ThreadScopes> = RefCell::new(ThreadScopes::default());
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` on this thread's scopes; `None` once the thread is tearing down its
/// thread-locals.
#[inline]
pub(crate) fn try_with_scopes<R>(f: impl FnOnce(&mut ThreadScopes) -> R) -> Option<R> {
    LOCAL.try_with(|cell| f(&mut cell.borrow_mut())).ok()
}

/// Runs `f` on this thread's scopes (with a fresh, empty stack while the thread is
/// tearing down its thread-locals).
#[inline]
pub(crate) fn with_scopes<R>(f: impl FnOnce(&mut ThreadScopes) -> R) -> R {
    let mut f = Some(f);
    if let Some(r) = try_with_scopes(|st| (f.take().expect("called once"))(st)) {
        return r;
    }
    let f = f.take().expect("not called");
    f(&mut ThreadScopes::default())
}

/// Makes the record of a new tracked tensor and lists it in the innermost scope of this
/// thread. `None` when the thread is ending (the tensor goes untracked).
#[inline]
pub(crate) fn track(
    site: &'static std::panic::Location<'static>,
    bytes: usize,
    dtype: DType,
    shape: &[usize],
    device: &Device,
    addr: u64,
    stream: StreamId,
) -> Option<SlotRef> {
    try_with_scopes(|st| {
        if st.free.is_empty() {
            slot::refill(&mut st.free);
        }
        let record = st.free.pop()?;
        let owner = st.frames.last().map(|f| &f.site);
        record.fill(
            next_id(),
            &NewRecord {
                site,
                bytes,
                dtype,
                shape,
                device: device.label(),
                device_id: device.id(),
                addr,
                owner,
            },
        );
        match st.frames.last_mut() {
            Some(f) => {
                f.note_stream(device, stream);
                f.records.push(record);
            }
            None => st.push_root(record),
        }
        Some(record)
    })
    .flatten()
}

/// A tensor made with tracking off: with a `sync` scope open anywhere, tells this
/// thread's innermost scope its stream.
#[inline]
pub(crate) fn note_untracked(device: &Device, stream: StreamId) {
    if SYNC_FRAMES.load(Ordering::Relaxed) > 0 {
        note_stream(device, stream);
    }
}

/// Notes that the innermost scope's work uses `stream` of `device` (a tensor's
/// `record_stream`), so that the scope fences it at exit.
pub(crate) fn note_stream(device: &Device, stream: StreamId) {
    try_with_scopes(|st| {
        if let Some(f) = st.frames.last_mut() {
            f.note_stream(device, stream);
        }
    });
}

/// Name of the innermost open scope on this thread.
pub fn current_scope() -> Option<String> {
    with_scopes(|st| st.frames.last().map(|f| f.site.name.to_string()))
}

/// How deep this thread's scope stack is.
pub fn scope_depth() -> usize {
    with_scopes(|st| st.frames.len())
}

pub(crate) fn push_frame(mut frame: Frame) {
    if frame.sync {
        SYNC_FRAMES.fetch_add(1, Ordering::Relaxed);
    }
    with_scopes(|st| {
        if frame.records.capacity() == 0 {
            if let Some(list) = st.spare_lists.pop() {
                frame.records = list;
            }
        }
        st.frames.push(frame)
    });
}

/// What closing a scope left to do: its report, its policy, the streams it used, and
/// whether to wait for them.
pub(crate) struct ClosedScope {
    report: LeakReport,
    policy: LeakPolicy,
    /// Whether the scope set its own policy (`leaks = ...`).
    asked: bool,
    streams: Streams,
    sync: bool,
}

/// Closes the innermost scope: returned and kept tensors move to the parent, leaks are
/// reported, records of dropped tensors are freed.
pub(crate) fn pop_frame() -> Option<ClosedScope> {
    with_scopes(|st| {
        let Frame {
            site,
            policy,
            sync,
            mut records,
            streams,
        } = st.frames.pop()?;
        if sync {
            SYNC_FRAMES.fetch_sub(1, Ordering::Relaxed);
        }
        let asked = policy.is_some();
        let policy = policy.unwrap_or_else(leak_policy);
        let mut leaked = Vec::new();
        let parent_site = st.frames.last().map(|f| f.site);
        let free = &mut st.free;
        records.retain(|r| {
            if !r.is_alive() {
                free.push(r);
                return false;
            }
            match r.state() {
                TrackState::Escaping | TrackState::Kept => r.set_state(TrackState::Scoped),
                TrackState::Leaked => {}
                TrackState::Scoped => {
                    if policy != LeakPolicy::Allow {
                        r.mark_leaked(&site);
                        leaked.push(r.snapshot());
                    }
                }
            }
            r.set_owner(parent_site.as_ref());
            true
        });
        match st.frames.last_mut() {
            Some(parent) => {
                parent.records.append(&mut records);
                // The parent's work includes the child's streams.
                for (d, s) in &streams {
                    parent.note_stream(d, *s);
                }
            }
            None => {
                for r in records.drain(..) {
                    st.push_root(r);
                }
            }
        }
        if st.spare_lists.len() < SPARE_LISTS && records.capacity() <= 1 << 16 {
            st.spare_lists.push(records);
        }
        Some(ClosedScope {
            report: LeakReport::new(site, leaked),
            policy,
            asked,
            streams,
            sync,
        })
    })
}

/// Options of one scope, as `#[gpu_scope(...)]` writes them.
#[derive(Clone, Debug)]
pub struct ScopeOptions {
    /// The scope's name (the function's, unless `name = "..."`).
    pub name: &'static str,
    /// Where the scope is (the annotated function).
    pub file: &'static str,
    /// Line of the scope's site.
    pub line: u32,
    /// Column of the scope's site.
    pub column: u32,
    /// Leak policy; `None`: the process default ([`leak_policy`]).
    pub leaks: Option<LeakPolicy>,
    /// Block until the streams its tensors used finish, at exit.
    pub sync: bool,
}

impl ScopeOptions {
    /// Options for a scope named `name` at the caller's location.
    #[track_caller]
    pub fn new(name: &'static str) -> ScopeOptions {
        let at = std::panic::Location::caller();
        ScopeOptions {
            name,
            file: at.file(),
            line: at.line(),
            column: at.column(),
            leaks: None,
            sync: false,
        }
    }

    /// Sets the leak policy.
    pub fn leaks(mut self, policy: LeakPolicy) -> Self {
        self.leaks = Some(policy);
        self
    }

    /// Blocks at exit until the scope's streams finish.
    pub fn sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }
}

/// An open scope; closes when dropped (also on early return, `?`, and panic).
///
/// Closing it moves returned and kept tensors to the parent scope, reports the rest
/// (by its leak policy), and records a fence on every stream its tensors were made or
/// recorded on ([`CachingAllocator::record_fence`](crate::alloc::CachingAllocator::record_fence)):
/// memory they gave back on a stream goes to other streams only once that fence has
/// completed. With `sync` it then waits for those streams.
///
/// `#[gpu_scope]` makes one at the top of the function and hands it the return value
/// through [`ScopeGuard::escape`]. By hand:
///
/// ```
/// use gpuscope_runtime::scope::{ScopeGuard, ScopeOptions, LeakPolicy, set_tracking};
/// use gpuscope_runtime::{Device, Tensor};
/// set_tracking(true);
/// let dev = Device::host().unwrap();
/// let kept = {
///     let scope = ScopeGuard::enter(ScopeOptions::new("step").leaks(LeakPolicy::Deny));
///     let tmp = Tensor::ones(&[256], &dev).unwrap();
///     let out = Tensor::zeros(&[4], &dev).unwrap();
///     drop(tmp);
///     scope.escape(&out); // returned: moves to the parent scope
///     out
/// }; // the scope closes: nothing leaked, `deny` stays quiet
/// assert_eq!(kept.shape(), &[4]);
/// ```
#[must_use = "a scope closes when this guard is dropped"]
pub struct ScopeGuard {
    open: bool,
    /// Guards are tied to their thread's stack.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl ScopeGuard {
    /// Opens a scope on this thread.
    pub fn enter(options: ScopeOptions) -> ScopeGuard {
        if !tracking() && !options.sync {
            return ScopeGuard {
                open: false,
                _not_send: std::marker::PhantomData,
            };
        }
        push_frame(Frame {
            site: ScopeSite {
                name: options.name,
                file: options.file,
                line: options.line,
                column: options.column,
            },
            policy: options.leaks,
            sync: options.sync,
            records: Vec::new(),
            streams: Streams::new(),
        });
        ScopeGuard {
            open: true,
            _not_send: std::marker::PhantomData,
        }
    }

    /// Closes the scope now (what dropping it does).
    pub fn close(self) {}

    /// Whether this guard opened a frame (tracking on, or `sync`).
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// A guard for the frame on top of the stack (pushed back by an async scope).
    pub(crate) fn reopened() -> ScopeGuard {
        ScopeGuard {
            open: true,
            _not_send: std::marker::PhantomData,
        }
    }
}

/// Takes the innermost frame off this thread's stack without closing it.
pub(crate) fn detach_top() -> Option<Frame> {
    with_scopes(|st| st.frames.pop())
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        self.open = false;
        let Some(closed) = pop_frame() else {
            return;
        };
        let ClosedScope {
            report,
            policy,
            asked,
            streams,
            sync,
        } = closed;
        for (device, stream) in streams {
            // Memory the scope's tensors gave back on `stream` reaches other streams
            // only once the work queued so far is done.
            if let Err(e) = device.allocator().record_fence(stream) {
                tracing::error!(target: "gpuscope::scope", error = %e, scope = report.scope.name, "scope exit: could not record a fence on {stream}");
            }
            if sync {
                if let Err(e) = device.backend().synchronize_stream(stream) {
                    tracing::error!(target: "gpuscope::scope", error = %e, scope = report.scope.name, "scope exit: could not synchronise {stream}");
                }
            }
        }
        if report.is_empty() {
            return;
        }
        let panics = policy == LeakPolicy::Deny && !std::thread::panicking();
        super::report::report(&report, asked, panics);
        if panics {
            panic!("{}", report.panic_message());
        }
    }
}
