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
    /// Frees that got neither an event nor a synchronisation of one of their streams
    /// (both driver calls failed): each poll tries to record their event again, and
    /// [`Self::take_all`] synchronises their stream. Counted in `count`.
    unfenced: Vec<(StreamId, u32)>,
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
        let event = self.record_event(backend, stream, stats)?;
        self.push(stream, Pending { event, block });
        self.count += 1;
        Ok(())
    }

    /// Keeps `block` waiting for `stream` when neither an event could be recorded on it
    /// nor the stream synchronised: later polls retry the event.
    pub fn defer(&mut self, stream: StreamId, block: u32) {
        self.unfenced.push((stream, block));
        self.count += 1;
    }

    fn record_event(
        &mut self,
        backend: &dyn Backend,
        stream: StreamId,
        stats: &mut MemoryStats,
    ) -> Result<EventId, BackendError> {
        let event = match self.idle_events.pop() {
            Some(e) => e,
            None => backend.create_event()?,
        };
        stats.num_event_records += 1;
        match backend.record_event(event, stream) {
            Ok(()) => Ok(event),
            Err(e) => {
                self.idle_events.push(event);
                Err(e)
            }
        }
    }

    fn push(&mut self, stream: StreamId, pending: Pending) {
        if self.queues.len() <= stream.index() {
            self.queues.resize_with(stream.index() + 1, VecDeque::new);
        }
        let q = &mut self.queues[stream.index()];
        if q.is_empty() {
            self.active.push(stream.0);
        }
        q.push_back(pending);
    }

    /// Records the events that the deferred frees could not get; those that still
    /// fail stay deferred (the error was returned by the free).
    fn retry_unfenced(&mut self, backend: &dyn Backend, stats: &mut MemoryStats) {
        let mut i = 0;
        while i < self.unfenced.len() {
            let (stream, block) = self.unfenced[i];
            match self.record_event(backend, stream, stats) {
                Ok(event) => {
                    self.unfenced.swap_remove(i);
                    self.push(stream, Pending { event, block });
                }
                Err(_) => i += 1,
            }
        }
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
        if !self.unfenced.is_empty() {
            self.retry_unfenced(backend, stats);
        }
        self.drain(out, |p| {
            stats.num_event_queries += 1;
            backend.query_event(p.event)
        })
    }

    /// Waits for every outstanding event, and for the streams of deferred frees, and
    /// returns all the blocks (those whose wait failed stay).
    pub fn take_all(
        &mut self,
        backend: &dyn Backend,
        out: &mut Vec<u32>,
        stats: &mut MemoryStats,
    ) -> Result<(), BackendError> {
        let drained = self.drain(out, |p| {
            stats.num_event_syncs += 1;
            backend.synchronize_event(p.event).map(|()| true)
        });
        let mut synced = Ok(());
        let mut i = 0;
        while i < self.unfenced.len() {
            let (stream, block) = self.unfenced[i];
            stats.num_stream_syncs += 1;
            match backend.synchronize_stream(stream) {
                Ok(()) => {
                    self.unfenced.swap_remove(i);
                    self.count -= 1;
                    out.push(block);
                }
                Err(e) => {
                    synced = Err(e);
                    i += 1;
                }
            }
        }
        drained.and(synced)
    }

    /// Takes events off the front of each active queue while `done` says they have
    /// completed; stops at the first error (what was taken so far stays taken).
    ///
    /// A stream's events complete in the order they were recorded, so the last one
    /// is asked first: when it has completed, the whole queue goes with one call (the
    /// frees of a gradient bucket or a layer, freed together, cost one query, not one
    /// each); otherwise the queue is walked from the front.
    fn drain(
        &mut self,
        out: &mut Vec<u32>,
        mut done: impl FnMut(&Pending) -> Result<bool, BackendError>,
    ) -> Result<(), BackendError> {
        let mut i = 0;
        let mut result = Ok(());
        while i < self.active.len() {
            let q = &mut self.queues[self.active[i] as usize];
            // Whether the last event has completed, when it was asked.
            let mut last = None;
            if q.len() > 1 {
                match done(q.back().expect("a queue of two or more")) {
                    Ok(finished) => last = Some(finished),
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            while let Some(p) = q.front() {
                if last == Some(false) && q.len() == 1 {
                    break; // the last event, known not to have completed
                }
                let finished = match last {
                    Some(true) => Ok(true),
                    _ => done(p),
                };
                match finished {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::test_support::manual;

    /// The frees of a bucket, all behind one completed point of a stream: one query
    /// gives back every block (and one synchronisation waits for all).
    #[test]
    fn a_completed_queue_costs_one_call() {
        let (dev, s) = manual();
        let mut stats = MemoryStats::default();
        let mut p = PendingFrees::default();
        for block in 0..10 {
            p.record(&dev, s, block, &mut stats).unwrap();
        }
        dev.complete_stream(s);
        let mut out = Vec::new();
        p.take_completed(&dev, &mut out, &mut stats).unwrap();
        assert_eq!(out.len(), 10);
        assert_eq!(stats.num_event_queries, 1);
        assert!(p.is_empty());

        let x = dev.malloc(4096).unwrap();
        for block in 0..10 {
            dev.launch(s, x, 4096).unwrap();
            p.record(&dev, s, block, &mut stats).unwrap();
        }
        out.clear();
        p.take_all(&dev, &mut out, &mut stats).unwrap();
        assert_eq!((out.len(), stats.num_event_syncs), (10, 1));
    }

    /// When the last event has not completed, the earlier ones that have still go, in
    /// order, and the last one is not asked twice.
    #[test]
    fn an_unfinished_last_event_keeps_only_what_waits() {
        let (dev, s) = manual();
        let mut stats = MemoryStats::default();
        let mut p = PendingFrees::default();
        let x = dev.malloc(4096).unwrap();
        for block in 0..3 {
            dev.launch(s, x, 4096).unwrap();
            p.record(&dev, s, block, &mut stats).unwrap();
        }
        dev.complete_steps(s, 4); // two launches, two events

        let mut out = Vec::new();
        p.take_completed(&dev, &mut out, &mut stats).unwrap();
        assert_eq!(out, [0, 1]);
        assert_eq!(stats.num_event_queries, 3, "the last, then the first two");
        assert!(!p.is_empty());
        dev.complete_stream(s);
        out.clear();
        p.take_completed(&dev, &mut out, &mut stats).unwrap();
        assert_eq!((out.as_slice(), stats.num_event_queries), (&[2][..], 4));
        assert!(p.is_empty());
    }
}
