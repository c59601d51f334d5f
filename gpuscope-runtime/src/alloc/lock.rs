//! The allocator's lock: a flag taken with one compare-and-swap and given back with a
//! plain release store, and a waiting room that lets one waiter at a time wait on it.
//!
//! Every `allocate` and `free` takes the allocator's lock once. Uncontended, a
//! `std::sync::Mutex` costs two atomic read-modify-writes: the compare-and-swap that
//! takes it and the swap that gives it back (the swap says whether a sleeper must be
//! woken). On the GPTQ trace's warm passes those two instructions were a fifth of the
//! time of an operation, and this lock, whose release is an ordinary store, made warm
//! passes 0.82-0.92x as long (BENCHMARKS.md, "A twenty-second corpus, held out").
//!
//! A release that is a plain store cannot tell whether anyone waits, so it cannot wake a
//! sleeper. Waiting is therefore split in two:
//! - **The waiting room**, a `std::sync::Mutex<()>`: a thread that finds the flag taken
//!   first enters the room, so all but one waiter sleep in the room's queue (a futex)
//!   and are woken one at a time as each leaves.
//! - **The one waiter in the room** watches the flag: it spins, then yields, then
//!   sleeps in short naps ([`Flag::pause`]), and takes the flag. It leaves the room when
//!   it gives the lock back, so that waking the next waiter (a system call) is no part
//!   of the time the lock is held.
//!
//! Without the room every waiter napped and a napping one found the flag free only by
//! luck: with 16 threads calling the allocator without pause (the `lock_contention`
//! example on an H100's host), the slowest 0.1% of calls took 1.6-2.2 ms and the slowest
//! 20-30 ms, against 0.14-0.20 ms and 2-7 ms behind a `std::sync::Mutex`. With the room
//! they take 0.28 ms and 2.6 ms (the mutex 0.23 and 1.8 in the same run), and the calls
//! still take 0.7-0.9x the mutex's time from 4 threads up (BENCHMARKS.md, "The
//! allocator's lock under contention"). A thread that holds the lock through a long
//! driver call (a stream synchronisation under memory pressure) costs the one waiter in
//! the room its naps, and it may see up to a nap's length of extra latency after it.
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

/// The flag's atomic operations and the waiting room (std's in the crate, loom's in the
/// model check).
pub(crate) trait Flag {
    /// The waiting room: at most one thread inside.
    type Room: Default;
    /// Being inside the room: leaving it when dropped.
    type Inside<'a>
    where
        Self: 'a;
    /// Enters the room, sleeping while another thread is inside.
    fn enter(room: &Self::Room) -> Self::Inside<'_>;
    /// A flag not taken.
    fn free() -> Self;
    /// Takes the flag if it is not taken (`Acquire` on success).
    fn try_take(&self) -> bool;
    /// Whether the flag looks taken (`Relaxed`: a hint for waiting).
    fn looks_taken(&self) -> bool;
    /// Gives the flag back (`Release`).
    fn give_back(&self);
    /// Waits a little, the `round`-th time in a row: spins, then yields, then naps
    /// (only the one thread in the room calls it, so spinning costs one core at most).
    fn pause(round: u32);
}

impl Flag for AtomicBool {
    type Room = std::sync::Mutex<()>;
    type Inside<'a> = std::sync::MutexGuard<'a, ()>;
    #[cold]
    fn enter(room: &Self::Room) -> Self::Inside<'_> {
        // Nothing in the room can panic; were the room poisoned, it is still empty.
        room.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
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
        if round < 1024 {
            std::hint::spin_loop();
        } else if round < 2048 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
    }
}

