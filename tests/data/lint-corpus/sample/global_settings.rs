//! False-alarm shape: statics of configuration, caches of file paths, `Option`s of settings,
//! random-number state, a scoped stack released by a guard: none holds device memory.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

pub struct EngineSettings {
    pub max_batch: usize,
    pub dtype: String,
}

pub struct TensorParallelSession {
    pub ids: Vec<u64>,
    pub next_model_index: usize,
}

static SETTINGS: OnceLock<Mutex<EngineSettings>> = OnceLock::new();
static SEEN_FILES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static IMMEDIATE_ISQ: Mutex<Option<EngineSettings>> = Mutex::new(None);
static SEED: Mutex<Option<rand::rngs::StdRng>> = Mutex::new(None);
static TP_SESSION: OnceLock<Mutex<TensorParallelSession>> = OnceLock::new();

thread_local! {
    static ACTIVE_ADAPTERS: RefCell<Vec<Arc<Adapter>>> = const { RefCell::new(Vec::new()) };
}

pub fn configure(settings: EngineSettings, path: PathBuf, ids: Vec<u64>) {
    let _ = SETTINGS.set(Mutex::new(settings));
    SEEN_FILES.lock().unwrap().push(path);
    let _ = TP_SESSION.set(Mutex::new(TensorParallelSession { ids, next_model_index: 0 }));
}

pub fn set_isq(settings: Option<EngineSettings>) {
    *IMMEDIATE_ISQ.lock().unwrap() = settings;
}

pub fn seed(seed: u64) {
    let rng = rand::SeedableRng::seed_from_u64(seed);
    *SEED.lock().unwrap() = Some(rng);
}

pub struct Adapter {
    pub weights: candle_core::Tensor,
}

struct AdapterGuard {
    count: usize,
}

impl Drop for AdapterGuard {
    fn drop(&mut self) {
        ACTIVE_ADAPTERS.with(|stack| {
            let mut stack = stack.borrow_mut();
            let keep = stack.len() - self.count;
            stack.truncate(keep);
        });
    }
}

pub fn with_adapter<T>(adapter: Arc<Adapter>, f: impl FnOnce() -> T) -> T {
    ACTIVE_ADAPTERS.with(|stack| stack.borrow_mut().push(adapter));
    let _guard = AdapterGuard { count: 1 };
    f()
}
