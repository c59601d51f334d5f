//! Scopes and streams, and where tracking records live:
//!
//! - a scope records a fence on every stream its tensors used, when it exits, so memory
//!   its tensors gave back reaches another stream once that fence completes, without
//!   synchronising the stream (and not before: with the fence outstanding, the other
//!   stream waits for the fence, not for later work);
//! - `report_live` sees tensors of threads that ended, names the open scope holding a
//!   live tensor, and records are reused once their tensors are gone.
//!
//! The test backend's events complete only when the test says so (`EventMode::Manual`),
//! and `TestBackend::launch` queues pretend work on memory: the backend panics if the
//! allocator gives away memory that work still in flight uses.

use std::sync::{Arc, Mutex, MutexGuard};

use gpuscope_runtime::backend::test::{EventMode, TestBackend};
use gpuscope_runtime::backend::{Backend, StreamId};
use gpuscope_runtime::scope::{LeakPolicy, ScopeGuard, ScopeOptions, report_live, set_tracking};
use gpuscope_runtime::tensor::DType;
use gpuscope_runtime::{Device, Tensor};

const MIB: usize = 1 << 20;

/// Tracking is a process-wide switch that some tests turn off: they run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A device with virtual memory, a cap of `cap_mib`, manual events, and a second stream,
/// each stream with pools of its own (the default): memory reaches the other stream by
/// going back to the device and being mapped again (with shared pools, it is taken as
/// it is: `shared_pools_hand_a_finished_step_s_memory_to_the_other_stream_as_it_is`).
fn device(cap_mib: usize) -> (Arc<TestBackend>, Device, StreamId) {
    device_with(&format!("memory_limit_mb:{cap_mib}"))
}

/// The same with the allocator configuration `conf`.
fn device_with(conf: &str) -> (Arc<TestBackend>, Device, StreamId) {
    let backend = Arc::new(
        TestBackend::builder()
            .virtual_memory(2 * MIB)
            .event_mode(EventMode::Manual)
            .build(),
    );
    let mut conf: gpuscope_runtime::alloc::AllocConfig = conf.parse().expect("config");
    // A fence at every scope exit (the default allows one a millisecond per stream).
    conf.fence_interval_us = 0;
    let dev = Device::with_backend(backend.clone(), conf).expect("device");
    let side = backend.create_stream().expect("stream");
    (backend, dev, side)
}

/// A tensor of `mib` MiB on `stream`, with pretend work queued on it there.
fn used(backend: &TestBackend, dev: &Device, mib: usize, stream: StreamId) -> Tensor {
    let t = Tensor::empty_on(&[mib * MIB / 4], DType::F32, dev, stream).expect("alloc");
    backend.launch(stream, t.addr(), mib * MIB).expect("launch");
    t
}

/// One step on the default stream that makes and drops 8 MiB, in a scope when
/// `scoped`.
fn step(backend: &TestBackend, dev: &Device, scoped: bool) {
    let scope =
        scoped.then(|| ScopeGuard::enter(ScopeOptions::new("step").leaks(LeakPolicy::Deny)));
    let t = used(backend, dev, 8, StreamId::DEFAULT);
    drop(t);
    drop(scope);
}

#[test]
fn memory_a_scope_gave_back_reaches_another_stream_after_its_fence_without_a_stream_sync() {
    let _serial = serial();
    set_tracking(true);
    let (backend, dev, side) = device(8);
    step(&backend, &dev, true);
    assert_eq!(
        dev.allocator().stats().num_fences,
        1,
        "the scope fenced its stream"
    );
    backend.complete_stream(StreamId::DEFAULT); // the step's work is done
    // The cap leaves no room to grow: the side stream takes the pages the step freed.
    let syncs = backend.counters().stream_syncs;
    let t = used(&backend, &dev, 8, side);
    let s = dev.allocator().stats();
    assert_eq!(
        backend.counters().stream_syncs,
        syncs,
        "no stream was synchronised"
    );
    assert_eq!((s.num_fence_waits, s.num_stream_syncs), (0, 0));
    assert!(s.num_device_unmap > 0, "pages moved between the streams");
    drop(t);
    dev.allocator().check_invariants().expect("invariants");
}

