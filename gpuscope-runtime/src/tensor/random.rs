//! Random numbers for `rand`/`randn`: a seedable generator (ChaCha8, from `rand_chacha`),
//! one per thread by default, reseeded for the whole process with [`manual_seed`].

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

/// A seedable random generator.
///
/// ```
/// use gpuscope_runtime::tensor::Generator;
/// let mut a = Generator::new(7);
/// let mut b = Generator::new(7);
/// assert_eq!(a.uniform(), b.uniform());
/// ```
#[derive(Clone, Debug)]
pub struct Generator(ChaCha8Rng);

impl Generator {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Generator {
        Generator(ChaCha8Rng::seed_from_u64(seed))
    }

    /// Uniform in `[0, 1)`.
    pub fn uniform(&mut self) -> f64 {
        self.0.random::<f64>()
    }

    /// Standard normal.
    pub fn normal(&mut self) -> f64 {
        self.0.sample(StandardNormal)
    }
}

static SEED: AtomicU64 = AtomicU64::new(0x5eed_9b5c_09e5_u64);
static EPOCH: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static DEFAULT: RefCell<(u64, Generator)> = RefCell::new((u64::MAX, Generator::new(0)));
}

/// Seeds the default generator of every thread (each thread's stream is derived from
/// the seed and the order in which threads first draw).
pub fn manual_seed(seed: u64) {
    SEED.store(seed, Ordering::SeqCst);
    EPOCH.fetch_add(1, Ordering::SeqCst);
}

/// Runs `f` with this thread's default generator.
pub(crate) fn with_default<R>(f: impl FnOnce(&mut Generator) -> R) -> R {
    DEFAULT.with(|cell| {
        let mut slot = cell.borrow_mut();
        let epoch = EPOCH.load(Ordering::SeqCst);
        if slot.0 != epoch {
            *slot = (epoch, Generator::new(SEED.load(Ordering::SeqCst)));
        }
        f(&mut slot.1)
    })
}
