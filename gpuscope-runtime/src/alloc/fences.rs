//! Stream fences: how long free memory of a stream must wait before it is unmapped,
//! released, or remapped for another stream.
//!
//! A fence is an event recorded on a stream after all the work queued on it so far
//! ([`CachingAllocator::record_fence`](super::CachingAllocator::record_fence), called by
//! scopes at exit). Every free stamps its block with the allocator's tick; a fence
//! stores the tick at which it was recorded. Per stream this module keeps:
//!
//! - `last_freed`: the tick of the stream's last free (so that a fence with nothing to
//!   cover is not recorded);
//! - at most one outstanding fence (its tick; the stream's one event, recorded again
//!   for each fence and destroyed with the allocator);
//! - `completed`: the newest tick known to be complete on the stream: the tick of the
//!   newest fence seen complete, or the tick at which the allocator synchronised the
//!   stream;
//! - when its last fence was recorded: a new one is recorded at most once per
//!   `fence_interval_us` (configuration; each costs an event record and query on CUDA),
//!   so a loop of short scopes pays for a fence now and then, not at every exit.
//!
//! Before memory freed at tick `t` goes away, [`Fences::cover`] says what to wait for:
//! nothing when `t <= completed`; the outstanding fence's event when `t <= its tick`
//! (which waits only for the work queued up to the fence, not for later work); else the
//! whole stream. Events are queried (without blocking) only there and in
//! `record_fence`, on the paths that give memory away, never on malloc or free.

use std::time::{Duration, Instant};

use crate::backend::{Backend, BackendError, EventId, StreamId};

use super::oom::AllocError;
use super::state::AllocState;
use super::stats::MemoryStats;

/// What memory of a stream freed at some tick must wait for before it is given away,
/// cheapest first.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) enum Cover {
    /// Nothing: a completed fence (or a synchronisation) came after the free.
    Done,
    /// The stream's outstanding fence, recorded after the free.
    Fence,
    /// The whole stream: no fence came after the free.
    Stream,
}

/// One stream's fence state.
#[derive(Debug, Default)]
struct StreamFence {
    /// The stream's fence event, created at its first fence.
    event: Option<EventId>,
    /// The tick of the outstanding fence, if one is.
    outstanding: Option<u64>,
    /// The newest tick known complete on the stream.
    completed: u64,
    /// The tick of the stream's last free.
    last_freed: u64,
    /// When its last fence was recorded.
    recorded_at: Option<Instant>,
}

/// Fence state of every stream. See the [module documentation](self).
#[derive(Debug, Default)]
pub(crate) struct Fences {
    streams: Vec<StreamFence>,
}

impl Fences {
    fn stream_mut(&mut self, stream: StreamId) -> &mut StreamFence {
        let i = stream.index();
        if self.streams.len() <= i {
            self.streams.resize_with(i + 1, StreamFence::default);
        }
        &mut self.streams[i]
    }

    /// Notes a free on `stream` at `tick` (the free path: one store).
    #[inline]
    pub fn note_free(&mut self, stream: StreamId, tick: u64) {
        match self.streams.get_mut(stream.index()) {
            Some(s) => s.last_freed = tick,
            None => self.stream_mut(stream).last_freed = tick,
        }
    }

    /// The newest tick known complete on `stream` (0: none yet; memory never used has
    /// tick 0).
    #[inline(always)]
    pub fn completed(&self, stream: StreamId) -> u64 {
        self.streams.get(stream.index()).map_or(0, |s| s.completed)
    }

    /// Marks the outstanding fence complete if its event has completed (non-blocking).
    fn poll(
        s: &mut StreamFence,
        backend: &dyn Backend,
        stats: &mut MemoryStats,
    ) -> Result<(), BackendError> {
        if let (Some(tick), Some(event)) = (s.outstanding, s.event) {
            stats.num_event_queries += 1;
            if backend.query_event(event)? {
                s.completed = s.completed.max(tick);
                s.outstanding = None;
            }
        }
        Ok(())
    }

