//! Scopes opening and closing on 8 threads at once, each making, returning, keeping,
//! leaking and dropping tensors on one shared device (and reading `report_live` while
//! the others run): at the end every tracked tensor still alive is exactly one the
//! threads kept on purpose or leaked into shared storage, each leak was reported by the
//! scope it escaped, and the device's allocator holds exactly their bytes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use gpuscope_runtime::alloc::AllocConfig;
use gpuscope_runtime::backend::host::HostBackend;
use gpuscope_runtime::escape::scoped;
use gpuscope_runtime::scope::{LeakPolicy, ScopeGuard, ScopeOptions, set_tracking};
use gpuscope_runtime::{Device, Tensor, keep, report_live};

const THREADS: usize = 8;

fn rounds() -> usize {
    if cfg!(debug_assertions) { 3000 } else { 30000 }
}

/// One thread's work; returns the tensors it keeps for good (outside every scope).
fn worker(t: usize, dev: &Device, shared: &Mutex<Vec<Tensor>>) -> Vec<Tensor> {
    let mut kept = Vec::new();
    for r in 0..rounds() {
        let outer = ScopeGuard::enter(ScopeOptions::new("outer").leaks(LeakPolicy::Allow));
        let n = 1 + (t * 7 + r) % 13;
        let a = Tensor::zeros(&[n], dev).unwrap();
        let returned = {
            let inner = ScopeGuard::enter(ScopeOptions::new("inner").leaks(LeakPolicy::Warn));
            let tmp = Tensor::ones(&[n, 2], dev).unwrap();
            let out = tmp.sum().unwrap();
            inner.escape(&out);
            drop(tmp);
            if r % 17 == 0 {
                // Leaked on purpose: stored where the scopes cannot see.
                shared
                    .lock()
                    .unwrap()
                    .push(Tensor::zeros(&[3], dev).unwrap());
            }
            out
        };
        if r % 29 == 0 {
            let k = Tensor::full(&[2], t as f32, dev).unwrap();
            keep(&k);
            kept.push(k);
        }
        // An async scope, polled to completion here.
        let fut = scoped(ScopeOptions::new("async"), async {
            Tensor::ones(&[4], dev).unwrap()
        });
        let from_async = block_on(fut);
        drop((a, returned, from_async));
        outer.close();
    }
    kept
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::task::{Context, Poll, Waker};
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

#[test]
fn eight_threads_of_scopes_account_for_every_tensor() {
    set_tracking(true);
    // The leak reports go to a subscriber that drops them (not to stderr).
    let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry());
    let dev = Device::with_backend(Arc::new(HostBackend::new()), AllocConfig::default()).unwrap();
    let shared = Arc::new(Mutex::new(Vec::new()));
    let start = Arc::new(Barrier::new(THREADS + 1));
    let stop = Arc::new(AtomicBool::new(false));
    // A reader that scans the records while the writers run.
    let reader = {
        let (stop, dev) = (stop.clone(), dev.clone());
        std::thread::spawn(move || {
            let mut scans = 0;
            while !stop.load(Ordering::Acquire) {
                for l in report_live() {
                    if l.record.device_id() == dev.id() {
                        // Fields written together are read together: no torn record.
                        let numel: usize = l.record.shape().iter().product();
                        assert_eq!(l.record.bytes(), numel * 4, "{l:?}");
                    }
                }
                scans += 1;
            }
            scans
        })
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (dev, shared, start) = (dev.clone(), shared.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                worker(t, &dev, &shared)
            })
        })
        .collect();
    start.wait();
    let kept: Vec<Tensor> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    stop.store(true, Ordering::Release);
    let scans = reader.join().unwrap();
    assert!(scans > 0);

    let shared = shared.lock().unwrap();
    let leaks_expected = THREADS * (0..rounds()).filter(|r| r % 17 == 0).count();
    let kept_expected = THREADS * (0..rounds()).filter(|r| r % 29 == 0).count();
    assert_eq!((shared.len(), kept.len()), (leaks_expected, kept_expected));

    let live: Vec<_> = report_live()
        .into_iter()
        .filter(|l| l.record.device_id() == dev.id())
        .collect();
    assert_eq!(
        live.len(),
        leaks_expected + kept_expected,
        "tracked tensors still alive: every leak and every kept tensor, nothing else"
    );
    let leaked: Vec<_> = live
        .iter()
        .filter(|l| l.record.leaked_from().is_some())
        .collect();
    assert_eq!(
        leaked.len(),
        leaks_expected,
        "each leak reported by the scope it escaped"
    );
    assert!(
        leaked
            .iter()
            .all(|l| l.record.leaked_from().is_some_and(|s| s.contains("inner")))
    );

    let bytes: usize = shared.iter().chain(&kept).map(Tensor::nbytes).sum();
    let stats = dev.allocator().stats();
    assert_eq!(
        stats.allocation.all.current as usize,
        shared.len() + kept.len()
    );
    assert!(stats.allocated_bytes.all.current as usize >= bytes);
    dev.allocator().check_invariants().unwrap();
    drop(shared);
}
