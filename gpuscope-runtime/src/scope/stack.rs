//! The per-thread scope stack: which scope owns each tracked tensor, and what happens
//! when a scope exits.
//!
//! Every thread has a [`ThreadScopes`] behind a mutex that only it locks on the hot
//! path (uncontended); [`report_live`](super::report_live) locks every thread's in turn.
//! A frame holds the records of the tensors made (or adopted) in its scope. At exit,
//! records of dropped tensors are forgotten, returned and kept ones move to the parent
//! frame (or the thread's root list outside any scope), and the rest are leaks.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::backend::StreamId;
use crate::device::Device;

use super::policy::{LeakPolicy, leak_policy, tracking};
use super::record::{TrackRecord, TrackState};
use super::report::{LeakReport, ScopeSite, emit};

/// One open scope.
pub(crate) struct Frame {
    pub site: ScopeSite,
    pub policy: Option<LeakPolicy>,
    pub sync: bool,
    pub records: Vec<Arc<TrackRecord>>,
    /// Streams its tensors were made on, per device (for `sync`).
    pub streams: Vec<(Device, StreamId)>,
}

/// A thread's scopes and the records that outlived every scope.
#[derive(Default)]
pub(crate) struct ThreadScopes {
    pub frames: Vec<Frame>,
    pub root: Vec<Arc<TrackRecord>>,
    /// Length of `root` after its last pruning.
    pruned_len: usize,
    /// Records of dropped tensors that nothing else shares, ready to describe new ones
    /// (saves an allocation per tracked tensor).
    spare: Vec<Arc<TrackRecord>>,
}

/// Most spare records a thread keeps.
const MAX_SPARE: usize = 4096;

impl ThreadScopes {
    fn push_root(&mut self, r: Arc<TrackRecord>) {
        self.root.push(r);
        if self.root.len() >= 2 * self.pruned_len.max(64) {
            let mut kept = Vec::with_capacity(self.root.len());
            for r in self.root.drain(..) {
                if r.is_alive() {
                    kept.push(r);
                } else if self.spare.len() < MAX_SPARE && Arc::strong_count(&r) == 1 {
                    self.spare.push(r);
                }
            }
            self.root = kept;
            self.pruned_len = self.root.len();
        }
    }

    fn recycle(&mut self, r: Arc<TrackRecord>) {
        if self.spare.len() < MAX_SPARE && Arc::strong_count(&r) == 1 {
            self.spare.push(r);
        }
    }
}

type Shared = Arc<Mutex<ThreadScopes>>;

/// Every thread's scopes, for [`report_live`](super::report_live).
static THREADS: Mutex<Vec<Weak<Mutex<ThreadScopes>>>> = Mutex::new(Vec::new());
/// Records of threads that ended, still alive then.
static ORPHANS: Mutex<Vec<Arc<TrackRecord>>> = Mutex::new(Vec::new());

struct Local(Shared);

