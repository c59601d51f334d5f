//! [`Communicator`]: one NCCL communicator, one GPU, one stream of its own.
//!
//! Communicators are blocking, as PyTorch's are by default: a collective returns once
//! NCCL has queued its kernels, where a non-blocking communicator hands its launches to
//! a thread of NCCL's own and must be polled until done (a 1 MiB all-reduce between two
//! H100s: 0.02-0.03 ms blocking, 0.13 ms non-blocking; BENCHMARKS.md). No call waits on
//! a dead rank forever:
//!
//! - creation runs on a thread of its own, and the caller waits for it up to the
//!   time-out: a rank that never joins is a [`DistError::Timeout`] (the thread, blocked
//!   in NCCL, is left behind);
//! - every call is timed while it runs (`Communicator::call_started`): the group's
//!   watchdog aborts the communicators (`ncclCommAbort`, which makes a blocked call
//!   return) when one has run past the time-out, as when a first collective waits to
//!   connect to a rank that died;
//! - queued work that never finishes is the watchdog's and `Work::synchronize`'s, as
//!   before.
//!
//! `GPUSCOPE_NCCL_NONBLOCKING=1` makes them non-blocking instead: every NCCL call
//! returns at once and its completion is polled with `ncclCommGetAsyncError` under a
//! deadline.

use std::ffi::c_void;
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

use cudarc::driver::CudaContext;

use super::ffi::{self, Config, Nccl, UniqueId};
use crate::backend::StreamId;
use crate::backend::cuda::CudaBackend;
use crate::device::Device;
use crate::dist::DistError;

/// Busy polls of NCCL's state before [`Communicator::wait_ready`] starts yielding.
const SPINS: u32 = 1000;

/// How long [`Communicator::wait_ready`] yields its thread between polls before it sleeps.
const YIELD_FOR: Duration = Duration::from_millis(10);

/// One rank's NCCL communicator on one device.
pub struct Communicator {
    nccl: &'static Nccl,
    raw: ffi::Comm,
    rank: usize,
    size: usize,
    device: Device,
    stream: StreamId,
    cu_stream: ffi::Stream,
    /// NCCL calls on one communicator are issued one at a time.
    lock: Mutex<()>,
    /// Set once the communicator failed or was aborted: later calls fail at once.
    broken: Mutex<Option<String>>,
    /// The NCCL call running now, and since when (for the watchdog).
    calling: Mutex<Option<(&'static str, Instant)>>,
}

// SAFETY: the raw handles are used under `lock`; NCCL communicators may be used from
// any thread as long as calls on one are not concurrent.
unsafe impl Send for Communicator {}
unsafe impl Sync for Communicator {}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("device", &self.device)
            .field("stream", &self.stream)
            .finish()
    }
}

/// Whether communicators are made non-blocking (`GPUSCOPE_NCCL_NONBLOCKING=1`; see the
/// module docs).
fn nonblocking() -> bool {
    std::env::var("GPUSCOPE_NCCL_NONBLOCKING").is_ok_and(|v| v == "1" || v == "true")
}

/// Raw communicators made on the creation thread, handed back to the caller.
struct Made(Vec<ffi::Comm>);

// SAFETY: NCCL communicators may be used from any thread (one call at a time).
unsafe impl Send for Made {}

/// The loaded NCCL, or why there is none.
pub fn library() -> Result<&'static Nccl, DistError> {
    ffi::nccl().map_err(|message| DistError::Nccl {
        call: "loading libnccl",
        message,
    })
}

/// A fresh NCCL id (rank 0 makes it and shares it).
pub fn unique_id() -> Result<UniqueId, DistError> {
    let nccl = library()?;
    let mut id = UniqueId { internal: [0; 128] };
    // SAFETY: writes the 128-byte id.
    let r = unsafe { (nccl.get_unique_id)(&mut id) };
    check(nccl, r, "ncclGetUniqueId", std::ptr::null_mut())?;
    Ok(id)
}

