//! What a collective hands back: [`Work`], a collective in flight (wait on its streams,
//! poll it, or block with the group's time-out), and [`Registration`], memory registered
//! with NCCL until it is dropped.

use std::time::{Duration, Instant};

use super::super::DistError;
use super::super::nccl::comm::{self, RegHandle};
use super::super::nccl::ffi;
use super::ProcessGroup;
use crate::backend::EventId;
use crate::tensor::Tensor;

/// A collective in flight. Dropping it without [`wait`](Self::wait) is allowed: the
/// tensors' allocator already knows the comm stream uses them.
#[must_use = "call .wait() before using the results on their stream"]
pub struct Work {
    pub(super) group: ProcessGroup,
    pub(super) op: &'static str,
    pub(super) events: Vec<(usize, EventId)>,
    pub(super) outputs: Vec<Tensor>,
}

impl Work {
    /// Makes the outputs' streams wait for the collective (the host does not block).
    pub fn wait(self) -> Result<(), DistError> {
        for t in &self.outputs {
            let (_, e) = self
                .events
                .iter()
                .find(|(i, _)| self.group.inner.comms[*i].device() == t.device())
                .expect("every output is on a local device");
            t.device().backend().stream_wait_event(t.stream(), *e)?;
        }
        Ok(())
    }

    /// Whether the collective has finished on every local device.
    pub fn is_completed(&self) -> Result<bool, DistError> {
        for (i, e) in &self.events {
            if !self.group.inner.comms[*i]
                .device()
                .backend()
                .query_event(*e)?
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Blocks the host until the collective has finished, for at most the group's
    /// time-out; past it the communicators are aborted and the error names the
    /// collective.
    pub fn synchronize(self) -> Result<(), DistError> {
        let start = Instant::now();
        let timeout = self.group.inner.timeout;
        loop {
            if self.is_completed()? {
                return Ok(());
            }
            for c in &self.group.inner.comms {
                let r = c.async_error();
                if r != ffi::SUCCESS && r != ffi::IN_PROGRESS {
                    let message = comm::library()?.error_string(r);
                    c.abort(&message);
                    return Err(DistError::Nccl {
                        call: self.op,
                        message,
                    });
                }
            }
            if start.elapsed() >= timeout {
                let what = format!(
                    "{} to finish (a rank died or stopped calling collectives)",
                    self.op
                );
                for c in &self.group.inner.comms {
                    c.abort(&what);
                }
                return Err(DistError::Timeout {
                    what,
                    after: start.elapsed(),
                });
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        for (i, e) in self.events.drain(..) {
            self.group.recycle(i, e);
        }
    }
}

/// Memory registered with NCCL ([`ProcessGroup::register`]); the tensors stay alive
/// until it is dropped, and are deregistered then.
pub struct Registration {
    pub(super) group: ProcessGroup,
    pub(super) handles: Vec<(usize, RegHandle)>,
    pub(super) _tensors: Vec<Tensor>,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Registration({} buffers)", self.handles.len())
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        for (i, h) in self.handles.drain(..) {
            if let Err(e) = self.group.inner.comms[i].deregister(h) {
                tracing::warn!(target: "gpuscope::dist", error = %e, "ncclCommDeregister failed");
            }
        }
    }
}
