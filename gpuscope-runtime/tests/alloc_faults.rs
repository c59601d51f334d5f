//! Driver faults, one at a time, over a training step: the `n`-th call of every kind
//! fails, for every `n` the step makes.
//!
//! - A real MLP training step (parameters, a batch uploaded, forward, cross-entropy,
//!   backward, an SGD step, the loss read back, the cache emptied) on the host backend
//!   wrapped in [`FaultyBackend`]: allocations, frees, event creation, records and
//!   queries, synchronisations and copies fail in turn.
//! - The same step's allocations (recorded by the allocator), with a two-stream
//!   data-loader trace appended, replayed on the test backend's virtual memory with
//!   events that complete only when the test says so: allocations, maps, access
//!   changes, unmaps, releases, address reservations and every event call fail in turn.
//!
//! Every failure surfaces as a typed error or is recovered; afterwards the allocator's
//! statistics equal a recount (`check_invariants`), nothing is left allocated or
//! tracked, the device holds exactly what the allocator counts as reserved, and once
//! the faults are gone the cache empties completely and a clean step runs.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use gpuscope_runtime::alloc::{AllocConfig, CachingAllocator, RawBlock};
use gpuscope_runtime::backend::fault::{Call, FaultyBackend};
use gpuscope_runtime::backend::host::HostBackend;
use gpuscope_runtime::backend::test::{EventMode, TestBackend};
use gpuscope_runtime::backend::{Backend, StreamId};
use gpuscope_runtime::optim::{Optimizer, Sgd};
use gpuscope_runtime::scope::{ScopeGuard, ScopeOptions, report_live, set_tracking};
use gpuscope_runtime::tensor::{DType, Generator};
use gpuscope_runtime::trace::{Trace, TraceOp};
use gpuscope_runtime::{Device, Tensor, no_grad};

type Error = Box<dyn std::error::Error>;

/// One training step of a 2-16-16-4 MLP on 8 samples, everything made inside it.
fn training_step(dev: &Device) -> Result<f64, Error> {
    let _scope = ScopeGuard::enter(ScopeOptions::new("faulty_step"));
    let mut g = Generator::new(7);
    let mut params = Vec::new();
    for (fan_in, fan_out) in [(2, 16), (16, 16), (16, 4)] {
        let w = no_grad(|| Tensor::randn_with(&[fan_in, fan_out], DType::F32, &mut g, dev))?;
        params.push(w.set_requires_grad(true));
        params.push(Tensor::full_dtype(&[fan_out], 0.0, DType::F32, dev)?.set_requires_grad(true));
    }
    let mut opt = Sgd::new(params.clone(), 0.05);
    let x = Tensor::from_vec(
        (0..16).map(|i| i as f32 * 0.1).collect::<Vec<f32>>(),
        &[8, 2],
        dev,
    )?;
    let y = Tensor::from_vec((0..8).map(|i| i % 4).collect::<Vec<i64>>(), &[8], dev)?;
    let h = x.matmul(&params[0])?.add(&params[1])?.gelu()?;
    let h = h.matmul(&params[2])?.add(&params[3])?.gelu()?;
    let loss = h.matmul(&params[4])?.add(&params[5])?.cross_entropy(&y)?;
    loss.backward()?;
    opt.step()?;
    opt.zero_grad();
    let value = loss.item()?;
    Ok(value)
}

/// What must hold after a step, failed or not, once its tensors are gone.
fn check_exact(dev: &Device, what: &str) {
    let alloc = dev.allocator();
    alloc
        .check_invariants()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let s = alloc.stats();
    assert_eq!(
        (s.allocation.all.current, s.allocated_bytes.all.current),
        (0, 0),
        "{what}: blocks still allocated"
    );
    assert_eq!(
        s.allocation.all.allocated, s.allocation.all.freed,
        "{what}: allocations and frees counted"
    );
    let mine: Vec<_> = report_live()
        .into_iter()
        .filter(|t| t.record.device_id() == dev.id())
        .collect();
    assert!(
        mine.is_empty(),
        "{what}: tracked tensors still live: {mine:?}"
    );
}

