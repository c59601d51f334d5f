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

/// Two devices of their own, told apart by name (`host:N`, `host:N+1`; each test its
/// own N, as tests run at once and every device alive is listed).
fn two_devices(n: usize) -> (Device, Device) {
    let dev = |n| {
        let backend = HostBackend::new().with_ordinal(n);
        Device::with_backend(Arc::new(backend), AllocConfig::default()).unwrap()
    };
    (dev(n), dev(n + 1))
}

#[test]
fn opened_devices_are_listed_while_they_live() {
    let host = Device::host().unwrap();
    let (a, b) = two_devices(1);
    let opened = Device::opened();
    // In opening order: the host (opened first here or earlier), then a, then b.
    let at = |d: &Device| opened.iter().position(|o| o == d).unwrap();
    assert!(at(&host) < at(&a) && at(&a) < at(&b), "{opened:?}");
    assert!(opened.windows(2).all(|w| w[0].id() < w[1].id()));
    assert_eq!(
        (a.description().as_str(), b.description().as_str()),
        ("host:1 (host)", "host:2 (host)")
    );
    // Listing does not keep a device alive; the process-wide host device always lives.
    let (ida, idb) = (a.id(), b.id());
    drop(opened);
    drop(a);
    let opened = Device::opened();
    assert!(opened.iter().all(|d| d.id() != ida));
    assert!(opened.iter().any(|d| d.id() == idb) && opened.contains(&host));
    drop((opened, b));
    assert!(Device::opened().iter().all(|d| d.id() != idb));
}

#[test]
fn snapshot_all_takes_each_device_with_its_own_blocks_sites_and_history() {
    set_tracking(true);
    let (a, b) = two_devices(3);
    memory::record_history(&b, 1000);
    let on_a = Tensor::zeros(&[300, 300], &a).unwrap(); // site on a
    let on_b = Tensor::ones(&[17, 3], &b).unwrap(); // site on b
    let on_b2 = Tensor::ones(&[5], &b).unwrap();
    let snaps = memory::snapshot_all();
    let of = |d: &Device| {
        let mine: Vec<_> = snaps
            .iter()
            .filter(|s| s.device == d.description())
            .collect();
        assert_eq!(mine.len(), 1, "one snapshot per device: {snaps:#?}");
        mine[0].clone()
    };
    let (sa, sb) = (of(&a), of(&b));
    // The order is the opening order.
    let pos = |s: &memory::MemorySnapshot| snaps.iter().position(|o| o == s).unwrap();
    assert!(pos(&sa) < pos(&sb));
    let tensors = |s: &memory::MemorySnapshot| -> Vec<(Vec<usize>, String)> {
        s.blocks()
            .filter_map(|b| Some((b.tensor.as_ref()?.shape.clone(), b.site.clone()?)))
            .collect()
    };
    let site = |needle| format!("{}:{}:", file!(), line_of(needle));
    let ta = tensors(&sa);
    assert_eq!(ta.len(), 1, "{ta:?}");
    assert_eq!(ta[0].0, [300, 300]);
    assert!(ta[0].1.starts_with(&site("// site on a")), "{ta:?}");
    let tb = tensors(&sb);
    assert_eq!(tb.len(), 2, "{tb:?}");
    assert!(
        tb.iter()
            .any(|(shape, s)| shape == &[17, 3] && s.starts_with(&site("// site on b")))
    );
    // Each device's memory is its own; only b records a history, of b's allocations.
    assert_eq!(
        sa.allocated,
        a.allocator().stats().allocated_bytes.all.current as u64
    );
    assert_eq!(
        sb.allocated,
        b.allocator().stats().allocated_bytes.all.current as u64
    );
    assert!(sa.history.is_none());
    let h = sb.history.as_ref().unwrap();
    let allocs = h
        .events
        .iter()
        .filter(|e| e.action == HistoryAction::Alloc)
        .count();
    assert_eq!(allocs, 2);
    assert!(
        h.sites
            .iter()
            .all(|s| !s.starts_with(&site("// site on a")))
    );
    // The same as each device's own snapshot.
    assert_eq!(sa, memory::snapshot(&a));
    drop((on_a, on_b, on_b2));
}

#[cfg(feature = "serde")]
#[test]
fn several_devices_round_trip_through_json() {
    set_tracking(true);
    let (a, b) = two_devices(5);
    memory::record_history(&a, 100);
    let (x, y) = (
        Tensor::zeros(&[3], &a).unwrap(),
        Tensor::zeros(&[4], &b).unwrap(),
    );
    let snaps = vec![memory::snapshot(&a), memory::snapshot(&b)];
    let path = std::env::temp_dir().join(format!("gpuscope-devices-{}.json", std::process::id()));
    memory::write_json_all(&snaps, &path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert_eq!(memory::read_json_all(&bytes, "d.json").unwrap(), snaps);
    // One device's file: read by both readers, as it always was.
    let one = memory::to_json(&snaps[1]);
    assert_eq!(
        memory::read_json(one.as_bytes(), "1.json").unwrap(),
        snaps[1]
    );
    assert_eq!(
        memory::read_json_all(one.as_bytes(), "1.json").unwrap(),
        &snaps[1..]
    );
    drop((x, y));
}

#[cfg(feature = "viewer")]
#[test]
fn the_page_of_several_devices_holds_each_device() {
    set_tracking(true);
    let (a, b) = two_devices(7);
    let (x, y) = (
        Tensor::zeros(&[3], &a).unwrap(),
        Tensor::zeros(&[4], &b).unwrap(),
    );
    let snaps = [memory::snapshot(&a), memory::snapshot(&b)];
    let html = memory::viewer::render_all(&snaps, "two");
    assert!(html.contains(r#"<select id="device"><option value="0">host:7 (host)</option><option value="1">host:8 (host)</option></select>"#));
    assert!(html.contains(r#"id="gpuscope-data-0">{"title":"two","device":"host:7 (host)""#));
    assert!(html.contains(r#"id="gpuscope-data-1">{"title":"two","device":"host:8 (host)""#));
    // One device: no selector.
    let html = memory::viewer::render_all(&snaps[..1], "one");
    assert!(!html.contains("<select id=\"device\">") && html.contains(r#"id="gpuscope-data">"#));
    drop((x, y));
}