/// A value behind the lock.
pub(super) struct StateLock<T, F: Flag = AtomicBool> {
    taken: F,
    room: F::Room,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and a guard exists only while its
// thread holds the flag (taken with `Acquire`, given back with `Release`), so one thread
// at a time reaches it, and each sees the writes of the one before. The room is shared
// as it is (`F::Room: Sync`).
unsafe impl<T: Send, F: Flag + Sync> Sync for StateLock<T, F> where F::Room: Sync {}

impl<T, F: Flag> StateLock<T, F> {
    pub(super) fn new(value: T) -> Self {
        StateLock {
            taken: F::free(),
            room: F::Room::default(),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, waiting while another thread holds it.
    #[inline]
    pub(super) fn lock(&self) -> StateGuard<'_, T, F> {
        let inside = if self.taken.try_take() {
            None
        } else {
            Some(self.wait_and_take())
        };
        StateGuard {
            lock: self,
            _inside: inside,
            _value: PhantomData,
        }
    }

    /// Waits in the room, then alone for the flag. The room is left only when the lock
    /// is given back: waking the next waiter (a system call) is then no part of the time
    /// the lock is held, and threads that find the lock taken meanwhile sleep.
    #[cold]
    fn wait_and_take(&self) -> F::Inside<'_> {
        let inside = F::enter(&self.room);
        let mut round = 0;
        loop {
            while self.taken.looks_taken() {
                F::pause(round);
                round = round.saturating_add(1);
            }
            if self.taken.try_take() {
                return inside;
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
    /// The room, where the lock was taken after waiting: left after the flag is given
    /// back (fields drop after `drop`).
    _inside: Option<F::Inside<'a>>,
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
    use super::{Flag, StateLock};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    /// Four threads, started together, add to one counter through the lock with a pause
    /// between the read and the write (a lost update shows as a total short of 4 x
    /// 50,000; with a lock that lets every thread in, the total falls short).
    #[test]
    fn threads_never_lose_an_update() {
        const ADDS: u64 = 50_000;
        let lock = StateLock::<u64>::new(0);
        let total = in_turn(lock, 4, ADDS, |g| {
            let seen = *g;
            for _ in 0..8 {
                std::hint::spin_loop();
            }
            *g = std::hint::black_box(seen) + 1;
        });
        assert_eq!(total, 4 * ADDS);
    }

    /// `threads` threads, started together, each take `lock` `holds` times and run
    /// `hold` on the value while holding it; the value at the end.
    fn in_turn<F: Flag + Send + Sync + 'static>(
        lock: StateLock<u64, F>,
        threads: usize,
        holds: u64,
        hold: fn(&mut u64),
    ) -> u64
    where
        F::Room: Send + Sync,
    {
        let lock = Arc::new(lock);
        let start = Arc::new(Barrier::new(threads));
        let threads: Vec<_> = (0..threads)
            .map(|_| {
                let (lock, start) = (lock.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    for _ in 0..holds {
                        hold(&mut lock.lock());
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        *lock.lock()
    }

    /// A flag (std's atomic and room) that counts the threads waiting on it at once.
    struct CountingFlag(AtomicBool);
    static PAUSING: AtomicUsize = AtomicUsize::new(0);
    static MOST_PAUSING: AtomicUsize = AtomicUsize::new(0);

    impl Flag for CountingFlag {
        type Room = <AtomicBool as Flag>::Room;
        type Inside<'a> = <AtomicBool as Flag>::Inside<'a>;
        fn enter(room: &Self::Room) -> Self::Inside<'_> {
            <AtomicBool as Flag>::enter(room)
        }
        fn free() -> Self {
            CountingFlag(AtomicBool::free())
        }
        fn try_take(&self) -> bool {
            self.0.try_take()
        }
        fn looks_taken(&self) -> bool {
            self.0.looks_taken()
        }
        fn give_back(&self) {
            self.0.give_back()
        }
        fn pause(round: u32) {
            let now = PAUSING.fetch_add(1, Ordering::SeqCst) + 1;
            MOST_PAUSING.fetch_max(now, Ordering::SeqCst);
            for _ in 0..32 {
                std::hint::spin_loop();
            }
            <AtomicBool as Flag>::pause(round.min(63));
            PAUSING.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Four threads hold the lock in turn, each long enough for the others to wait: only
    /// one of them at a time waits on the flag (the others sleep in the room), and none
    /// loses an update. Without the room all three waiters pause at once.
    #[test]
    fn one_waiter_at_a_time_waits_on_the_flag() {
        const HOLDS: u64 = 2_000;
        let lock = StateLock::<u64, CountingFlag>::new(0);
        let total = in_turn(lock, 4, HOLDS, |g| {
            for _ in 0..200 {
                std::hint::spin_loop();
            }
            *g += 1;
        });
        assert_eq!(total, 4 * HOLDS);
        assert!(
            PAUSING.load(Ordering::SeqCst) == 0 && MOST_PAUSING.load(Ordering::SeqCst) == 1,
            "{} threads waited on the flag at once",
            MOST_PAUSING.load(Ordering::SeqCst)
        );
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
        type Room = loom::sync::Mutex<()>;
        type Inside<'a> = loom::sync::MutexGuard<'a, ()>;
        fn enter(room: &Self::Room) -> Self::Inside<'_> {
            room.lock().unwrap()
        }
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
