//! Cross-stream frees: a block that other streams used (`record_stream`) is freed
//! only once an event recorded on each of those streams at free time has completed.
//! Nothing here ever waits for a whole device; the hot path only queries events.

use std::collections::VecDeque;

use crate::backend::{Backend, BackendError, EventId, StreamId};

use super::stats::MemoryStats;

/// One outstanding event and the block waiting for it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pending {
    pub event: EventId,
    pub block: u32,
}

/// Outstanding events, in record order per stream, and a pool of idle events. Only
/// the streams with an outstanding event are visited when polling, so the cost does not
/// grow with the number of streams.
#[derive(Debug, Default)]
pub(crate) struct PendingFrees {
    queues: Vec<VecDeque<Pending>>,
    /// Streams whose queue is not empty.
    active: Vec<u32>,
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
        stats: &mut MemoryStats,
    ) -> Result<(), BackendError> {
        let event = match self.idle_events.pop() {
            Some(e) => e,
            None => backend.create_event()?,
        };
        stats.num_event_records += 1;
        if let Err(e) = backend.record_event(event, stream) {
            self.idle_events.push(event);
            return Err(e);
        }
        if self.queues.len() <= stream.index() {
            self.queues.resize_with(stream.index() + 1, VecDeque::new);
        }
        let q = &mut self.queues[stream.index()];
        if q.is_empty() {
            self.active.push(stream.0);
        }
        q.push_back(Pending { event, block });
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
        stats: &mut MemoryStats,
    ) -> Result<(), BackendError> {
        self.drain(out, |p| {
            stats.num_event_queries += 1;
            backend.query_event(p.event)
        })
    }

    /// Waits for every outstanding event and returns all the blocks.
    pub fn take_all(
        &mut self,
        backend: &dyn Backend,
        out: &mut Vec<u32>,
        stats: &mut MemoryStats,
    ) -> Result<(), BackendError> {
        self.drain(out, |p| {
            stats.num_event_syncs += 1;
            backend.synchronize_event(p.event).map(|()| true)
        })
    }

    /// Takes events off the front of each active queue while `done` says they have
    /// completed; stops at the first error (what was taken so far stays taken).
    fn drain(
        &mut self,
        out: &mut Vec<u32>,
        mut done: impl FnMut(&Pending) -> Result<bool, BackendError>,
    ) -> Result<(), BackendError> {
        let mut i = 0;
        let mut result = Ok(());
        while i < self.active.len() {
            let q = &mut self.queues[self.active[i] as usize];
            while let Some(p) = q.front() {
                match done(p) {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
                out.push(p.block);
                self.idle_events.push(p.event);
                q.pop_front();
                self.count -= 1;
            }
            if q.is_empty() {
                self.active.swap_remove(i);
            } else {
                i += 1;
            }
            if result.is_err() {
                break;
            }
        }
        result
    }

    /// Destroys the idle events (when the allocator is dropped).
    pub fn destroy_idle(&mut self, backend: &dyn Backend) {
        for e in self.idle_events.drain(..) {
            let _ = backend.destroy_event(e);
        }
    }
}