#[test]
fn shared_pools_hand_a_finished_step_s_memory_to_the_other_stream_as_it_is() {
    let _serial = serial();
    set_tracking(true);
    let (backend, dev, side) = device_with("memory_limit_mb:8,share_across_streams:True");
    step(&backend, &dev, true);
    // The step's work still runs: the side stream may not have its memory, and the cap
    // leaves no room for more, so it waits for the scope's fence (not the stream).
    let t = used(&backend, &dev, 4, side);
    let s = dev.allocator().stats();
    assert_eq!((s.num_fence_waits, s.num_stream_syncs), (1, 0));
    drop(t);
    backend.complete_stream(side);
    // Another step; once its work is done, one query finds the default stream idle and
    // the side stream takes the memory the step freed as it is: nothing unmapped,
    // mapped or waited for.
    step(&backend, &dev, true);
    backend.complete_stream(StreamId::DEFAULT);
    let before = dev.allocator().stats();
    let t = used(&backend, &dev, 8, side);
    let s = dev.allocator().stats();
    assert_eq!(
        (
            s.num_device_unmap - before.num_device_unmap,
            s.num_device_map - before.num_device_map,
            s.num_device_alloc - before.num_device_alloc,
            s.num_fence_waits - before.num_fence_waits,
            s.num_stream_syncs - before.num_stream_syncs,
            s.num_stream_queries - before.num_stream_queries,
        ),
        (0, 0, 0, 0, 0, 1)
    );
    drop(t);
    dev.allocator().check_invariants().expect("invariants");
}

#[test]
fn while_the_fence_is_outstanding_the_other_stream_waits_for_the_fence_only() {
    let _serial = serial();
    set_tracking(true);
    let (backend, dev, side) = device(8);
    step(&backend, &dev, true);
    // More work on the default stream after the scope, not covered by its fence.
    let later = backend.create_event().expect("event");
    backend
        .record_event(later, StreamId::DEFAULT)
        .expect("record");
    let t = used(&backend, &dev, 8, side);
    let s = dev.allocator().stats();
    assert_eq!((s.num_fence_waits, s.num_stream_syncs), (1, 0));
    assert!(
        !backend.query_event(later).expect("query"),
        "work queued after the fence is still running: the stream was not synchronised"
    );
    drop(t);
}

#[test]
fn without_a_scope_the_other_stream_synchronises_the_whole_stream() {
    let _serial = serial();
    // No frame (tracking off, no `sync`): no fence, so giving the memory away needs a
    // stream sync. This is what the scope's fence saves.
    set_tracking(false);
    let (backend, dev, side) = device(8);
    step(&backend, &dev, true);
    set_tracking(true);
    assert_eq!(dev.allocator().stats().num_fences, 0);
    let t = used(&backend, &dev, 8, side);
    assert_eq!(dev.allocator().stats().num_stream_syncs, 1);
    drop(t);
}

#[test]
fn a_scope_fences_each_stream_its_tensors_used_once() {
    let _serial = serial();
    set_tracking(true);
    // Plain segments: no stream gives memory to the other (which would synchronise it
    // and leave nothing to fence).
    let (backend, dev, side) = device_with("expandable_segments:False");
    {
        let _scope = ScopeGuard::enter(ScopeOptions::new("two streams").leaks(LeakPolicy::Deny));
        for _ in 0..3 {
            drop(used(&backend, &dev, 2, StreamId::DEFAULT));
            drop(used(&backend, &dev, 2, side));
        }
    }
    let s = dev.allocator().stats();
    assert_eq!(s.num_stream_syncs, 0);
    assert_eq!(s.num_fences, 2, "one fence per stream");
    // A nested scope's streams are the parent's too: the parent fences again only if
    // something was freed after the child's fence completed.
    backend.complete_stream(StreamId::DEFAULT);
    backend.complete_stream(side);
    let kept;
    {
        let _outer = ScopeGuard::enter(ScopeOptions::new("outer").leaks(LeakPolicy::Deny));
        let made = {
            let inner = ScopeGuard::enter(ScopeOptions::new("inner").leaks(LeakPolicy::Deny));
            let t = used(&backend, &dev, 2, side);
            inner.escape(&t);
            t
        };
        assert_eq!(
            dev.allocator().stats().num_fences,
            2,
            "nothing freed on `side` yet"
        );
        backend.complete_stream(side);
        drop(made); // freed in the outer scope: its exit fences `side`
        kept = 1;
    }
    assert_eq!(kept, 1);
    assert_eq!(dev.allocator().stats().num_fences, 3);
}

#[test]
fn by_default_a_stream_gets_at_most_one_fence_a_millisecond() {
    let _serial = serial();
    set_tracking(true);
    let backend = Arc::new(TestBackend::builder().build()); // events complete at once
    let conf = "expandable_segments:False,fence_interval_us:3600000000"
        .parse()
        .expect("config");
    let dev = Device::with_backend(backend.clone(), conf).expect("device");
    for _ in 0..5 {
        step(&backend, &dev, true);
    }
    assert_eq!(dev.allocator().stats().num_fences, 1, "one fence an hour");
    let default = Device::with_backend(
        Arc::new(TestBackend::builder().build()),
        gpuscope_runtime::alloc::AllocConfig::default(),
    )
    .expect("device");
    assert_eq!(default.allocator().config().fence_interval_us, 1000);
}

