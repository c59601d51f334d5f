//! How a [`TestBackend`] is configured: capacity, virtual memory, when events complete,
//! and injected allocation failures.

use std::sync::Mutex;

use super::{BASE_ADDR, State, StreamState, TestBackend};

/// When the test backend's events complete.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum EventMode {
    /// Every event completes as soon as it is recorded (no work is ever in flight).
    #[default]
    Immediate,
    /// An event completes once its stream is synchronized or
    /// [`TestBackend::complete_stream`] is called: work stays "in flight" until then.
    Manual,
}

/// Builds a [`TestBackend`].
#[derive(Clone, Debug)]
pub struct TestBackendBuilder {
    capacity: usize,
    granularity: Option<usize>,
    event_mode: EventMode,
    fail_every: Option<u64>,
    fail_at: Vec<u64>,
}

impl TestBackendBuilder {
    /// The defaults: 80 GiB, no virtual memory, events that complete at once, no
    /// injected failure.
    pub(super) fn new() -> Self {
        TestBackendBuilder {
            capacity: 80 << 30,
            granularity: None,
            event_mode: EventMode::Immediate,
            fail_every: None,
            fail_at: Vec::new(),
        }
    }

    /// Total device memory (default 80 GiB).
    pub fn capacity(mut self, bytes: usize) -> Self {
        self.capacity = bytes;
        self
    }

    /// Gives the backend virtual memory with this granularity (e.g. 2 MiB).
    pub fn virtual_memory(mut self, granularity: usize) -> Self {
        self.granularity = Some(granularity);
        self
    }

    /// How events complete (default [`EventMode::Immediate`]).
    pub fn event_mode(mut self, mode: EventMode) -> Self {
        self.event_mode = mode;
        self
    }

    /// Makes every `n`-th device allocation attempt fail with out-of-memory.
    pub fn fail_every(mut self, n: u64) -> Self {
        self.fail_every = Some(n.max(1));
        self
    }

    /// Makes the `n`-th device allocation attempt (1-based) fail with out-of-memory.
    pub fn fail_allocation(mut self, n: u64) -> Self {
        self.fail_at.push(n);
        self
    }

    /// The backend.
    pub fn build(self) -> TestBackend {
        TestBackend {
            capacity: self.capacity,
            granularity: self.granularity,
            state: Mutex::new(State {
                event_mode: self.event_mode,
                fail_every: self.fail_every,
                fail_at: self.fail_at.into_iter().collect(),
                next_addr: BASE_ADDR,
                streams: vec![StreamState::default()],
                ..State::default()
            }),
        }
    }
}
