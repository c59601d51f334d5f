//! Cross-stream frees: a block that other streams used (`record_stream`) is freed
//! only once an event recorded on each of those streams at free time has completed.
//! Nothing here ever waits for a whole device; the hot path only queries events.

use std::collections::VecDeque;

use crate::backend::{Backend, BackendError, EventId, StreamId};

/// One outstanding event and the block waiting for it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pending {
    pub event: EventId,
    pub block: u32,
}

/// Outstanding events, in record order per stream, and a pool of idle events.
#[derive(Debug, Default)]
pub(crate) struct PendingFrees {
    queues: Vec<VecDeque<Pending>>,
    count: usize,
    idle_events: Vec<EventId>,
}

impl PendingFrees {
    /// Whether any event is outstanding.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Records an event on `stream` for `block`.
    pub fn record(
        &mut self,
        backend: &dyn Backend,
        stream: StreamId,
        block: u32,
    ) -> Result<(), BackendError> {
        let event = match self.idle_events.pop() {
            Some(e) => e,
            None => backend.create_event()?,
        };
        if let Err(e) = backend.record_event(event, stream) {
            self.idle_events.push(event);
            return Err(e);
        }
        if self.queues.len() <= stream.index() {
            self.queues.resize_with(stream.index() + 1, VecDeque::new);
        }
        self.queues[stream.index()].push_back(Pending { event, block });
        self.count += 1;
        Ok(())
    }

    /// Removes the events that have completed (in order per stream; a stream's later
    /// events are not queried while an earlier one is outstanding) and returns the
    /// blocks they were holding, one entry per event.
    pub fn take_completed(
        &mut self,
        backend: &dyn Backend,
        out: &mut Vec<u32>,
    ) -> Result<(), BackendError> {
        for q in &mut self.queues {
            while let Some(p) = q.front() {
                if !backend.query_event(p.event)? {
                    break;
                }
                out.push(p.block);
                self.idle_events.push(p.event);
                q.pop_front();
                self.count -= 1;
            }
        }
        Ok(())
    }

    /// Waits for every outstanding event and returns all the blocks.
    pub fn take_all(
        &mut self,
        backend: &dyn Backend,
        out: &mut Vec<u32>,
    ) -> Result<(), BackendError> {
        for q in &mut self.queues {
            while let Some(p) = q.front() {
                backend.synchronize_event(p.event)?;
                out.push(p.block);
                self.idle_events.push(p.event);
                q.pop_front();
                self.count -= 1;
            }
        }
        Ok(())
    }

    /// Destroys the idle events (when the allocator is dropped).
    pub fn destroy_idle(&mut self, backend: &dyn Backend) {
        for e in self.idle_events.drain(..) {
            let _ = backend.destroy_event(e);
        }
    }
}