/// The id's bytes, for the store.
pub fn id_bytes(id: &UniqueId) -> Vec<u8> {
    id.internal.iter().map(|&c| c as u8).collect()
}

/// An id from the store's bytes.
pub fn id_from_bytes(bytes: &[u8]) -> Result<UniqueId, DistError> {
    if bytes.len() != 128 {
        return Err(DistError::Argument {
            op: "rendezvous",
            problem: format!("an NCCL id of {} bytes (expected 128)", bytes.len()),
        });
    }
    let mut id = UniqueId { internal: [0; 128] };
    for (d, s) in id.internal.iter_mut().zip(bytes) {
        *d = *s as std::ffi::c_char;
    }
    Ok(id)
}

fn cuda(device: &Device) -> Result<&CudaBackend, DistError> {
    device
        .backend()
        .as_any()
        .downcast_ref::<CudaBackend>()
        .ok_or_else(|| DistError::Argument {
            op: "NCCL",
            problem: format!(
                "{} is not a CUDA device: collectives need CUDA devices",
                device.description()
            ),
        })
}

/// Makes `ctx` the calling thread's current CUDA context (`cuCtxSetCurrent`), as NCCL
/// calls on its device need.
fn bind(ctx: &CudaContext) -> Result<(), DistError> {
    ctx.bind_to_thread().map_err(|e| DistError::Nccl {
        call: "cuCtxSetCurrent",
        message: e.to_string(),
    })
}

/// Opens a group of NCCL calls (`ncclGroupStart`); the caller closes it with
/// `ncclGroupEnd` on every path.
fn group_start(nccl: &Nccl) -> Result<(), DistError> {
    // SAFETY: a plain NCCL call.
    let r = unsafe { (nccl.group_start)() };
    check(nccl, r, "ncclGroupStart", std::ptr::null_mut())
}

/// `ncclCommInitRankConfig` for rank `rank` of `size` with `id`, the communicator
/// blocking or not: NCCL's result and the communicator it wrote (null where it wrote
/// none), for the caller to check as its mode needs.
fn init_rank(
    nccl: &Nccl,
    id: UniqueId,
    size: usize,
    rank: usize,
    blocking: bool,
) -> (ffi::NcclResult, ffi::Comm) {
    let mut raw: ffi::Comm = std::ptr::null_mut();
    let mut config = Config::new(blocking);
    // SAFETY: `raw` receives the communicator; id and config are valid.
    let r = unsafe {
        (nccl.comm_init_rank_config)(&mut raw, size as i32, id, rank as i32, &mut config)
    };
    (r, raw)
}

/// A rank's place in this process before NCCL makes its communicator: its device and
/// the stream of its own that its collectives will run on.
struct Seat {
    rank: usize,
    device: Device,
    stream: StreamId,
    cu_stream: ffi::Stream,
}

impl Seat {
    /// Creates the stream of `rank`'s communicator on `device`.
    fn new(rank: usize, device: &Device) -> Result<Seat, DistError> {
        let backend = cuda(device)?;
        let stream = backend.create_stream()?;
        let cu_stream = backend.cuda_stream(stream)?.cu_stream() as ffi::Stream;
        Ok(Seat {
            rank,
            device: device.clone(),
            stream,
            cu_stream,
        })
    }

    /// The communicator of this seat: `raw`, made by NCCL for a job of `size` ranks.
    fn communicator(self, nccl: &'static Nccl, raw: ffi::Comm, size: usize) -> Communicator {
        Communicator {
            nccl,
            raw,
            rank: self.rank,
            size,
            device: self.device,
            stream: self.stream,
            cu_stream: self.cu_stream,
            lock: Mutex::new(()),
            broken: Mutex::new(None),
            calling: Mutex::new(None),
        }
    }
}

