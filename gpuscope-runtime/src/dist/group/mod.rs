//! [`ProcessGroup`]: NCCL collectives on gpuscope tensors, for one process per GPU
//! (launched by `torchrun` or anything that sets its variables) or one process driving
//! several GPUs.
//!
//! Streams and memory: each device's communicator has a stream of its own. A collective
//! makes that stream wait for the streams of its tensors, tells their allocator that the
//! comm stream uses them (`record_stream`: their memory is not given to another stream
//! before the collective is done), and returns a [`Work`]: [`Work::wait`] makes the
//! tensors' streams wait for the collective (nothing blocks the host), and
//! [`Work::synchronize`] blocks the host with a time-out. A watchdog thread aborts the
//! communicators when a collective has not finished within the group's time-out (a rank
//! died, or stopped calling collectives), so a blocked read of a result returns and
//! every later call fails with the reason.
//!
//! Here: setting the group up, running a call on the comm streams (`run`), events and
//! the watchdog; `collectives.rs`: each collective's checks and its NCCL call;
//! `work.rs`: [`Work`] and buffer [`Registration`].

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::DistError;
use super::env::LaunchEnv;
use super::nccl::comm::{self, Communicator};
use super::nccl::ffi;
use super::rendezvous::Rendezvous;
use crate::backend::{EventId, StreamId};
use crate::device::Device;
use crate::tensor::Tensor;

mod collectives;
mod work;

pub use collectives::ReduceOp;
pub use work::{Registration, Work};

struct Pending {
    comm: usize,
    event: EventId,
    op: &'static str,
    issued: Instant,
}

struct Inner {
    comms: Vec<Communicator>,
    world_size: usize,
    timeout: Duration,
    /// Collectives issued and not yet seen complete (the watchdog's list).
    pending: Mutex<Vec<Pending>>,
    /// Idle events per communicator.
    events: Mutex<Vec<Vec<EventId>>>,
    // Dropped after the communicators: rank 0's store must outlive every rank's init.
    _rendezvous: Option<Rendezvous>,
}

/// A group of ranks that run collectives together. See the [module docs](self).
///
/// ```no_run
/// use gpuscope_runtime::dist::{ProcessGroup, ReduceOp};
/// use gpuscope_runtime::{Device, Tensor};
///
/// // Under `torchrun --nproc_per_node=2 --no-python ./my_program` (one process per GPU):
/// let group = ProcessGroup::from_env().unwrap();
/// let dev = group.devices()[0].clone();
/// let grads = Tensor::ones(&[1024], &dev).unwrap();
/// group.all_reduce(&[&grads], ReduceOp::Sum).unwrap().wait().unwrap();
/// assert_eq!(grads.to_vec::<f32>().unwrap()[0], group.world_size() as f32);
/// ```
#[derive(Clone)]
pub struct ProcessGroup {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ProcessGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessGroup")
            .field("world_size", &self.inner.world_size)
            .field("comms", &self.inner.comms)
            .finish()
    }
}

impl ProcessGroup {
    /// One process per GPU: reads `torchrun`'s variables ([`LaunchEnv`]), opens CUDA
    /// device `LOCAL_RANK`, meets the other ranks and starts NCCL.
    pub fn from_env() -> Result<ProcessGroup, DistError> {
        let env = LaunchEnv::from_env()?.ok_or_else(|| DistError::Env {
            var: "RANK",
            value: String::new(),
            problem: "RANK and WORLD_SIZE are not set: launch with torchrun (or set RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), or use ProcessGroup::local for one process driving several GPUs".into(),
        })?;
        let device = Device::cuda(env.local_rank)?;
        ProcessGroup::init(&env, &device)
    }

    /// One process per GPU, with an explicit environment and device.
    pub fn init(env: &LaunchEnv, device: &Device) -> Result<ProcessGroup, DistError> {
        let rendezvous = Rendezvous::join(env)?;
        let id = if env.rank == 0 {
            Some(comm::id_bytes(&comm::unique_id()?))
        } else {
            None
        };
        let id = rendezvous.broadcast("nccl_id", id.as_deref())?;
        let id = comm::id_from_bytes(&id)?;
        let comms = Communicator::init(
            &id,
            env.world_size,
            &[(env.rank, device.clone())],
            env.timeout,
        )?;
        Ok(ProcessGroup::start(
            comms,
            env.world_size,
            env.timeout,
            Some(rendezvous),
        ))
    }