impl Drop for Local {
    fn drop(&mut self) {
        let mut st = lock(&self.0);
        let mut left: Vec<Arc<TrackRecord>> = st.root.drain(..).filter(|r| r.is_alive()).collect();
        for f in st.frames.drain(..) {
            left.extend(f.records.into_iter().filter(|r| r.is_alive()));
        }
        drop(st);
        lock(&ORPHANS).extend(left);
    }
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` on this thread's scopes (creating them on first use).
#[inline]
pub(crate) fn with_scopes<R>(f: impl FnOnce(&mut ThreadScopes) -> R) -> R {
    LOCAL.with(|cell| {
        let mut slot = cell.borrow_mut();
        let local = slot.get_or_insert_with(|| {
            let shared: Shared = Arc::default();
            let mut all = lock(&THREADS);
            all.retain(|w| w.strong_count() > 0);
            all.push(Arc::downgrade(&shared));
            Local(shared)
        });
        let mut st = lock(&local.0);
        f(&mut st)
    })
}

/// Every tracked record still alive, on every thread.
pub(crate) fn all_live() -> Vec<(Arc<TrackRecord>, Option<String>)> {
    let threads: Vec<Shared> = lock(&THREADS).iter().filter_map(Weak::upgrade).collect();
    let mut out = Vec::new();
    for t in threads {
        let st = lock(&t);
        for r in st.root.iter().filter(|r| r.is_alive()) {
            out.push((r.clone(), None));
        }
        for f in &st.frames {
            for r in f.records.iter().filter(|r| r.is_alive()) {
                out.push((r.clone(), Some(f.site.to_string())));
            }
        }
    }
    for r in lock(&ORPHANS).iter().filter(|r| r.is_alive()) {
        out.push((r.clone(), None));
    }
    out.sort_by_key(|(r, _)| r.id());
    out
}

/// Makes the record of a new tracked tensor and registers it with the innermost scope
/// of this thread.
pub(crate) fn track(
    site: &'static std::panic::Location<'static>,
    bytes: usize,
    dtype: crate::tensor::DType,
    shape: &[usize],
    device: &Device,
    stream: StreamId,
) -> Arc<TrackRecord> {
    with_scopes(|st| {
        let record = match st.spare.pop() {
            Some(mut r) => match Arc::get_mut(&mut r) {
                Some(inner) => {
                    inner.reuse(site, bytes, dtype, shape, device);
                    r
                }
                None => Arc::new(TrackRecord::new(site, bytes, dtype, shape, device)),
            },
            None => Arc::new(TrackRecord::new(site, bytes, dtype, shape, device)),
        };
        match st.frames.last_mut() {
            Some(f) => {
                if f.sync && !f.streams.iter().any(|(d, s)| d == device && *s == stream) {
                    f.streams.push((device.clone(), stream));
                }
                f.records.push(record.clone());
            }
            None => st.push_root(record.clone()),
        }
        record
    })
}

/// Name of the innermost open scope on this thread.
pub fn current_scope() -> Option<String> {
    with_scopes(|st| st.frames.last().map(|f| f.site.name.to_string()))
}

/// How deep this thread's scope stack is.
pub fn scope_depth() -> usize {
    with_scopes(|st| st.frames.len())
}

pub(crate) fn push_frame(frame: Frame) {
    with_scopes(|st| st.frames.push(frame));
}

/// What closing a scope left to do: its report, its policy, the streams to sync.
pub(crate) type ClosedScope = (LeakReport, LeakPolicy, Vec<(Device, StreamId)>);

/// Closes the innermost scope: returned and kept tensors move to the parent, leaks are
/// reported. Returns the report (empty when nothing leaked) and the scope's policy.
pub(crate) fn pop_frame() -> Option<ClosedScope> {
    with_scopes(|st| {
        let frame = st.frames.pop()?;
        let policy = frame.policy.unwrap_or_else(leak_policy);
        let mut scope_name: Option<String> = None;
        let mut leaked = Vec::new();
        let mut moved = Vec::new();
        let mut dead = Vec::new();
        for r in frame.records {
            if !r.is_alive() {
                dead.push(r);
                continue;
            }
            match r.state() {
                TrackState::Escaping | TrackState::Kept => {
                    r.set_state(TrackState::Scoped);
                    moved.push(r);
                }
                TrackState::Leaked => moved.push(r),
                TrackState::Scoped => {
                    if policy != LeakPolicy::Allow {
                        let name = scope_name.get_or_insert_with(|| frame.site.to_string());
                        r.mark_leaked(name);
                        leaked.push(r.clone());
                    }
                    moved.push(r);
                }
            }
        }
        match st.frames.last_mut() {
            Some(parent) => parent.records.extend(moved),
            None => {
                for r in moved {
                    st.push_root(r);
                }
            }
        }
        for r in dead {
            st.recycle(r);
        }
        Some((LeakReport::new(frame.site, leaked), policy, frame.streams))
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
            streams: Vec::new(),
        });
        ScopeGuard {
            open: true,
            _not_send: std::marker::PhantomData,
        }
    }

    /// Marks every tensor in `value` as returned: it moves to the parent scope at exit.
    #[inline]
    pub fn escape<T: super::ScopeValue + ?Sized>(&self, value: &T) {
        if self.open {
            value.for_each_tensor(&mut |t| {
                if let Some(r) = t.track_record() {
                    r.set_state(TrackState::Escaping);
                }
            });
        }
    }

    /// Closes the scope now (what dropping it does).
    pub fn close(self) {}

    /// Whether this guard opened a frame (tracking on, or `sync`).
    pub(crate) fn is_open(&self) -> bool {
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
        let Some((report, policy, streams)) = pop_frame() else {
            return;
        };
        for (device, stream) in streams {
            if let Err(e) = device.backend().synchronize_stream(stream) {
                tracing::error!(target: "gpuscope::scope", error = %e, "scope exit: could not synchronise {stream}");
            }
        }
        if report.is_empty() {
            return;
        }
        emit(&report);
        if policy == LeakPolicy::Deny && !std::thread::panicking() {
            panic!("{}", report.panic_message());
        }
    }
}