    /// Records a fence on `stream` at `tick` when one is useful: something was freed on
    /// the stream since its newest fence, no fence is outstanding, and the last one was
    /// recorded at least `interval` ago (checked first: within it, no driver call at all).
    /// Returns whether an event was recorded.
    pub fn record(
        &mut self,
        backend: &dyn Backend,
        stream: StreamId,
        tick: u64,
        interval: Duration,
        stats: &mut MemoryStats,
    ) -> Result<bool, BackendError> {
        let s = self.stream_mut(stream);
        if !interval.is_zero() {
            if let Some(at) = s.recorded_at {
                if at.elapsed() < interval {
                    return Ok(false);
                }
            }
        }
        Self::poll(s, backend, stats)?;
        if s.outstanding.is_some() || s.last_freed <= s.completed {
            return Ok(false);
        }
        let event = match s.event {
            Some(e) => e,
            None => {
                let e = backend.create_event()?;
                s.event = Some(e);
                e
            }
        };
        // On failure nothing is outstanding; the event stays for the next fence.
        stats.num_event_records += 1;
        backend.record_event(event, stream)?;
        s.outstanding = Some(tick);
        if !interval.is_zero() {
            s.recorded_at = Some(Instant::now());
        }
        Ok(true)
    }

    /// What memory of `stream` freed at `freed_at` must wait for (queries the
    /// outstanding fence when that decides it).
    pub fn cover(
        &mut self,
        backend: &dyn Backend,
        stream: StreamId,
        freed_at: u64,
        stats: &mut MemoryStats,
    ) -> Result<Cover, BackendError> {
        let Some(s) = self.streams.get_mut(stream.index()) else {
            // No fence and no synchronisation yet: only never-used memory (freed_at 0)
            // is known idle.
            return Ok(if freed_at == 0 {
                Cover::Done
            } else {
                Cover::Stream
            });
        };
        if freed_at <= s.completed {
            return Ok(Cover::Done);
        }
        match s.outstanding {
            Some(tick) if freed_at <= tick => {
                Self::poll(s, backend, stats)?;
                Ok(if s.outstanding.is_none() {
                    Cover::Done
                } else {
                    Cover::Fence
                })
            }
            _ => Ok(Cover::Stream),
        }
    }

    /// Waits for `stream`'s outstanding fence (blocking, up to the fence only) and
    /// marks it complete. Nothing to do without one.
    pub fn wait(
        &mut self,
        backend: &dyn Backend,
        stream: StreamId,
        stats: &mut MemoryStats,
    ) -> Result<(), BackendError> {
        let Some(s) = self.streams.get_mut(stream.index()) else {
            return Ok(());
        };
        if let (Some(tick), Some(event)) = (s.outstanding, s.event) {
            stats.num_event_syncs += 1;
            backend.synchronize_event(event)?;
            s.completed = s.completed.max(tick);
            s.outstanding = None;
        }
        Ok(())
    }

    /// `stream` was synchronised at `tick`: everything freed on it so far is idle, and
    /// its outstanding fence (recorded before) has completed.
    pub fn synced(&mut self, stream: StreamId, tick: u64) {
        let s = self.stream_mut(stream);
        s.completed = s.completed.max(tick);
        s.outstanding = None;
    }

    /// Whether `stream` has a fence outstanding (as last seen; not queried).
    #[cfg(test)]
    pub fn is_outstanding(&self, stream: StreamId) -> bool {
        self.streams
            .get(stream.index())
            .is_some_and(|s| s.outstanding.is_some())
    }

    /// Destroys the fence events (when the allocator is dropped).
    pub fn destroy(&mut self, backend: &dyn Backend) {
        for s in &mut self.streams {
            if let Some(e) = s.event.take() {
                let _ = backend.destroy_event(e);
            }
            s.outstanding = None;
        }
    }
}

impl AllocState {
    /// Records a fence on `stream` (see [`Fences::record`]).
    pub fn record_fence(&mut self, stream: StreamId) -> Result<bool, AllocError> {
        self.check_stream(stream)?;
        let interval = Duration::from_micros(self.config.fence_interval_us);
        let recorded = self.fences.record(
            &*self.backend,
            stream,
            self.tick,
            interval,
            &mut self.stats.other,
        )?;
        if recorded {
            self.stats.other.num_fences += 1;
        }
        Ok(recorded)
    }

