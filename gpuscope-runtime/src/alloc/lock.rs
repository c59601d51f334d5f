//! The allocator's lock: a flag taken with one compare-and-swap and given back with a
//! plain release store.
//!
//! Every `allocate` and `free` takes the allocator's lock once. Uncontended, a
//! `std::sync::Mutex` costs two atomic read-modify-writes: the compare-and-swap that
//! takes it and the swap that gives it back (the swap says whether a sleeper must be
//! woken). On the GPTQ trace's warm passes those two instructions were a fifth of the
//! time of an operation, and this lock, whose release is an ordinary store, made warm
//! passes 0.82-0.92x as long (BENCHMARKS.md, "A twenty-second corpus, held out").
//!
//! The price is that a waiting thread never sleeps on the lock itself: it spins briefly,
//! then yields, then sleeps in short naps ([`Flag::pause`]), so a thread that holds the
//! lock through a long driver call (a stream synchronisation under memory pressure)
//! costs the waiters wake-ups rather than a futex wait. The allocator's critical sections
//! are short on every path but growth and the out-of-memory path.
//!
//! A panic while the lock is held gives it back (the guard is dropped while unwinding)
//! and does not poison it: allocator code does not panic midway through a change to the
//! state, so a panic comes from elsewhere on the thread and the state is consistent, as
//! the allocator assumed of `std::sync::Mutex`'s poisoning before.
//!
//! Model check: `RUSTFLAGS="--cfg loom" cargo test -p gpuscope-runtime --release --lib
//! alloc::lock` explores every interleaving of threads taking the lock (the test below
//! runs only under `cfg(loom)`).

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

/// The flag's atomic operations (std's in the crate, loom's in the model check).
pub(crate) trait Flag {
    /// A flag not taken.
    fn free() -> Self;
    /// Takes the flag if it is not taken (`Acquire` on success).
    fn try_take(&self) -> bool;
    /// Whether the flag looks taken (`Relaxed`: a hint for waiting).
    fn looks_taken(&self) -> bool;
    /// Gives the flag back (`Release`).
    fn give_back(&self);
    /// Waits a little, the `round`-th time in a row: spins, then yields, then naps.
    fn pause(round: u32);
}

impl Flag for AtomicBool {
    #[inline]
    fn free() -> Self {
        AtomicBool::new(false)
    }
    #[inline]
    fn try_take(&self) -> bool {
        self.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }
    #[inline]
    fn looks_taken(&self) -> bool {
        self.load(Ordering::Relaxed)
    }
    #[inline]
    fn give_back(&self) {
        self.store(false, Ordering::Release)
    }
    #[cold]
    fn pause(round: u32) {
        if round < 64 {
            std::hint::spin_loop();
        } else if round < 256 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
    }
}