fn faulty_device() -> (Arc<FaultyBackend>, Device) {
    let backend = Arc::new(FaultyBackend::new(Arc::new(HostBackend::new())));
    let config = AllocConfig {
        fence_interval_us: 0,
        ..AllocConfig::default()
    };
    let dev = Device::with_backend(backend.clone(), config).unwrap();
    (backend, dev)
}

#[test]
fn every_call_of_a_training_step_can_fail_on_the_host() {
    set_tracking(true);
    // A clean step, to count its calls by kind.
    let (backend, dev) = faulty_device();
    training_step(&dev).unwrap();
    dev.allocator().empty_cache().unwrap();
    let counts = backend.calls();
    assert!(
        counts[&Call::Allocate] > 0 && counts[&Call::Copy] > 0,
        "{counts:?}"
    );
    let mut runs = 0;
    let mut failed_steps = 0;
    for (&kind, &n) in &counts {
        for nth in 1..=n {
            let (backend, dev) = faulty_device();
            backend.fail_call(kind, nth);
            let step = training_step(&dev);
            let emptied = dev.allocator().empty_cache();
            assert_eq!(
                backend.faults_injected(),
                1,
                "{kind:?} #{nth} was not injected"
            );
            if step.is_err() || emptied.is_err() {
                failed_steps += 1;
            }
            let what = format!("{kind:?} call #{nth} failing ({step:?}, {emptied:?})");
            check_exact(&dev, &what);
            // Recovered: a clean step runs and everything goes back.
            training_step(&dev).unwrap_or_else(|e| panic!("{what}: the next step failed: {e}"));
            dev.allocator().empty_cache().unwrap();
            check_exact(&dev, &format!("{what}, then a clean step"));
            assert_eq!(
                dev.allocator().stats().reserved_bytes.all.current,
                0,
                "{what}"
            );
            runs += 1;
        }
    }
    assert!(failed_steps > 0, "no fault made a step fail");
    eprintln!(
        "{runs} faulty steps on the host ({failed_steps} failed with a typed error, the rest recovered)"
    );
}

/// The allocator operations of one training step, recorded on the host, then a
/// two-stream data loader's (the first 400 operations of the corpus trace).
fn step_trace() -> Vec<TraceOp> {
    let (_, dev) = faulty_device();
    dev.allocator().start_recording();
    training_step(&dev).unwrap();
    let mut ops = dev.allocator().stop_recording().ops().to_vec();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/traces/side_stream_loader_train.csv");
    let loader = Trace::read(&path).unwrap();
    let offset = 1 << 40;
    for op in loader.ops().iter().take(400) {
        ops.push(match *op {
            TraceOp::Alloc { id, size, stream } => TraceOp::Alloc {
                id: id + offset,
                size,
                stream,
            },
            TraceOp::Free { id } => TraceOp::Free { id: id + offset },
            TraceOp::RecordStream { id, stream } => TraceOp::RecordStream {
                id: id + offset,
                stream,
            },
        });
    }
    ops
}

/// Runs `ops` twice (a cold and a warm pass) with fences and work completing now and
/// then, then empties the cache. Allocation errors skip the block; every error must be
/// typed. Returns how many calls failed.
fn vm_step(
    alloc: &CachingAllocator,
    dev: &TestBackend,
    streams: &[StreamId; 2],
    ops: &[TraceOp],
) -> usize {
    let mut errors = 0;
    for _pass in 0..2 {
        // Ordered: the frees at the end run in the same order in every run, so the
        // driver calls they make (polls of other streams) are counted alike.
        let mut live: BTreeMap<u64, RawBlock> = BTreeMap::new();
        for (i, op) in ops.iter().enumerate() {
            let result = match *op {
                TraceOp::Alloc { id, size, stream } => {
                    alloc.allocate(size, streams[stream as usize % 2]).map(|b| {
                        live.insert(id, b);
                    })
                }
                TraceOp::Free { id } => match live.remove(&id) {
                    Some(b) => alloc.free(b),
                    None => Ok(()),
                },
                TraceOp::RecordStream { id, stream } => match live.get(&id) {
                    Some(b) => alloc.record_stream(b, streams[stream as usize % 2]),
                    None => Ok(()),
                },
            };
            errors += result.is_err() as usize;
            if i % 50 == 49 {
                for s in streams {
                    errors += alloc.record_fence(*s).is_err() as usize;
                    dev.complete_stream(*s);
                }
            }
        }
        for (_, b) in std::mem::take(&mut live) {
            errors += alloc.free(b).is_err() as usize;
        }
        errors += alloc.empty_cache().is_err() as usize;
    }
    errors
}

