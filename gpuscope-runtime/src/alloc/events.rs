//! Cross-stream frees: a block that other streams used (`record_stream`) is freed
//! only once the work queued on each of those streams before its free has completed.
//! Nothing here ever waits for a whole device; the hot path only queries.
//!
//! A free makes no driver call: it notes the streams the block waits for, and the next
//! allocation (or anything that needs the memory) seals the frees noted since the last
//! one, stream by stream ([`PendingFrees::seal`]): a stream that has finished its work
//! gives its blocks back at once; for a busy one, one event is recorded for all of them,
//! and later polls query it. An event recorded after the frees still comes after every
//! piece of work queued before them, so it guards their blocks as well; the frees of a
//! layer's weights or of a gradient bucket then cost one query, or one record, per
//! stream, not one record per block.

use std::collections::VecDeque;

use crate::backend::{Backend, BackendError, EventId, StreamId};

use super::stats::MemoryStats;

/// One block waiting for an outstanding event (several blocks may share one).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pending {
    pub event: EventId,
    pub block: u32,
    /// The last of the blocks queued behind `event`: taking it returns the event to the
    /// pool.
    pub last: bool,
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
    /// Frees not sealed yet ([`Self::seal`]), in free order. Counted in `count`.
    unsealed: Vec<(StreamId, u32)>,
    /// Frees that got neither an event nor a synchronisation of one of their streams
    /// (both driver calls failed): each poll tries to record their event again, and
    /// [`Self::take_all`] synchronises their stream. Counted in `count`.
    unfenced: Vec<(StreamId, u32)>,
}

impl PendingFrees {
    /// Whether no free is waiting.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Whether every free noted has been sealed ([`Self::seal`] has nothing to do).
    #[inline]
    pub fn all_sealed(&self) -> bool {
        self.unsealed.is_empty()
    }

    /// Notes that `block` waits for the work queued on `stream` until now, until the
    /// next [`Self::seal`].
    pub fn add(&mut self, stream: StreamId, block: u32) {
        self.unsealed.push((stream, block));
        self.count += 1;
    }