    /// One process driving `devices` (rank `i` on `devices[i]`).
    pub fn local(devices: &[Device], timeout: Duration) -> Result<ProcessGroup, DistError> {
        if devices.is_empty() {
            return Err(DistError::Argument {
                op: "ProcessGroup::local",
                problem: "no devices given".into(),
            });
        }
        for (i, a) in devices.iter().enumerate() {
            if devices[..i].contains(a) {
                return Err(DistError::Argument {
                    op: "ProcessGroup::local",
                    problem: format!("{} is given twice: one rank per device", a.description()),
                });
            }
        }
        let id = comm::unique_id()?;
        let ranks: Vec<(usize, Device)> = devices.iter().cloned().enumerate().collect();
        let comms = Communicator::init(&id, devices.len(), &ranks, timeout)?;
        Ok(ProcessGroup::start(comms, devices.len(), timeout, None))
    }

    fn start(
        comms: Vec<Communicator>,
        world_size: usize,
        timeout: Duration,
        rendezvous: Option<Rendezvous>,
    ) -> ProcessGroup {
        let n = comms.len();
        let inner = Arc::new(Inner {
            comms,
            world_size,
            timeout,
            pending: Mutex::new(Vec::new()),
            events: Mutex::new(vec![Vec::new(); n]),
            _rendezvous: rendezvous,
        });
        let weak = Arc::downgrade(&inner);
        let _ = std::thread::Builder::new()
            .name("gpuscope-nccl-watchdog".into())
            .spawn(move || watchdog(weak));
        ProcessGroup { inner }
    }

    /// The first rank this process holds (its only one, for a process per GPU).
    pub fn rank(&self) -> usize {
        self.inner.comms[0].rank()
    }

    /// How many ranks the job has.
    pub fn world_size(&self) -> usize {
        self.inner.world_size
    }

    /// This process's devices, one per local rank.
    pub fn devices(&self) -> Vec<Device> {
        self.inner
            .comms
            .iter()
            .map(|c| c.device().clone())
            .collect()
    }

    /// The communication stream of local rank `i`.
    pub fn stream(&self, i: usize) -> StreamId {
        self.inner.comms[i].stream()
    }

    /// The time-out of waits for other ranks.
    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// Registers the tensors' memory with NCCL (one per local device), for NCCL's
    /// zero-copy paths; deregistered when the returned value is dropped. NCCL refuses
    /// (or quietly falls back for) memory that spans several physical allocations, as
    /// virtual-memory segments do: register single-segment memory.
    pub fn register(&self, tensors: &[&Tensor]) -> Result<Registration, DistError> {
        self.check("register", tensors, "tensors")?;
        let mut handles = Vec::with_capacity(tensors.len());
        for (i, t) in tensors.iter().enumerate() {
            match self.inner.comms[i].register(t.addr().0, t.nbytes()) {
                Ok(h) => handles.push((i, h)),
                Err(e) => {
                    drop(Registration {
                        group: self.clone(),
                        handles,
                        _tensors: Vec::new(),
                    });
                    return Err(e);
                }
            }
        }
        Ok(Registration {
            group: self.clone(),
            handles,
            _tensors: tensors.iter().map(|t| (*t).clone()).collect(),
        })
    }