fn vm_device() -> (Arc<TestBackend>, CachingAllocator, [StreamId; 2]) {
    let dev = Arc::new(
        TestBackend::builder()
            .virtual_memory(2 << 20)
            .capacity(4 << 30)
            .event_mode(EventMode::Manual)
            .build(),
    );
    let config = AllocConfig {
        fence_interval_us: 0,
        ..AllocConfig::default()
    };
    let alloc = CachingAllocator::new(dev.clone(), config).unwrap();
    let streams = [StreamId::DEFAULT, dev.create_stream().unwrap()];
    (dev, alloc, streams)
}

#[test]
fn every_driver_call_of_a_step_can_fail_on_virtual_memory() {
    set_tracking(true);
    let ops = step_trace();
    let (dev, alloc, streams) = vm_device();
    assert_eq!(
        vm_step(&alloc, &dev, &streams, &ops),
        0,
        "a clean run failed"
    );
    let counts = dev.calls();
    for kind in [
        Call::Allocate,
        Call::Map,
        Call::SetAccess,
        Call::Unmap,
        Call::Free,
        Call::RecordEvent,
        Call::QueryEvent,
    ] {
        assert!(
            counts.get(&kind).copied().unwrap_or(0) > 0,
            "{kind:?} never called: {counts:?}"
        );
    }
    let mut runs = 0;
    for (&kind, &n) in &counts {
        for nth in 1..=n {
            let (dev, alloc, streams) = vm_device();
            dev.fail_call(kind, nth);
            let errors = vm_step(&alloc, &dev, &streams, &ops);
            let what = format!("{kind:?} call #{nth} failing ({errors} errors)");
            assert_eq!(dev.faults_injected(), 1, "{what}: not injected");
            alloc
                .check_invariants()
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let s = alloc.stats();
            assert_eq!(s.allocated_bytes.all.current, 0, "{what}");
            assert_eq!(
                dev.used(),
                s.reserved_bytes.all.current as usize,
                "{what}: the device holds what the allocator counts as reserved"
            );
            // The fault is gone: everything goes back, nothing was lost.
            for st in streams {
                dev.complete_stream(st);
            }
            alloc
                .empty_cache()
                .unwrap_or_else(|e| panic!("{what}: empty_cache after the fault: {e}"));
            alloc.check_invariants().unwrap();
            assert_eq!(alloc.stats().reserved_bytes.all.current, 0, "{what}");
            assert_eq!(
                (dev.used(), dev.live_allocations()),
                (0, 0),
                "{what}: device memory lost"
            );
            assert_eq!(alloc.orphan_bytes(), 0, "{what}");
            // And a clean step runs.
            assert_eq!(
                vm_step(&alloc, &dev, &streams, &ops),
                0,
                "{what}: the next step failed"
            );
            runs += 1;
        }
    }
    eprintln!("{runs} faulty steps on virtual memory");
}

/// Allocates 4 MiB on `a`, uses it on `b` (work still queued there) and frees it (no
/// driver call: the next allocation's poll asks `b`); that poll then meets the event
/// record, the stream synchronisation that replaces it and the record's retry all
/// failing. Returns the block's address and the error of that allocation.
fn free_with_double_fault(
    dev: &TestBackend,
    alloc: &CachingAllocator,
    a: StreamId,
    b: StreamId,
) -> (
    gpuscope_runtime::backend::DeviceAddr,
    gpuscope_runtime::alloc::AllocError,
) {
    let x = alloc.allocate(4 << 20, a).unwrap();
    alloc.record_stream(&x, b).unwrap();
    dev.launch(b, x.addr(), x.size()).unwrap();
    let addr = x.addr();
    alloc.free(x).unwrap();
    dev.fail_call(Call::RecordEvent, 1);
    dev.fail_call(Call::RecordEvent, 2);
    dev.fail_call(Call::SyncStream, 1);
    (addr, alloc.allocate(1 << 20, a).unwrap_err())
}