    /// Seals the frees noted since the last seal, stream by stream: when the stream has
    /// finished all its work (one `cuStreamQuery`), its blocks go to `done`; otherwise
    /// one event is recorded on it and they wait behind it. The frees of a stream whose
    /// event could not be recorded go to `failed`, for the caller's fallback. Neither
    /// `done` nor `failed` is counted here any more. `heard` hears of each stream's
    /// answer (idle or not; a failed query counts as busy).
    pub fn seal(
        &mut self,
        backend: &dyn Backend,
        stats: &mut MemoryStats,
        done: &mut Vec<u32>,
        failed: &mut Vec<(StreamId, u32)>,
        mut heard: impl FnMut(StreamId, bool),
    ) {
        if self.unsealed.is_empty() {
            return;
        }
        let mut batch = std::mem::take(&mut self.unsealed);
        // Stable: a stream's frees keep their order.
        batch.sort_by_key(|&(stream, _)| stream.0);
        for group in batch.chunk_by(|a, b| a.0 == b.0) {
            let stream = group[0].0;
            stats.num_stream_queries += 1;
            // A query that fails counts as a busy stream: the event decides.
            let idle = matches!(backend.query_stream(stream), Ok(true));
            heard(stream, idle);
            if idle {
                self.count -= group.len();
                done.extend(group.iter().map(|&(_, block)| block));
                continue;
            }
            match self.record_event(backend, stream, stats) {
                Ok(event) => {
                    for (i, &(_, block)) in group.iter().enumerate() {
                        let last = i + 1 == group.len();
                        self.push(stream, Pending { event, block, last });
                    }
                }
                Err(_) => {
                    self.count -= group.len();
                    failed.extend_from_slice(group);
                }
            }
        }
        batch.clear();
        self.unsealed = batch;
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
                    let last = true;
                    self.push(stream, Pending { event, block, last });
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
        debug_assert!(self.unsealed.is_empty(), "frees not sealed before polling");
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
        debug_assert!(self.unsealed.is_empty(), "frees not sealed before waiting");
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
    /// is asked first: when it has completed, the whole queue goes with one call;
    /// otherwise the queue is walked from the front. Blocks behind one event (the frees
    /// of a gradient bucket or a layer) are answered by one call.
    fn drain(
        &mut self,
        out: &mut Vec<u32>,
        mut done: impl FnMut(&Pending) -> Result<bool, BackendError>,
    ) -> Result<(), BackendError> {
        let mut i = 0;
        let mut result = Ok(());
        while i < self.active.len() {
            let q = &mut self.queues[self.active[i] as usize];
            let (front, back) = match (q.front(), q.back()) {
                (Some(f), Some(b)) => (*f, *b),
                _ => unreachable!("an active queue is not empty"),
            };
            // Whether the last event has completed, when it was asked (only when the
            // queue holds more than one event).
            let mut last = None;
            if front.event != back.event {
                match done(&back) {
                    Ok(finished) => last = Some(finished),
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            // The event of the blocks taken last, known to have completed.
            let mut completed: Option<EventId> = None;
            while let Some(p) = q.front() {
                let finished = match last {
                    Some(true) => Ok(true),
                    _ if completed == Some(p.event) => Ok(true),
                    Some(false) if p.event == back.event => Ok(false),
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
                completed = Some(p.event);
                out.push(p.block);
                if p.last {
                    self.idle_events.push(p.event);
                }
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
    use crate::backend::DeviceAddr;
    use crate::backend::test::{Call, TestBackend};

    /// A test device with manual events and a stream, empty statistics and pending
    /// frees, and 4 KiB of device memory for launches.
    fn fixture() -> (TestBackend, StreamId, MemoryStats, PendingFrees, DeviceAddr) {
        let (dev, s) = manual();
        let x = dev.malloc(4096).unwrap();
        (dev, s, MemoryStats::default(), PendingFrees::default(), x)
    }

    /// Seals what was noted; asserts nothing failed and returns the blocks given back.
    fn seal(p: &mut PendingFrees, dev: &TestBackend, stats: &mut MemoryStats) -> Vec<u32> {
        let (mut done, mut failed) = (Vec::new(), Vec::new());
        p.seal(dev, stats, &mut done, &mut failed, |_, _| {});
        assert!(failed.is_empty());
        done
    }

    /// A free on `s`, busy, sealed at once: its own event.
    fn record(
        p: &mut PendingFrees,
        dev: &TestBackend,
        s: StreamId,
        block: u32,
        stats: &mut MemoryStats,
    ) {
        p.add(s, block);
        assert!(seal(p, dev, stats).is_empty(), "stream {s} is idle");
    }

    /// The frees of a bucket, all behind one completed point of a stream: one query
    /// gives back every block (and one synchronisation waits for all).
    #[test]
    fn a_completed_queue_costs_one_call() {
        let (dev, s, mut stats, mut p, x) = fixture();
        dev.launch(s, x, 4096).unwrap();
        for block in 0..10 {
            record(&mut p, &dev, s, block, &mut stats);
        }
        dev.complete_stream(s);
        let mut out = Vec::new();
        p.take_completed(&dev, &mut out, &mut stats).unwrap();
        assert_eq!(out.len(), 10);
        assert_eq!(stats.num_event_queries, 1);
        assert!(p.is_empty());

        for block in 0..10 {
            dev.launch(s, x, 4096).unwrap();
            record(&mut p, &dev, s, block, &mut stats);
        }
        out.clear();
        p.take_all(&dev, &mut out, &mut stats).unwrap();
        assert_eq!((out.len(), stats.num_event_syncs), (10, 1));
    }

    /// When the last event has not completed, the earlier ones that have still go, in
    /// order, and the last one is not asked twice.
    #[test]
    fn an_unfinished_last_event_keeps_only_what_waits() {
        let (dev, s, mut stats, mut p, x) = fixture();
        for block in 0..3 {
            dev.launch(s, x, 4096).unwrap();
            record(&mut p, &dev, s, block, &mut stats);
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

    /// Frees noted between two seals share one event per busy stream, recorded after the
    /// last of them (so work queued between the frees is covered too), and one query
    /// answers for all; an idle stream gives its blocks back at the seal, without an event.
    #[test]
    fn a_seal_asks_each_stream_once() {
        let (dev, s, mut stats, mut p, x) = fixture();
        let (t, u) = (dev.create_stream().unwrap(), dev.create_stream().unwrap());
        dev.launch(t, x, 4096).unwrap();
        p.add(s, 0);
        p.add(t, 1);
        dev.launch(s, x, 4096).unwrap(); // queued after the first free: waited for too
        p.add(s, 2);
        p.add(t, 2); // a block used on two streams waits for both
        p.add(u, 3); // u has nothing queued
        assert_eq!(seal(&mut p, &dev, &mut stats), [3], "u is idle");
        assert_eq!((stats.num_stream_queries, stats.num_event_records), (3, 2));

        let mut out = Vec::new();
        dev.complete_stream(t);
        p.take_completed(&dev, &mut out, &mut stats).unwrap();
        assert_eq!(out, [1, 2], "t's frees; s's wait for the launch");
        dev.complete_stream(s);
        out.clear();
        p.take_completed(&dev, &mut out, &mut stats).unwrap();
        assert_eq!(out, [0, 2]);
        assert!(p.is_empty());
        assert_eq!(stats.num_event_queries, 3, "s before and after, t once");

        // Each shared event went back to the pool once: two seals reuse them.
        let created = dev.calls()[&Call::CreateEvent];
        dev.launch(s, x, 4096).unwrap();
        record(&mut p, &dev, s, 4, &mut stats);
        record(&mut p, &dev, s, 5, &mut stats);
        assert_eq!(dev.calls()[&Call::CreateEvent], created);
        out.clear();
        p.take_all(&dev, &mut out, &mut stats).unwrap();
        assert_eq!((out.as_slice(), stats.num_event_syncs), (&[4, 5][..], 1));
    }

    /// A busy stream whose event cannot be recorded hands its frees back, in order, no
    /// longer counted; a stream that cannot be queried counts as busy.
    #[test]
    fn a_failed_record_hands_the_frees_back() {
        let (dev, s, mut stats, mut p, x) = fixture();
        dev.launch(s, x, 4096).unwrap();
        p.add(s, 4);
        p.add(s, 5);
        dev.fail_call(Call::RecordEvent, 1);
        let (mut done, mut failed) = (Vec::new(), Vec::new());
        p.seal(&dev, &mut stats, &mut done, &mut failed, |_, _| {});
        assert_eq!((done, failed), (vec![], vec![(s, 4), (s, 5)]));
        assert!(p.is_empty());

        dev.complete_stream(s);
        p.add(s, 6);
        dev.fail_call(Call::QueryStream, 1);
        assert!(
            seal(&mut p, &dev, &mut stats).is_empty(),
            "an event instead"
        );
        dev.complete_stream(s);
        let mut out = Vec::new();
        p.take_completed(&dev, &mut out, &mut stats).unwrap();
        assert_eq!(out, [6]);
        assert!(p.is_empty());
    }
}