impl Communicator {
    /// Creates the communicators of `ranks` (rank, device) pairs of one job in this
    /// process (one, for a process per GPU; several for one process driving several
    /// GPUs), all with the same `id` and `size`, waiting up to `timeout` for every rank
    /// of the job to join.
    pub fn init(
        id: &UniqueId,
        size: usize,
        ranks: &[(usize, Device)],
        timeout: Duration,
    ) -> Result<Vec<Communicator>, DistError> {
        let nccl = library()?;
        if !nonblocking() {
            return Self::init_blocking(nccl, id, size, ranks, timeout);
        }
        let mut made: Vec<Communicator> = Vec::with_capacity(ranks.len());
        let grouped = ranks.len() > 1;
        // Grouped inits are how one thread makes several.
        if grouped {
            group_start(nccl)?;
        }
        let mut failed = None;
        for (rank, device) in ranks {
            let made_one = (|| {
                bind(cuda(device)?.context())?;
                let seat = Seat::new(*rank, device)?;
                let (r, raw) = init_rank(nccl, *id, size, *rank, false);
                if r != ffi::SUCCESS && r != ffi::IN_PROGRESS {
                    return Err(nccl_error(nccl, r, "ncclCommInitRankConfig", raw));
                }
                Ok(seat.communicator(nccl, raw, size))
            })();
            match made_one {
                Ok(c) => made.push(c),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if grouped {
            // SAFETY: closes the group opened above.
            let r = unsafe { (nccl.group_end)() };
            if failed.is_none() && r != ffi::SUCCESS && r != ffi::IN_PROGRESS {
                failed = Some(nccl_error(nccl, r, "ncclGroupEnd", std::ptr::null_mut()));
            }
        }
        if let Some(e) = failed {
            for c in &made {
                c.abort("another communicator of this process failed to start");
            }
            return Err(e);
        }
        let start = Instant::now();
        for c in &made {
            if let Err(e) = c.wait_ready(start, timeout, "joining the NCCL communicator") {
                for c in &made {
                    c.abort("a communicator failed to start");
                }
                return Err(e);
            }
        }
        Ok(made)
    }

    /// [`Communicator::init`] for blocking communicators: NCCL's part runs on a thread
    /// of its own (grouped when there are several ranks), and the caller waits for it up
    /// to `timeout`.
    fn init_blocking(
        nccl: &'static Nccl,
        id: &UniqueId,
        size: usize,
        ranks: &[(usize, Device)],
        timeout: Duration,
    ) -> Result<Vec<Communicator>, DistError> {
        let seats = ranks
            .iter()
            .map(|(rank, device)| Seat::new(*rank, device))
            .collect::<Result<Vec<_>, _>>()?;
        let contexts: Vec<_> = ranks
            .iter()
            .map(|(rank, d)| cuda(d).map(|b| (*rank, b.context().clone())))
            .collect::<Result<_, _>>()?;
        let (id, grouped) = (*id, ranks.len() > 1);
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("gpuscope-nccl-init".into())
            .spawn(move || {
                let made = (|| {
                    let mut made = Made(Vec::with_capacity(contexts.len()));
                    if grouped {
                        // Closed below.
                        group_start(nccl)?;
                    }
                    let mut failed = None;
                    for (rank, ctx) in &contexts {
                        if let Err(e) = bind(ctx) {
                            failed = Some(e);
                            break;
                        }
                        let (r, raw) = init_rank(nccl, id, size, *rank, true);
                        if r != ffi::SUCCESS {
                            failed = Some(nccl_error(nccl, r, "ncclCommInitRankConfig", raw));
                            break;
                        }
                        made.0.push(raw);
                    }
                    if grouped {
                        // SAFETY: closes the group opened above.
                        let r = unsafe { (nccl.group_end)() };
                        if failed.is_none() && r != ffi::SUCCESS {
                            failed =
                                Some(nccl_error(nccl, r, "ncclGroupEnd", std::ptr::null_mut()));
                        }
                    }
                    match failed {
                        None => Ok(made),
                        Some(e) => {
                            for &raw in &made.0 {
                                // SAFETY: made above, never handed out; aborted once.
                                unsafe { (nccl.comm_abort)(raw) };
                            }
                            Err(e)
                        }
                    }
                })();
                let _ = tx.send(made);
            })
            .map_err(|e| DistError::Nccl {
                call: "starting the NCCL creation thread",
                message: e.to_string(),
            })?;
        let made = match rx.recv_timeout(timeout) {
            Ok(made) => made?,
            Err(_) => {
                return Err(DistError::Timeout {
                    what: format!(
                        "joining the NCCL communicator (rank {} of {size}): another rank did not join (did it die?)",
                        ranks[0].0
                    ),
                    after: timeout,
                });
            }
        };
        Ok(seats
            .into_iter()
            .zip(made.0)
            .map(|(seat, raw)| seat.communicator(nccl, raw, size))
            .collect())
    }

    /// The NCCL call running now on this communicator, and when it started (the
    /// watchdog aborts the communicators when one runs past the time-out).
    pub(crate) fn call_started(&self) -> Option<(&'static str, Instant)> {
        *self.calling.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes that `what` is running on this communicator until the guard drops.
    pub(crate) fn calling(&self, what: &'static str) -> CallGuard<'_> {
        *self.calling.lock().unwrap_or_else(|e| e.into_inner()) = Some((what, Instant::now()));
        CallGuard(self)
    }

    /// Why the communicator was aborted, if it was.
    pub(crate) fn abort_reason(&self) -> Option<String> {
        self.broken
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// This communicator's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// How many ranks the communicator has.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Its device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The stream its collectives run on.
    pub fn stream(&self) -> StreamId {
        self.stream
    }

    /// Runs `f` (NCCL calls that enqueue work on this communicator's stream) and waits
    /// up to `timeout` for NCCL to accept them (not for the work to finish).
    pub(crate) fn submit(
        &self,
        what: &'static str,
        timeout: Duration,
        f: impl FnOnce(&Nccl, ffi::Comm, ffi::Stream) -> ffi::NcclResult,
    ) -> Result<(), DistError> {
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.check_alive()?;
        bind(cuda(&self.device)?.context())?;
        let r = {
            let _call = self.calling(what);
            f(self.nccl, self.raw, self.cu_stream)
        };
        if let Some(reason) = self.abort_reason() {
            // The watchdog aborted it while the call ran: the communicator is gone.
            return Err(DistError::Nccl {
                call: what,
                message: format!("the call was aborted: {reason}"),
            });
        }
        if r != ffi::SUCCESS && r != ffi::IN_PROGRESS {
            let e = nccl_error(self.nccl, r, what, self.raw);
            self.abort(&e.to_string());
            return Err(e);
        }
        self.wait_ready(Instant::now(), timeout, what)
    }

    /// Polls NCCL's state until the last call finished, failed, or `timeout` passed
    /// since `start` (then the communicator is aborted): [`SPINS`] busy polls, then
    /// yielding the thread until [`YIELD_FOR`] has passed, then 200 us sleeps.
    pub(crate) fn wait_ready(
        &self,
        start: Instant,
        timeout: Duration,
        what: &str,
    ) -> Result<(), DistError> {
        let mut spins = 0u32;
        loop {
            match self.async_error() {
                ffi::SUCCESS => return Ok(()),
                ffi::IN_PROGRESS => {}
                r => {
                    let e = nccl_error(self.nccl, r, "ncclCommGetAsyncError", self.raw);
                    self.abort(&e.to_string());
                    return Err(e);
                }
            }
            if start.elapsed() >= timeout {
                let e = DistError::Timeout {
                    what: format!(
                        "{what} on rank {} of {} ({}): another rank did not take part (did it die, or call a different collective?)",
                        self.rank,
                        self.size,
                        self.device.description()
                    ),
                    after: start.elapsed(),
                };
                self.abort(&e.to_string());
                return Err(e);
            }
            // Spin, then yield (an enqueue usually finishes within tens of microseconds),
            // then sleep: sleeping at once added ~250 us to every small collective.
            spins += 1;
            if spins < SPINS {
                std::hint::spin_loop();
            } else if start.elapsed() < YIELD_FOR {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }

    /// NCCL's asynchronous state (`ncclSuccess`, `ncclInProgress`, or an error).
    pub(crate) fn async_error(&self) -> ffi::NcclResult {
        let mut state = ffi::SUCCESS;
        // SAFETY: a live communicator; writes one int.
        let r = unsafe { (self.nccl.comm_get_async_error)(self.raw, &mut state) };
        if r != ffi::SUCCESS { r } else { state }
    }

    /// Aborts the communicator (NCCL stops its kernels and threads); later calls fail
    /// with `reason`.
    pub(crate) fn abort(&self, reason: &str) {
        let mut broken = self.broken.lock().unwrap_or_else(|e| e.into_inner());
        if broken.is_some() {
            return;
        }
        *broken = Some(reason.to_string());
        // SAFETY: a live communicator, aborted once; it is not destroyed afterwards.
        unsafe { (self.nccl.comm_abort)(self.raw) };
    }

    fn check_alive(&self) -> Result<(), DistError> {
        match &*self.broken.lock().unwrap_or_else(|e| e.into_inner()) {
            None => Ok(()),
            Some(reason) => Err(DistError::Nccl {
                call: "NCCL communicator",
                message: format!("it was aborted earlier: {reason}"),
            }),
        }
    }

    /// Registers `len` bytes at `addr` with the communicator (NCCL's zero-copy paths);
    /// returns the handle to deregister with.
    pub fn register(&self, addr: u64, len: usize) -> Result<RegHandle, DistError> {
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.check_alive()?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: `addr..addr+len` is device memory of this communicator's device.
        let r =
            unsafe { (self.nccl.comm_register)(self.raw, addr as *mut c_void, len, &mut handle) };
        check(self.nccl, r, "ncclCommRegister", self.raw)?;
        Ok(RegHandle(handle))
    }

    /// Undoes [`register`](Self::register).
    pub fn deregister(&self, handle: RegHandle) -> Result<(), DistError> {
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: a handle from `register` on this communicator, used once.
        let r = unsafe { (self.nccl.comm_deregister)(self.raw, handle.0) };
        check(self.nccl, r, "ncclCommDeregister", self.raw)
    }
}

/// Clears [`Communicator::calling`] when the call returns.
pub(crate) struct CallGuard<'a>(&'a Communicator);

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        *self.0.calling.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// A registration of memory with one communicator ([`Communicator::register`]).
#[derive(Debug)]
pub struct RegHandle(*mut c_void);

// SAFETY: an opaque NCCL handle, used under the communicator's lock.
unsafe impl Send for RegHandle {}
unsafe impl Sync for RegHandle {}

impl Drop for Communicator {
    fn drop(&mut self) {
        let broken = self
            .broken
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        if broken {
            return; // aborted: NCCL freed it
        }
        if let Ok(b) = cuda(&self.device) {
            let _ = b.context().bind_to_thread();
            let _ = b.synchronize_stream(self.stream);
        }
        // SAFETY: a live communicator whose work has finished; destroyed once.
        unsafe { (self.nccl.comm_destroy)(self.raw) };
    }
}

fn check(
    nccl: &Nccl,
    r: ffi::NcclResult,
    call: &'static str,
    comm: ffi::Comm,
) -> Result<(), DistError> {
    if r == ffi::SUCCESS {
        Ok(())
    } else {
        Err(nccl_error(nccl, r, call, comm))
    }
}

fn nccl_error(nccl: &Nccl, r: ffi::NcclResult, call: &'static str, comm: ffi::Comm) -> DistError {
    // SAFETY: `comm` is a communicator of this library, or null.
    let last = unsafe { nccl.last_error(comm) };
    let mut message = nccl.error_string(r);
    if !last.is_empty() {
        message = format!("{message}: {last}");
    }
    message.push_str(" (NCCL_DEBUG=WARN prints NCCL's own account)");
    DistError::Nccl { call, message }
}

use crate::backend::Backend as _;