/// A free after `record_stream` whose event cannot be recorded and whose stream cannot
/// be synchronised either (two faults at once, then the retry failing too): the poll
/// that met them reports the error, the block keeps waiting for the other stream (its
/// memory is not reused while that stream's work may still read it), a later poll
/// records the event once the driver recovers, and the block comes back when the
/// stream's work completes.
#[test]
fn a_free_that_can_neither_record_nor_synchronise_keeps_waiting() {
    let (dev, alloc, [a, b]) = vm_device();
    let (x_addr, err) = free_with_double_fault(&dev, &alloc, a, b);
    assert!(err.to_string().contains("injected fault"), "{err}");
    assert_eq!(dev.faults_injected(), 3);
    alloc.check_invariants().unwrap();
    let s = alloc.stats();
    assert_eq!(s.allocated_bytes.all.current, 0, "the free is counted");
    assert_eq!(s.active_bytes.all.current, 4 << 20, "the block still waits");

    // Stream `b` has not finished: the memory is not handed out again.
    let y = alloc.allocate(4 << 20, a).unwrap();
    assert_ne!(y.addr(), x_addr, "reused while stream b may still use it");
    alloc.free(y).unwrap();
    // That allocation's poll recorded the event; `b` completes; the block comes back.
    dev.complete_stream(b);
    let z = alloc.allocate(4 << 20, a).unwrap();
    alloc.free(z).unwrap();
    alloc.check_invariants().unwrap();
    assert_eq!(
        alloc.stats().active_bytes.all.current,
        0,
        "the block never came back"
    );
    alloc.empty_cache().unwrap();
    assert_eq!(
        (dev.used(), alloc.stats().reserved_bytes.all.current),
        (0, 0)
    );
}

/// The same double fault with the driver still failing when the cache is emptied:
/// `empty_cache` synchronises the stream instead, or reports the error and keeps the
/// block, and succeeds once the faults are gone.
#[test]
fn empty_cache_waits_for_a_free_that_got_no_event() {
    let (dev, alloc, [a, b]) = vm_device();
    free_with_double_fault(&dev, &alloc, a, b);
    dev.fail_call(Call::SyncStream, 1);
    alloc.empty_cache().unwrap_err();
    alloc.check_invariants().unwrap();
    assert_eq!(alloc.stats().active_bytes.all.current, 4 << 20);
    alloc.empty_cache().unwrap();
    alloc.check_invariants().unwrap();
    assert_eq!(
        (alloc.stats().active_bytes.all.current, dev.used()),
        (0, 0),
        "the block or its memory was lost"
    );
}

/// Every event record of the two-stream step failing together with the stream
/// synchronisation that replaces it: nothing is lost and the cache empties once the
/// faults are gone.
#[test]
fn every_event_record_can_fail_with_its_fallback() {
    set_tracking(true);
    let ops = step_trace();
    let (dev, alloc, streams) = vm_device();
    vm_step(&alloc, &dev, &streams, &ops);
    let records = dev.calls()[&Call::RecordEvent];
    assert!(records > 0);
    for nth in 1..=records {
        let (dev, alloc, streams) = vm_device();
        dev.fail_call(Call::RecordEvent, nth);
        dev.fail_call(Call::SyncStream, 1);
        dev.fail_call(Call::SyncStream, 2);
        let errors = vm_step(&alloc, &dev, &streams, &ops);
        let what = format!("RecordEvent call #{nth} and its fallback failing ({errors} errors)");
        alloc
            .check_invariants()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        dev.clear_faults();
        for st in streams {
            dev.complete_stream(st);
        }
        alloc
            .empty_cache()
            .unwrap_or_else(|e| panic!("{what}: empty_cache after the faults: {e}"));
        alloc.check_invariants().unwrap();
        let s = alloc.stats();
        assert_eq!(
            (s.active_bytes.all.current, s.reserved_bytes.all.current),
            (0, 0),
            "{what}"
        );
        assert_eq!((dev.used(), dev.live_allocations()), (0, 0), "{what}");
    }
}