#[test]
fn a_sync_scope_also_waits_for_the_streams_its_tensors_were_recorded_on() {
    let _serial = serial();
    set_tracking(true);
    let (backend, dev, side) = device_with("expandable_segments:False");
    let syncs = backend.counters().stream_syncs;
    {
        let _scope = ScopeGuard::enter(ScopeOptions::new("rs").leaks(LeakPolicy::Deny).sync(true));
        let t = used(&backend, &dev, 2, StreamId::DEFAULT);
        t.record_stream(side).expect("record_stream");
        backend.launch(side, t.addr(), 2 * MIB).expect("launch");
        // Freed now, but its memory waits for an event on `side`.
    }
    assert_eq!(
        backend.counters().stream_syncs - syncs,
        2,
        "both streams waited for"
    );
    // With `side` done, the block is free again: the cache serves the next request.
    let allocs = dev.allocator().stats().num_device_alloc;
    drop(used(&backend, &dev, 2, StreamId::DEFAULT));
    assert_eq!(dev.allocator().stats().num_device_alloc, allocs);
}

#[test]
fn a_sync_scope_fences_then_waits_for_its_streams() {
    let _serial = serial();
    set_tracking(false);
    let (backend, dev, _) = device(64);
    {
        let _scope = ScopeGuard::enter(ScopeOptions::new("timed").sync(true));
        drop(used(&backend, &dev, 2, StreamId::DEFAULT));
    }
    set_tracking(true);
    assert_eq!(dev.allocator().stats().num_fences, 1);
    assert!(
        backend.counters().stream_syncs >= 1,
        "`sync` waited for the stream"
    );
}

// ---------------------------------------------------------------------------------------
// Records.

#[test]
fn report_live_names_the_open_scope_holding_a_tensor() {
    let _serial = serial();
    set_tracking(true);
    let dev = Device::host().expect("host");
    let scope = ScopeGuard::enter(ScopeOptions::new("holder").leaks(LeakPolicy::Allow));
    let t = Tensor::zeros(&[3, 5], &dev).expect("zeros");
    let id = t.track_record().expect("tracked").id();
    let live = report_live();
    let me = live.iter().find(|l| l.record.id() == id).expect("listed");
    assert!(
        me.scope
            .as_deref()
            .is_some_and(|s| s.starts_with("`holder` at ")),
        "{me}"
    );
    assert_eq!(me.record.shape(), &[3, 5]);
    scope.escape(&t);
    drop(scope);
    // Returned to the caller outside every scope: no scope holds it now.
    let live = report_live();
    let me = live.iter().find(|l| l.record.id() == id).expect("listed");
    assert_eq!(me.scope, None);
    assert_eq!(me.record.leaked_from(), None);
}

#[test]
fn tensors_of_a_thread_that_ended_stay_listed_until_dropped() {
    let _serial = serial();
    set_tracking(true);
    let dev = Device::host().expect("host");
    let (t, id, line) = std::thread::spawn(move || {
        let line = line!() + 1;
        let t = Tensor::ones(&[7], &dev).expect("ones");
        let id = t.track_record().expect("tracked").id();
        (t, id, line)
    })
    .join()
    .expect("thread");
    let live = report_live();
    let r = live
        .iter()
        .find(|l| l.record.id() == id)
        .expect("still listed");
    assert_eq!(r.record.site().line(), line);
    assert_eq!(t.to_vec::<f32>().expect("read"), vec![1.0; 7]);
    drop(t);
    assert!(!report_live().iter().any(|l| l.record.id() == id));
}

#[test]
fn records_are_reused_and_reports_stay_exact_across_threads() {
    let _serial = serial();
    // Many threads make and drop tensors in scopes while this thread keeps some alive;
    // every live tensor is listed with its own shape, and no dropped one is.
    set_tracking(true);
    let dev = Device::host().expect("host");
    let keep: Vec<Tensor> = (1..=5)
        .map(|n| Tensor::zeros(&[n, 11], &dev).expect("zeros"))
        .collect();
    let ids: Vec<u64> = keep
        .iter()
        .map(|t| t.track_record().unwrap().id())
        .collect();
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let dev = dev.clone();
            std::thread::spawn(move || {
                for i in 0..2000usize {
                    let _s = ScopeGuard::enter(ScopeOptions::new("worker").leaks(LeakPolicy::Deny));
                    let t = Tensor::zeros(&[1 + (i + w) % 9, 3], &dev).expect("zeros");
                    std::hint::black_box(&t);
                }
            })
        })
        .collect();
    for _ in 0..50 {
        let live = report_live();
        for (t, id) in keep.iter().zip(&ids) {
            let r = live.iter().find(|l| l.record.id() == *id).expect("listed");
            assert_eq!(r.record.shape(), t.shape());
        }
    }
    for w in workers {
        w.join().expect("worker");
    }
    drop(keep);
    let live = report_live();
    assert!(!live.iter().any(|l| ids.contains(&l.record.id())));
    assert!(
        !live.iter().any(|l| l.record.shape().last() == Some(&3)
            && l.record.owner().is_some_and(|s| s.name == "worker")),
        "a dropped worker tensor is listed"
    );
}
