//! Memory snapshots and allocation histories: every block with its state, the tensors
//! in them with their sites and scopes, the history's events and totals, the JSON
//! round trip, and the viewer page.

use std::sync::Arc;

use gpuscope_runtime::alloc::AllocConfig;
use gpuscope_runtime::backend::StreamId;
use gpuscope_runtime::backend::host::HostBackend;
use gpuscope_runtime::memory::{self, BlockState, HistoryAction};
use gpuscope_runtime::scope::{LeakPolicy, ScopeGuard, ScopeOptions, set_tracking};
use gpuscope_runtime::tensor::DType;
use gpuscope_runtime::{Device, Tensor};

/// A device of its own (not the process's host device, which other tests share).
fn device() -> Device {
    Device::with_backend(Arc::new(HostBackend::new()), AllocConfig::default()).unwrap()
}

fn line_of(needle: &str) -> u32 {
    include_str!("memory_snapshot.rs")
        .lines()
        .position(|l| l.contains(needle))
        .unwrap() as u32
        + 1
}

#[test]
fn a_snapshot_names_the_tensor_in_every_allocated_block() {
    set_tracking(true);
    let dev = device();
    let a = Tensor::zeros(&[256, 256], &dev).unwrap(); // site A
    let mut kept = Vec::new();
    {
        let _s = ScopeGuard::enter(ScopeOptions::new("step").leaks(LeakPolicy::Warn));
        let b = Tensor::ones(&[1000], &dev).unwrap(); // site B
        kept.push(b);
        let _tmp = Tensor::empty_on(&[3, 5], DType::I64, &dev, StreamId::DEFAULT).unwrap();
    }
    let snap = memory::snapshot(&dev);
    assert_eq!(snap.device, dev.description());
    assert!(snap.unplaced.is_empty(), "{:?}", snap.unplaced);
    let allocated: Vec<_> = snap
        .blocks()
        .filter(|b| b.state == BlockState::Allocated)
        .collect();
    assert_eq!(allocated.len(), 2, "{snap:#?}");
    // Blocks tile their segments, in address order.
    for seg in &snap.segments {
        let mut at = seg.addr;
        for b in &seg.blocks {
            assert_eq!(b.addr, at);
            at += b.size;
        }
        assert_eq!(at, seg.addr + seg.size);
    }
    let reserved: u64 = snap.segments.iter().map(|s| s.size).sum();
    assert_eq!(reserved, snap.reserved);

    let a_block = allocated
        .iter()
        .find(|b| b.tensor.as_ref().unwrap().shape == [256, 256])
        .unwrap();
    let file = file!();
    assert_eq!(
        a_block.site.as_deref(),
        Some(format!("{file}:{}:13", line_of("// site A")).as_str())
    );
    let ta = a_block.tensor.as_ref().unwrap();
    assert_eq!(
        (ta.dtype, ta.bytes, ta.scope.as_ref()),
        (DType::F32, 262144, None)
    );
    assert_eq!(ta.id, a.track_record().unwrap().id());
    assert_eq!(a_block.requested, 262144);

    let b_block = allocated
        .iter()
        .find(|b| b.tensor.as_ref().unwrap().shape == [1000])
        .unwrap();
    assert_eq!(
        b_block.site.as_deref(),
        Some(format!("{file}:{}:17", line_of("// site B")).as_str())
    );
    let tb = b_block.tensor.as_ref().unwrap();
    let leaked = tb.leaked_from.as_ref().expect("b leaked from `step`");
    assert_eq!(leaked.name, "step");
    // The freed `_tmp` block is free (cached), not allocated.
    assert!(snap.blocks().any(|b| b.state == BlockState::Free));
    drop((a, kept));
}