/// A value behind the lock.
pub(super) struct StateLock<T, F: Flag = AtomicBool> {
    taken: F,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and a guard exists only while its
// thread holds the flag (taken with `Acquire`, given back with `Release`), so one thread
// at a time reaches it, and each sees the writes of the one before.
unsafe impl<T: Send, F: Flag + Sync> Sync for StateLock<T, F> {}

impl<T, F: Flag> StateLock<T, F> {
    pub(super) fn new(value: T) -> Self {
        StateLock {
            taken: F::free(),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, waiting while another thread holds it.
    #[inline]
    pub(super) fn lock(&self) -> StateGuard<'_, T, F> {
        if !self.taken.try_take() {
            self.wait_and_take();
        }
        StateGuard {
            lock: self,
            _value: PhantomData,
        }
    }

    #[cold]
    fn wait_and_take(&self) {
        let mut round = 0;
        loop {
            while self.taken.looks_taken() {
                F::pause(round);
                round = round.saturating_add(1);
            }
            if self.taken.try_take() {
                return;
            }
        }
    }

    /// The value, without locking: `&mut self` means no other thread can hold the lock.
    pub(super) fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

/// The lock, held until the guard is dropped. Shared between threads only where `T` is
/// `Sync` (the `&'a mut T` marker), as a `MutexGuard` is: a shared guard gives out `&T`.
pub(super) struct StateGuard<'a, T, F: Flag = AtomicBool> {
    lock: &'a StateLock<T, F>,
    _value: PhantomData<&'a mut T>,
}

impl<T, F: Flag> Deref for StateGuard<'_, T, F> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard's thread holds the flag (see `StateLock`'s `Sync`).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T, F: Flag> DerefMut for StateGuard<'_, T, F> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference through it.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T, F: Flag> Drop for StateGuard<'_, T, F> {
    #[inline]
    fn drop(&mut self) {
        self.lock.taken.give_back();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::StateLock;
    use std::sync::{Arc, Barrier};

    /// Four threads, started together, add to one counter through the lock with a pause
    /// between the read and the write (a lost update shows as a total short of 4 x
    /// 50,000; with a lock that lets every thread in, the total falls short).
    #[test]
    fn threads_never_lose_an_update() {
        const THREADS: usize = 4;
        const ADDS: u64 = 50_000;
        let lock = Arc::new(StateLock::<u64>::new(0));
        let start = Arc::new(Barrier::new(THREADS));
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                let (lock, start) = (lock.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    for _ in 0..ADDS {
                        let mut g = lock.lock();
                        let seen = *g;
                        for _ in 0..8 {
                            std::hint::spin_loop();
                        }
                        *g = std::hint::black_box(seen) + 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*lock.lock(), THREADS as u64 * ADDS);
    }

    /// A panic while the lock is held gives it back, and the value stays usable.
    #[test]
    fn a_panic_gives_the_lock_back() {
        let lock = Arc::new(StateLock::<Vec<u32>>::new(vec![1]));
        let l = lock.clone();
        let result = std::thread::spawn(move || {
            let mut g = l.lock();
            g.push(2);
            panic!("on purpose");
        })
        .join();
        assert!(result.is_err());
        assert_eq!(*lock.lock(), vec![1, 2]);
    }

    /// A thread that holds the lock for a long time (as through a stream
    /// synchronisation) does not stop another from getting it afterwards.
    #[test]
    fn a_long_hold_then_the_waiter_gets_it() {
        let lock = Arc::new(StateLock::<u32>::new(0));
        let g = lock.lock();
        let l = lock.clone();
        let waiter = std::thread::spawn(move || {
            *l.lock() += 1;
        });
        std::thread::sleep(std::time::Duration::from_millis(20));
        drop(g);
        waiter.join().unwrap();
        assert_eq!(*lock.lock(), 1);
    }
}

#[cfg(loom)]
mod loom_model {
    use super::{Flag, StateLock};
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicBool, Ordering};

    impl Flag for AtomicBool {
        fn free() -> Self {
            AtomicBool::new(false)
        }
        fn try_take(&self) -> bool {
            self.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        }
        fn looks_taken(&self) -> bool {
            self.load(Ordering::Relaxed)
        }
        fn give_back(&self) {
            self.store(false, Ordering::Release)
        }
        fn pause(_round: u32) {
            loom::thread::yield_now()
        }
    }

    /// A thread makes a read-then-write update under the lock, the main one two,
    /// of two values read and written `Relaxed` (so only the lock's `Acquire` and
    /// `Release` make one thread's writes visible to the next): in every interleaving
    /// none is lost and the two never disagree.
    #[test]
    fn no_update_is_lost_in_any_interleaving() {
        use loom::sync::atomic::AtomicU32;
        fn update(lock: &StateLock<(AtomicU32, AtomicU32), AtomicBool>) {
            let g = lock.lock();
            let (a, b) = (g.0.load(Ordering::Relaxed), g.1.load(Ordering::Relaxed));
            assert_eq!(b, a * 10, "a torn or stale read");
            g.0.store(a + 1, Ordering::Relaxed);
            g.1.store(b + 10, Ordering::Relaxed);
        }
        // A waiter loops until the holder runs again: bound the preemptions, as loom's
        // documentation advises for spin locks, so that the search ends.
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(3);
        model.max_branches = 100_000;
        model.check(|| {
            let lock = Arc::new(StateLock::<_, AtomicBool>::new((
                AtomicU32::new(0),
                AtomicU32::new(0),
            )));
            let other = {
                let lock = lock.clone();
                loom::thread::spawn(move || update(&lock))
            };
            update(&lock);
            update(&lock);
            other.join().unwrap();
            let g = lock.lock();
            assert_eq!(
                (g.0.load(Ordering::Relaxed), g.1.load(Ordering::Relaxed)),
                (3, 30)
            );
        });
    }
}