    /// Waits until no queued work uses memory of `stream` freed at tick `freed_at`, so
    /// that it can be unmapped or freed, when that wait is at most `max_wait`: none after
    /// a completed fence (or synchronisation), the outstanding fence when it came after
    /// the free, else the whole stream. Returns `false` (waiting for nothing) when the
    /// memory would need more than `max_wait`.
    pub(super) fn wait_freed_upto(
        &mut self,
        stream: StreamId,
        freed_at: u64,
        max_wait: Cover,
    ) -> Result<bool, BackendError> {
        let cover = self
            .fences
            .cover(&*self.backend, stream, freed_at, &mut self.stats.other)?;
        if cover > max_wait {
            return Ok(false);
        }
        match cover {
            Cover::Done => {}
            Cover::Fence => {
                self.fences
                    .wait(&*self.backend, stream, &mut self.stats.other)?;
                self.stats.other.num_fence_waits += 1;
            }
            Cover::Stream => self.sync_stream(stream)?,
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::test_support::manual;

    #[test]
    fn a_fence_is_recorded_only_when_it_covers_a_new_free() {
        let (dev, s) = manual();
        let mut f = Fences::default();
        let mut st = MemoryStats::default();
        assert!(
            !f.record(&dev, s, 0, Duration::ZERO, &mut st).unwrap(),
            "nothing freed yet"
        );
        f.note_free(s, 3);
        assert!(f.record(&dev, s, 3, Duration::ZERO, &mut st).unwrap());
        assert_eq!(dev.counters().event_records, 1);
        f.note_free(s, 4);
        assert!(
            !f.record(&dev, s, 4, Duration::ZERO, &mut st).unwrap(),
            "the previous fence is outstanding"
        );
        dev.complete_stream(s);
        assert!(
            f.record(&dev, s, 4, Duration::ZERO, &mut st).unwrap(),
            "the free at 4 is not covered"
        );
        dev.complete_stream(s);
        assert!(
            !f.record(&dev, s, 4, Duration::ZERO, &mut st).unwrap(),
            "nothing freed since"
        );
        assert_eq!(dev.counters().event_records, 2);
    }

    #[test]
    fn cover_follows_the_ticks() {
        let (dev, s) = manual();
        let mut f = Fences::default();
        let mut st = MemoryStats::default();
        assert_eq!(
            f.cover(&dev, s, 0, &mut st).unwrap(),
            Cover::Done,
            "never used"
        );
        assert_eq!(f.cover(&dev, s, 1, &mut st).unwrap(), Cover::Stream);
        f.note_free(s, 5);
        assert!(f.record(&dev, s, 5, Duration::ZERO, &mut st).unwrap());
        assert_eq!(f.cover(&dev, s, 5, &mut st).unwrap(), Cover::Fence);
        assert_eq!(
            f.cover(&dev, s, 6, &mut st).unwrap(),
            Cover::Stream,
            "freed after"
        );
        f.wait(&dev, s, &mut st).unwrap();
        assert!(!f.is_outstanding(s));
        assert_eq!(f.cover(&dev, s, 5, &mut st).unwrap(), Cover::Done);
        assert_eq!(f.cover(&dev, s, 6, &mut st).unwrap(), Cover::Stream);
        assert_eq!(dev.counters().stream_syncs, 0);

        f.note_free(s, 7);
        assert!(f.record(&dev, s, 7, Duration::ZERO, &mut st).unwrap());
        dev.complete_stream(s);
        assert_eq!(
            f.cover(&dev, s, 7, &mut st).unwrap(),
            Cover::Done,
            "a completed fence is seen by a query"
        );
        f.synced(s, 9);
        assert_eq!(f.cover(&dev, s, 9, &mut st).unwrap(), Cover::Done);
        assert_eq!(f.cover(&dev, s, 10, &mut st).unwrap(), Cover::Stream);
        f.destroy(&dev);
    }

    #[test]
    fn a_sync_completes_the_outstanding_fence() {
        let (dev, s) = manual();
        let mut f = Fences::default();
        let mut st = MemoryStats::default();
        f.note_free(s, 1);
        assert!(f.record(&dev, s, 1, Duration::ZERO, &mut st).unwrap());
        f.synced(s, 2);
        assert!(!f.is_outstanding(s));
        assert!(
            !f.record(&dev, s, 2, Duration::ZERO, &mut st).unwrap(),
            "the sync covered every free"
        );
        f.destroy(&dev);
        // The event was destroyed: the backend no longer knows it.
        assert!(dev.query_event(EventId(0)).is_err());
    }

    #[test]
    fn within_the_interval_no_fence_and_no_driver_call() {
        let (dev, _) = manual();
        let s = StreamId::DEFAULT;
        let mut f = Fences::default();
        let mut st = MemoryStats::default();
        let hour = Duration::from_secs(3600);
        f.note_free(s, 1);
        assert!(f.record(&dev, s, 1, hour, &mut st).unwrap());
        dev.complete_stream(s);
        f.note_free(s, 2);
        let records = dev.counters().event_records;
        assert!(
            !f.record(&dev, s, 2, hour, &mut st).unwrap(),
            "within the interval"
        );
        assert_eq!(dev.counters().event_records, records);
        // Without a limit the same call records.
        assert!(f.record(&dev, s, 2, Duration::ZERO, &mut st).unwrap());
    }
}