    /// Orders the comm streams after `touched`'s streams, records the comm streams'
    /// use of their memory, issues `call` for every local rank (grouped when there are
    /// several), bumps the outputs' versions, and returns the completion.
    fn run(
        &self,
        op: &'static str,
        touched: &[&Tensor],
        outputs: &[&Tensor],
        call: impl Fn(usize, &ffi::Nccl, ffi::Comm, ffi::Stream) -> ffi::NcclResult,
    ) -> Result<Work, DistError> {
        let inner = &self.inner;
        for t in touched {
            let i = inner
                .comms
                .iter()
                .position(|c| c.device() == t.device())
                .expect("checked: every tensor is on a local device");
            let comm = &inner.comms[i];
            if t.stream() != comm.stream() {
                let e = self.event(i)?;
                let backend = t.device().backend();
                backend.record_event(e, t.stream())?;
                backend.stream_wait_event(comm.stream(), e)?;
                self.recycle(i, e);
            }
            t.record_stream(comm.stream())?;
        }
        let nccl = comm::library()?;
        let grouped = inner.comms.len() > 1;
        if grouped {
            // SAFETY: a plain group; closed below on every path.
            unsafe { (nccl.group_start)() };
        }
        let mut result = Ok(());
        for (i, c) in inner.comms.iter().enumerate() {
            result = c.submit(op, inner.timeout, |nccl, raw, stream| {
                call(i, nccl, raw, stream)
            });
            if result.is_err() {
                break;
            }
        }
        if grouped {
            // The group's kernels are queued here: timed as a call on every communicator.
            let _calls: Vec<_> = inner.comms.iter().map(|c| c.calling(op)).collect();
            // SAFETY: closes the group.
            let r = unsafe { (nccl.group_end)() };
            if result.is_ok() && r != ffi::SUCCESS && r != ffi::IN_PROGRESS {
                result = Err(DistError::Nccl {
                    call: "ncclGroupEnd",
                    message: nccl.error_string(r),
                });
            }
            if let Some(reason) = inner.comms.iter().find_map(|c| c.abort_reason()) {
                // Aborted while the group's kernels were being queued.
                result = Err(DistError::Nccl {
                    call: op,
                    message: format!("the call was aborted: {reason}"),
                });
            }
            if result.is_ok() {
                for c in &inner.comms {
                    c.wait_ready(Instant::now(), inner.timeout, op)?;
                }
            }
        }
        result?;
        for t in outputs {
            t.increment_version();
        }
        let mut events = Vec::with_capacity(inner.comms.len());
        for (i, c) in inner.comms.iter().enumerate() {
            let e = self.event(i)?;
            c.device().backend().record_event(e, c.stream())?;
            let watch = self.event(i)?;
            c.device().backend().record_event(watch, c.stream())?;
            inner
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Pending {
                    comm: i,
                    event: watch,
                    op,
                    issued: Instant::now(),
                });
            events.push((i, e));
        }
        Ok(Work {
            group: self.clone(),
            op,
            events,
            outputs: outputs.iter().map(|t| (*t).clone()).collect(),
        })
    }

    fn event(&self, comm: usize) -> Result<EventId, DistError> {
        let idle = self.inner.events.lock().unwrap_or_else(|e| e.into_inner())[comm].pop();
        match idle {
            Some(e) => Ok(e),
            None => Ok(self.inner.comms[comm].device().backend().create_event()?),
        }
    }

    fn recycle(&self, comm: usize, e: EventId) {
        self.inner.events.lock().unwrap_or_else(|e| e.into_inner())[comm].push(e);
    }
}

/// Aborts the communicators of a group whose collective has not finished within the
/// time-out, so that nothing waits on a dead rank forever.
fn watchdog(group: Weak<Inner>) {
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let Some(inner) = group.upgrade() else { return };
        let mut pending = inner.pending.lock().unwrap_or_else(|e| e.into_inner());
        let mut expired = None;
        pending.retain(|p| {
            let backend = inner.comms[p.comm].device().backend();
            match backend.query_event(p.event) {
                Ok(true) => {
                    let _ = backend.destroy_event(p.event);
                    false
                }
                Ok(false) if p.issued.elapsed() > inner.timeout => {
                    expired.get_or_insert((p.op, p.issued.elapsed()));
                    true
                }
                _ => true,
            }
        });
        drop(pending);
        // A call that has not returned (a blocking communicator waiting for a rank).
        for c in &inner.comms {
            if let Some((what, since)) = c.call_started() {
                if since.elapsed() > inner.timeout {
                    expired.get_or_insert((what, since.elapsed()));
                }
            }
        }
        if let Some((op, after)) = expired {
            let reason = format!(
                "{op} timed out after {after:?} (it did not finish, or did not return): a rank died or stopped calling collectives; the communicators were aborted"
            );
            tracing::error!(target: "gpuscope::dist", "{reason}");
            for c in &inner.comms {
                c.abort(&reason);
            }
            return;
        }
    }
}
