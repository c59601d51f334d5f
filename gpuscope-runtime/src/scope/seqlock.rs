//! A sequence lock with one writer: the protocol every tracking slot uses (see
//! `slot.rs`), kept apart so that it can be model-checked with `loom`.
//!
//! The writer makes the counter odd, writes, and makes it even again; a reader reads the
//! counter, the data and the counter again, and retries unless both reads saw the same
//! even value. The data itself are atomics read and written `Relaxed`; the fences order
//! them against the counter (the construction of Boehm, "Can seqlocks get along with
//! programming language memory models?", 2012).
//!
//! Model check: `RUSTFLAGS="--cfg loom" cargo test -p gpuscope-runtime --release --lib
//! scope::seqlock` explores every interleaving of a writer and readers (the test below
//! runs only under `cfg(loom)`).

use std::sync::atomic::Ordering;

/// The counter's atomic operations (std's in the crate, loom's in the model check).
pub(crate) trait Counter {
    fn load(&self, order: Ordering) -> u32;
    fn store(&self, value: u32, order: Ordering);
    fn fence(order: Ordering);
    fn spin();
}

impl Counter for std::sync::atomic::AtomicU32 {
    #[inline]
    fn load(&self, order: Ordering) -> u32 {
        std::sync::atomic::AtomicU32::load(self, order)
    }
    #[inline]
    fn store(&self, value: u32, order: Ordering) {
        std::sync::atomic::AtomicU32::store(self, value, order)
    }
    #[inline]
    fn fence(order: Ordering) {
        std::sync::atomic::fence(order)
    }
    #[inline]
    fn spin() {
        std::hint::spin_loop()
    }
}

/// A sequence lock over a [`Counter`].
pub(crate) struct SeqLock<C = std::sync::atomic::AtomicU32> {
    seq: C,
}

impl SeqLock {
    /// A lock with no write in progress.
    pub(crate) const fn new() -> SeqLock {
        SeqLock {
            seq: std::sync::atomic::AtomicU32::new(0),
        }
    }
}

impl<C: Counter> SeqLock<C> {
    /// Runs `write` (which stores the protected atomics, `Relaxed`). Only one thread
    /// writes a given lock.
    #[inline]
    pub(crate) fn write(&self, write: impl FnOnce()) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        C::fence(Ordering::Release);
        write();
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// Runs `read` (which loads the protected atomics, `Relaxed`) until it saw no write
    /// in progress, and returns what it read then.
    #[inline]
    pub(crate) fn read<T>(&self, read: impl Fn() -> T) -> T {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                C::spin();
                continue;
            }
            let value = read();
            C::fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 {
                return value;
            }
            C::spin();
        }
    }
}

#[cfg(loom)]
mod loom_model {
    use super::{Counter, SeqLock};
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};

    impl Counter for AtomicU32 {
        fn load(&self, order: Ordering) -> u32 {
            AtomicU32::load(self, order)
        }
        fn store(&self, value: u32, order: Ordering) {
            AtomicU32::store(self, value, order)
        }
        fn fence(order: Ordering) {
            loom::sync::atomic::fence(order)
        }
        fn spin() {
            loom::thread::yield_now()
        }
    }

    struct Protected {
        lock: SeqLock<AtomicU32>,
        a: AtomicU64,
        b: AtomicU64,
    }

    /// A record of two fields written together: a reader never sees them differ (a torn
    /// read), and never sees values from before what it already saw (no going back).
    #[test]
    fn readers_never_see_a_torn_or_older_write() {
        loom::model(|| {
            let p = Arc::new(Protected {
                lock: SeqLock {
                    seq: AtomicU32::new(0),
                },
                a: AtomicU64::new(0),
                b: AtomicU64::new(0),
            });
            let writer = {
                let p = p.clone();
                loom::thread::spawn(move || {
                    for k in 1..=2u64 {
                        p.lock.write(|| {
                            p.a.store(k, Ordering::Relaxed);
                            p.b.store(k * 10, Ordering::Relaxed);
                        });
                    }
                })
            };
            let mut last = 0;
            for _ in 0..2 {
                let (a, b) = p
                    .lock
                    .read(|| (p.a.load(Ordering::Relaxed), p.b.load(Ordering::Relaxed)));
                assert_eq!(b, a * 10, "torn read: a={a} b={b}");
                assert!(a >= last, "went back from {last} to {a}");
                last = a;
            }
            writer.join().unwrap();
        });
    }
}
