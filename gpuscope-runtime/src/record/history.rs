//! A device's allocation history: an opt-in, bounded record of every allocation and
//! free (with the line that asked for it) and of every change of reserved memory, like
//! PyTorch's `_record_memory_history`.
//!
//! [`HistoryRecorder`] is what a device holds: off, it costs one relaxed atomic load per
//! allocation; on, one lock and a push into a ring of at most `max_entries` events (the
//! oldest go first, and what they did is folded into the history's base values, so that
//! allocated and reserved memory stay exact over what is kept). [`History`] is the
//! exported copy: plain data, serialisable with the `serde` feature.

use std::collections::{HashMap, VecDeque};
use std::panic::Location;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::site::location_string;

/// What an event of the history did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "snake_case")
)]
pub enum HistoryAction {
    /// A block was handed out (`size`: the bytes asked for).
    Alloc,
    /// A block was given back (`size`: the bytes it was asked for with).
    Free,
    /// Reserved memory grew by `size` bytes (a segment, or pages mapped into one).
    SegmentAlloc,
    /// Reserved memory shrank by `size` bytes.
    SegmentFree,
}

/// One event of a [`History`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct HistoryEvent {
    /// Nanoseconds since the recording started.
    pub time_ns: u64,
    /// What happened.
    pub action: HistoryAction,
    /// The block's address (0 for segment events, whose address is not known).
    pub addr: u64,
    /// Bytes (see [`HistoryAction`]).
    pub size: u64,
    /// The stream.
    pub stream: u64,
    /// The site that asked for it: an index into [`History::sites`] (allocations only).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub site: Option<u32>,
}

/// A device's allocation history, as [`memory::history`](crate::memory::history)
/// returns it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct History {
    /// The most events kept (older ones were dropped).
    pub max_entries: u64,
    /// Events dropped because the history was full.
    pub dropped: u64,
    /// Bytes allocated (asked for) before the first event kept.
    pub base_allocated: u64,
    /// Bytes reserved before the first event kept.
    pub base_reserved: u64,
    /// Sites (`file:line:column`) the events point at.
    pub sites: Vec<String>,
    /// The events, oldest first.
    pub events: Vec<HistoryEvent>,
}

impl History {
    /// The site of event `e`, if it has one.
    pub fn site_of(&self, e: &HistoryEvent) -> Option<&str> {
        e.site
            .and_then(|i| self.sites.get(i as usize))
            .map(String::as_str)
    }
}

/// One recorded event, before export.
#[derive(Clone, Copy)]
struct RawEvent {
    time_ns: u64,
    action: HistoryAction,
    addr: u64,
    size: u64,
    stream: u32,
    site: Option<&'static Location<'static>>,
}

struct Ring {
    max: usize,
    start: Instant,
    events: VecDeque<RawEvent>,
    dropped: u64,
    base_allocated: i128,
    base_reserved: i128,
    last_reserved: u64,
}

impl Ring {
    fn push(&mut self, e: RawEvent) {
        if self.events.len() == self.max {
            if let Some(old) = self.events.pop_front() {
                let size = old.size as i128;
                match old.action {
                    HistoryAction::Alloc => self.base_allocated += size,
                    HistoryAction::Free => self.base_allocated -= size,
                    HistoryAction::SegmentAlloc => self.base_reserved += size,
                    HistoryAction::SegmentFree => self.base_reserved -= size,
                }
                self.dropped += 1;
            }
        }
        self.events.push_back(e);
    }

    fn note_reserved(&mut self, reserved: u64, time_ns: u64, stream: u32) {
        if reserved == self.last_reserved {
            return;
        }
        let (action, size) = if reserved > self.last_reserved {
            (HistoryAction::SegmentAlloc, reserved - self.last_reserved)
        } else {
            (HistoryAction::SegmentFree, self.last_reserved - reserved)
        };
        self.last_reserved = reserved;
        self.push(RawEvent {
            time_ns,
            action,
            addr: 0,
            size,
            stream,
            site: None,
        });
    }
}

/// A device's history recorder (off until [`start`](HistoryRecorder::start)ed).
#[derive(Default)]
pub struct HistoryRecorder {
    on: AtomicBool,
    ring: Mutex<Option<Ring>>,
}