#[test]
fn the_history_keeps_every_event_with_its_site_and_exact_totals() {
    let dev = device();
    let before = Tensor::zeros(&[100], &dev).unwrap(); // allocated before the history
    memory::record_history(&dev, 1000);
    let x = Tensor::ones(&[1024, 1024], &dev).unwrap(); // site X: a new segment
    let y = Tensor::ones(&[8], &dev).unwrap();
    drop(before);
    drop(y);
    let h = memory::history(&dev).unwrap();
    assert_eq!((h.base_allocated, h.dropped), (400, 0));
    let actions: Vec<HistoryAction> = h.events.iter().map(|e| e.action).collect();
    use HistoryAction::*;
    assert_eq!(actions, [SegmentAlloc, Alloc, Alloc, Free, Free]);
    let xe = &h.events[1];
    assert_eq!(xe.size, 1024 * 1024 * 4);
    assert_eq!(
        h.site_of(xe).unwrap(),
        format!("{}:{}:13", file!(), line_of("// site X"))
    );
    assert!(h.events.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
    // Allocated and reserved after the last event are the allocator's.
    let allocated = h
        .events
        .iter()
        .fold(h.base_allocated as i64, |a, e| match e.action {
            Alloc => a + e.size as i64,
            Free => a - e.size as i64,
            _ => a,
        });
    let reserved = h
        .events
        .iter()
        .fold(h.base_reserved as i64, |r, e| match e.action {
            SegmentAlloc => r + e.size as i64,
            SegmentFree => r - e.size as i64,
            _ => r,
        });
    let stats = dev.allocator().stats();
    assert_eq!(allocated, stats.requested_bytes.all.current);
    assert_eq!(reserved, stats.reserved_bytes.all.current);
    // empty_cache gives the free segments back: a segment_free in the history.
    drop(x);
    dev.allocator().empty_cache().unwrap();
    let h = memory::history(&dev).unwrap();
    assert_eq!(h.events.last().unwrap().action, SegmentFree);
    memory::record_history(&dev, 0);
    assert!(memory::history(&dev).is_none());
}

#[test]
fn a_bounded_history_drops_the_oldest_events() {
    let dev = device();
    memory::record_history(&dev, 100);
    let mut keep = Vec::new();
    for i in 0..300 {
        let t = Tensor::zeros(&[64], &dev).unwrap();
        if i % 3 == 0 {
            keep.push(t);
        }
    }
    let h = memory::history(&dev).unwrap();
    assert_eq!(h.events.len(), 100);
    assert_eq!(h.dropped as usize + 100, 300 + 200 + 1); // allocs, frees, one segment
    let allocated = h
        .events
        .iter()
        .fold(h.base_allocated as i64, |a, e| match e.action {
            HistoryAction::Alloc => a + e.size as i64,
            HistoryAction::Free => a - e.size as i64,
            _ => a,
        });
    assert_eq!(allocated, 100 * 256);
    drop(keep);
}

#[cfg(feature = "serde")]
#[test]
fn snapshots_round_trip_through_json() {
    set_tracking(true);
    let dev = device();
    memory::record_history(&dev, 64);
    let t = Tensor::zeros(&[7, 9], &dev).unwrap();
    let snap = memory::snapshot(&dev);
    let text = memory::to_json(&snap);
    assert_eq!(memory::read_json(text.as_bytes(), "x").unwrap(), snap);
    assert!(text.contains(r#""dtype":"f32","shape":[7,9]"#), "{text}");
    assert!(text.contains(r#""action":"alloc""#), "{text}");
    drop(t);
}

#[cfg(feature = "viewer")]
#[test]
fn the_page_holds_the_snapshot_and_its_history() {
    set_tracking(true);
    let dev = device();
    memory::record_history(&dev, 1000);
    let mut leaked = Vec::new();
    for _ in 0..3 {
        let _s = ScopeGuard::enter(ScopeOptions::new("step").leaks(LeakPolicy::Allow));
        let a = Tensor::zeros(&[128, 128], &dev).unwrap();
        let b = Tensor::ones(&[32], &dev).unwrap();
        leaked.push(b);
        drop(a);
    }
    let snap = memory::snapshot(&dev);
    let html = memory::viewer::render(&snap, "test page");
    assert!(html.contains("<title>test page</title>"));
    assert!(html.contains(&format!("{}:", file!())));
    if let Ok(dir) = std::env::var("GPUSCOPE_VIEWER_OUT") {
        std::fs::write(std::path::Path::new(&dir).join("runtime_page.html"), &html).unwrap();
    }
    drop(leaked);
}