impl HistoryRecorder {
    /// Whether it is recording (one relaxed load: the check on every allocation).
    #[inline]
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Ring>> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts recording at most `max_entries` events (`0` stops), dropping what was
    /// recorded before. `allocated` and `reserved` are the device's bytes now.
    pub fn start(&self, max_entries: usize, allocated: u64, reserved: u64) {
        let mut ring = self.lock();
        if max_entries == 0 {
            *ring = None;
            self.on.store(false, Ordering::Relaxed);
            return;
        }
        *ring = Some(Ring {
            max: max_entries,
            start: Instant::now(),
            events: VecDeque::with_capacity(max_entries.min(1 << 16)),
            dropped: 0,
            base_allocated: allocated as i128,
            base_reserved: reserved as i128,
            last_reserved: reserved,
        });
        self.on.store(true, Ordering::Relaxed);
    }

    /// Records an allocation (`size`: bytes asked for) and the reserved bytes after it.
    pub fn record(
        &self,
        action: HistoryAction,
        addr: u64,
        size: usize,
        stream: u32,
        site: Option<&'static Location<'static>>,
        reserved_after: u64,
    ) {
        let mut guard = self.lock();
        let Some(ring) = guard.as_mut() else {
            return;
        };
        let time_ns = ring.start.elapsed().as_nanos() as u64;
        // Reserved memory grows before the block is handed out, and shrinks after a
        // block is given back.
        if action == HistoryAction::Alloc {
            ring.note_reserved(reserved_after, time_ns, stream);
        }
        ring.push(RawEvent {
            time_ns,
            action,
            addr,
            size: size as u64,
            stream,
            site,
        });
        if action != HistoryAction::Alloc {
            ring.note_reserved(reserved_after, time_ns, stream);
        }
    }

    /// Notes a change of reserved memory outside any allocation (`empty_cache`).
    pub fn note_reserved(&self, reserved: u64) {
        let mut guard = self.lock();
        if let Some(ring) = guard.as_mut() {
            let time_ns = ring.start.elapsed().as_nanos() as u64;
            ring.note_reserved(reserved, time_ns, 0);
        }
    }

    /// A copy of the history (`None` while not recording).
    pub fn export(&self) -> Option<History> {
        let guard = self.lock();
        let ring = guard.as_ref()?;
        let mut site_index: HashMap<*const Location<'static>, u32> = HashMap::new();
        let mut sites = Vec::new();
        let events = ring
            .events
            .iter()
            .map(|e| HistoryEvent {
                time_ns: e.time_ns,
                action: e.action,
                addr: e.addr,
                size: e.size,
                stream: e.stream as u64,
                site: e.site.map(|s| {
                    *site_index.entry(s as *const _).or_insert_with(|| {
                        sites.push(location_string(s));
                        (sites.len() - 1) as u32
                    })
                }),
            })
            .collect();
        Some(History {
            max_entries: ring.max as u64,
            dropped: ring.dropped,
            base_allocated: ring.base_allocated.max(0) as u64,
            base_reserved: ring.base_reserved.max(0) as u64,
            sites,
            events,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_history_drops_the_oldest_and_keeps_the_totals() {
        let r = HistoryRecorder::default();
        assert!(!r.is_on() && r.export().is_none());
        r.start(4, 100, 1000);
        let here = Location::caller();
        r.record(HistoryAction::Alloc, 1, 10, 0, Some(here), 2000); // + segment_alloc
        r.record(HistoryAction::Alloc, 2, 20, 0, Some(here), 2000);
        r.record(HistoryAction::Free, 1, 10, 0, None, 2000);
        r.record(HistoryAction::Free, 2, 20, 0, None, 1500); // + segment_free
        let h = r.export().unwrap();
        // 6 events, 4 kept: the segment_alloc and the first alloc were dropped.
        assert_eq!(h.dropped, 2);
        assert_eq!(h.events.len(), 4);
        assert_eq!((h.base_allocated, h.base_reserved), (110, 2000));
        let allocated = h
            .events
            .iter()
            .fold(h.base_allocated as i64, |a, e| match e.action {
                HistoryAction::Alloc => a + e.size as i64,
                HistoryAction::Free => a - e.size as i64,
                _ => a,
            });
        assert_eq!(allocated, 100);
        assert_eq!(h.events[3].action, HistoryAction::SegmentFree);
        assert_eq!(h.events[3].size, 500);
        assert_eq!(
            h.site_of(&h.events[0]),
            Some(location_string(here).as_str())
        );
        assert_eq!(h.sites.len(), 1);
        r.start(0, 0, 0);
        assert!(!r.is_on() && r.export().is_none());
    }
}
