//! The memory viewer in a real headless Chromium (Debian's chromium and
//! chromium-driver, installed by `tests/browser/install.sh` where missing; where they
//! cannot be installed the test prints `skipped: <reason>`). For a gpuscope snapshot,
//! an allocation trace and every PyTorch snapshot in tests/data/pytorch-snapshots: the
//! chart draws one band per site and the segment map every segment and block of the
//! input, hovering a block or a band shows its site, and the console stays free of
//! errors. A 250,000-event history must draw in under a second. Screenshots go to
//! `<target>/tmp/view-browser/`.

mod browser;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use gpuscope_runtime::alloc::AllocConfig;
use gpuscope_runtime::backend::host::HostBackend;
use gpuscope_runtime::memory::{
    self, BlockSnapshot, BlockState, History, HistoryAction, HistoryEvent, MemorySnapshot,
    SNAPSHOT_FORMAT, SegmentSnapshot,
};
use gpuscope_runtime::scope::{LeakPolicy, ScopeGuard, ScopeOptions, set_tracking};
use gpuscope_runtime::{Device, Tensor};
use serde_json::Value;

use browser::Browser;

fn out_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("view-browser");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data")
        .join(rel)
}

/// `gpuscope view INPUT -o OUT`; returns (segments, blocks) as the command counted them.
fn view(input: &Path, out: &Path) -> (u64, u64) {
    let o = Command::new(env!("CARGO_BIN_EXE_gpuscope"))
        .args(["view", input.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let count = |what: &str| -> u64 {
        let at = stdout.find(&format!(" {what}")).unwrap();
        stdout[..at].rsplit(' ').next().unwrap().parse().unwrap()
    };
    (count("segments,"), count("blocks ("))
}

/// What a page drew, as its script reports it.
#[derive(Debug)]
struct Drawn {
    series: u64,
    legend_items: u64,
    segments: u64,
    blocks: u64,
    load_ms: f64,
}

fn load(b: &Browser, page: &Path, name: &str) -> Drawn {
    let nav = b.open(page);
    b.wait_for(
        "return !!(window.gpuscopeViewer && window.gpuscopeViewer.ready);",
        Duration::from_secs(60),
    );
    let v = b.eval(
        "const V = window.gpuscopeViewer; return {drawn: V.drawn, total: V.timings.total, \
         legend: document.querySelectorAll('#legend .legend-item').length};",
    );
    b.screenshot(&out_dir().join(format!("{name}.png")));
    let d = Drawn {
        series: v["drawn"]["series"].as_u64().unwrap(),
        legend_items: v["legend"].as_u64().unwrap(),
        segments: v["drawn"]["segments"].as_u64().unwrap(),
        blocks: v["drawn"]["blocks"].as_u64().unwrap(),
        load_ms: v["total"].as_f64().unwrap(),
    };
    println!(
        "{name}: {d:?} (navigation {:.0} ms)",
        nav.as_secs_f64() * 1e3
    );
    assert_eq!(d.legend_items, v["drawn"]["legend"].as_u64().unwrap());
    d
}

/// Hovers the middle of `point` (a `{x, y}` the page computed) and returns the tooltip.
fn hover_text(b: &Browser, point: Value) -> String {
    let (x, y) = (point["x"].as_f64().unwrap(), point["y"].as_f64().unwrap());
    b.hover(x, y);
    let v = b.eval(
        "const t = document.getElementById('tooltip'); \
         return [getComputedStyle(t).display, t.textContent];",
    );
    assert_eq!(v[0], "block", "no tooltip at ({x}, {y})");
    v[1].as_str().unwrap().to_string()
}

fn no_console_errors(b: &Browser, page: &str) {
    let errors: Vec<_> = b
        .console()
        .into_iter()
        .filter(|(level, msg)| level == "SEVERE" || msg.contains("Uncaught"))
        .collect();
    assert!(errors.is_empty(), "{page}: console errors: {errors:?}");
}

fn line_of(needle: &str) -> usize {
    include_str!("view_browser.rs")
        .lines()
        .position(|l| l.contains(needle))
        .unwrap()
        + 1
}

/// On the page of two devices (showing device 0): choosing device 1 in the selector
/// reloads the page on it, which then draws device 1's segments and blocks, and only
/// its sites; choosing device 0 again comes back.
fn switch_device(b: &Browser, page: &Path) {
    let count = |d: &Value| {
        (
            d["segments"].as_u64().unwrap(),
            d["blocks"].as_u64().unwrap(),
        )
    };
    let data = |i: usize| -> Value {
        let html = std::fs::read_to_string(page).unwrap();
        let tag = format!(r#"id="gpuscope-data-{i}">"#);
        let rest = &html[html.find(&tag).unwrap() + tag.len()..];
        serde_json::from_str(&rest[..rest.find("</script>").unwrap()]).unwrap()
    };
    let shown = b.eval(
        "const V = window.gpuscopeViewer; return {device: V.device, options: document.querySelectorAll('#device option').length, drawn: V.drawn};",
    );
    assert_eq!(
        (shown["device"].as_u64(), shown["options"].as_u64()),
        (Some(0), Some(2))
    );
    for i in [1usize, 0] {
        b.eval(&format!(
            "const p = document.getElementById('device'); p.value = '{i}'; \
             p.dispatchEvent(new Event('change')); return 0;"
        ));
        b.wait_for(
            &format!("return !!(window.gpuscopeViewer && window.gpuscopeViewer.ready && window.gpuscopeViewer.device === {i});"),
            Duration::from_secs(60),
        );
        let v = b.eval(
            "const V = window.gpuscopeViewer; return {drawn: V.drawn, hash: location.hash, \
             selected: document.getElementById('device').value, \
             device: JSON.parse(document.getElementById('gpuscope-data').textContent).device, \
             summary: document.getElementById('summary').textContent};",
        );
        let d = data(i);
        let want = (
            d["segments"].as_array().unwrap().len() as u64,
            d["blocks"].as_array().unwrap().len() as u64,
        );
        assert_eq!(count(&v["drawn"]), want, "device {i}: {v}");
        assert_eq!(v["hash"], format!("#device={i}"));
        assert_eq!(v["selected"], i.to_string());
        assert_eq!(v["device"], format!("cuda:{i} (PyTorch snapshot)"));
        assert!(
            v["summary"]
                .as_str()
                .unwrap()
                .contains(&format!("cuda:{i} (PyTorch snapshot)")),
            "{v}"
        );
        b.screenshot(&out_dir().join(format!("two_devices_{i}.png")));
        no_console_errors(b, &format!("two_devices #device={i}"));
    }
}

/// A gpuscope snapshot with a history: three sites, one of them leaking.
fn gpuscope_snapshot() -> MemorySnapshot {
    set_tracking(true);
    let dev = Device::with_backend(Arc::new(HostBackend::new()), AllocConfig::default()).unwrap();
    memory::record_history(&dev, 100_000);
    let mut kept = Vec::new();
    let weights = Tensor::zeros(&[512, 512], &dev).unwrap(); // SITE weights
    for _ in 0..20 {
        let _s = ScopeGuard::enter(ScopeOptions::new("browser_step").leaks(LeakPolicy::Warn));
        let act = Tensor::ones(&[256, 256], &dev).unwrap(); // SITE activation
        kept.push(Tensor::zeros(&[64, 64], &dev).unwrap()); // SITE leak
        drop(act);
    }
    let snap = memory::snapshot(&dev);
    drop((kept, weights));
    snap
}

/// A history of 250,000 events from 40 sites over 4 segments, and its snapshot.
fn synthetic_history(events: usize) -> MemorySnapshot {
    let sites: Vec<String> = (0..40)
        .map(|i| format!("src/model/layer_{i}.rs:{}:9", 10 + i))
        .collect();
    let seg_size = 1u64 << 30;
    let base = 0x7f00_0000_0000u64;
    let mut evs = Vec::with_capacity(events);
    for s in 0..4u64 {
        evs.push(HistoryEvent {
            time_ns: s,
            action: HistoryAction::SegmentAlloc,
            addr: base + s * seg_size,
            size: seg_size,
            stream: 0,
            site: None,
        });
    }
    // A training-like pattern: allocations grow within a step, then are freed.
    let mut live: Vec<(u64, u64)> = Vec::new();
    let mut next_addr = base;
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut t = 10u64;
    while evs.len() < events {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        t += 1 + rng % 500;
        if live.len() < 300 && (rng % 3 != 0 || live.is_empty()) {
            let size = 4096 * (1 + rng % 2048);
            let site = (rng >> 20) % 40;
            evs.push(HistoryEvent {
                time_ns: t,
                action: HistoryAction::Alloc,
                addr: next_addr,
                size,
                stream: 0,
                site: Some(site as u32),
            });
            live.push((next_addr, size));
            next_addr += 1 << 24;
        } else {
            let i = (rng as usize >> 3) % live.len();
            let (addr, size) = live.swap_remove(i);
            evs.push(HistoryEvent {
                time_ns: t,
                action: HistoryAction::Free,
                addr,
                size,
                stream: 0,
                site: None,
            });
        }
    }
    let segments = (0..4u64)
        .map(|s| SegmentSnapshot {
            addr: base + s * seg_size,
            size: seg_size,
            stream: 0,
            pool: "large".into(),
            blocks: (0..256u64)
                .map(|k| BlockSnapshot {
                    addr: base + s * seg_size + k * (seg_size / 256),
                    size: seg_size / 256,
                    requested: if k % 3 == 0 { 0 } else { seg_size / 256 },
                    state: if k % 3 == 0 {
                        BlockState::Free
                    } else {
                        BlockState::Allocated
                    },
                    site: (k % 3 != 0).then(|| sites[(k % 40) as usize].clone()),
                    tensor: None,
                })
                .collect(),
        })
        .collect();
    MemorySnapshot {
        format: SNAPSHOT_FORMAT.into(),
        device: "synthetic".into(),
        allocated: 0,
        reserved: 4 * seg_size,
        segments,
        unplaced: vec![],
        history: Some(History {
            max_entries: events as u64,
            dropped: 0,
            base_allocated: 0,
            base_reserved: 0,
            sites,
            events: evs,
        }),
    }
}

#[test]
fn viewer_pages_render_in_headless_chromium() {
    if let Err(reason) = browser::ensure_installed() {
        println!("skipped: {reason}");
        return;
    }
    let b = Browser::start();
    // The console channel works: a message the page logs comes back.
    let blank = out_dir().join("blank.html");
    std::fs::write(&blank, "<!doctype html><title>probe</title>").unwrap();
    b.open(&blank);
    b.eval("console.error('gpuscope-console-probe'); return 0;");
    let probe = b.console();
    assert!(
        probe
            .iter()
            .any(|(l, m)| l == "SEVERE" && m.contains("gpuscope-console-probe")),
        "{probe:?}"
    );

    // 1. A gpuscope snapshot: three sites; the leaked tensors are highlighted.
    let snap = gpuscope_snapshot();
    let page = out_dir().join("gpuscope.html");
    memory::viewer::write_page(&snap, &page, "gpuscope snapshot").unwrap();
    let d = load(&b, &page, "gpuscope");
    assert_eq!((d.series, d.legend_items), (3, 3), "{d:?}");
    assert_eq!(d.segments, snap.segments.len() as u64);
    assert_eq!(d.blocks, snap.blocks().count() as u64);
    let leak_site = format!("tests/view_browser.rs:{}:19", line_of("// SITE leak"));
    let leaked = snap
        .blocks()
        .position(|b| b.tensor.as_ref().is_some_and(|t| t.leaked_from.is_some()))
        .unwrap();
    let tip = hover_text(
        &b,
        b.eval(&format!(
            "return window.gpuscopeViewer.blockPoint({leaked});"
        )),
    );
    assert!(
        tip.contains(&leak_site) && tip.contains("LEAKED from scope `browser_step`"),
        "{tip}"
    );
    assert!(tip.contains("tensor f32[64, 64]"), "{tip}");
    // The band of the activations' site, in the chart.
    let groups = b.eval("return JSON.parse(document.getElementById('gpuscope-data').textContent).groups.map(g => g.name);");
    let act_site = format!("tests/view_browser.rs:{}:19", line_of("// SITE activation"));
    let g = groups
        .as_array()
        .unwrap()
        .iter()
        .position(|n| n.as_str().unwrap().ends_with(&act_site))
        .unwrap();
    let tip = hover_text(
        &b,
        b.eval(&format!("return window.gpuscopeViewer.chartPoint({g});")),
    );
    assert!(
        tip.contains(&act_site) && tip.contains("allocated here"),
        "{tip}"
    );
    no_console_errors(&b, "gpuscope");

    // 2. An allocation trace: no sites, one band.
    let page = out_dir().join("trace.html");
    let (segments, blocks) = view(&data("traces/bert_infer.csv"), &page);
    let d = load(&b, &page, "trace");
    assert_eq!((d.series, d.legend_items), (1, 1), "{d:?}");
    assert_eq!((d.segments, d.blocks), (segments, blocks));
    let tip = hover_text(&b, b.eval("return window.gpuscopeViewer.chartPoint(1);"));
    assert!(tip.contains("no site recorded"), "{tip}");
    no_console_errors(&b, "trace");

    // 3. Every PyTorch snapshot pickle.
    let mut pickles: Vec<PathBuf> = std::fs::read_dir(data("pytorch-snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pickle" || e == "pkl"))
        .collect();
    pickles.sort();
    for p in &pickles {
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        let page = out_dir().join(format!("{name}.html"));
        let (segments, blocks) = view(p, &page);
        let d = load(&b, &page, &name);
        assert_eq!((d.segments, d.blocks), (segments, blocks), "{name}");
        assert!(
            d.legend_items >= 1 && d.series <= d.legend_items,
            "{name}: {d:?}"
        );
        if name == "synthetic_training" {
            assert_eq!((d.series, d.legend_items), (5, 5), "{d:?}");
        }
        if name == "two_devices" {
            switch_device(&b, &page);
        }
        // Hover the largest allocated block with a site: the tooltip names the site.
        let i = b.eval(
            "const D = JSON.parse(document.getElementById('gpuscope-data').textContent); \
             let best = -1; D.blocks.forEach((b, i) => { if (b[3] === 0 && b[5] >= 0 && (best < 0 || b[2] > D.blocks[best][2])) best = i; }); \
             return [best, best >= 0 ? D.sites[D.blocks[best][5]] : null];",
        );
        if i[0].as_i64().unwrap() >= 0 {
            let tip = hover_text(
                &b,
                b.eval(&format!(
                    "return window.gpuscopeViewer.blockPoint({});",
                    i[0]
                )),
            );
            assert!(tip.contains(i[1].as_str().unwrap()), "{name}: {tip}");
        }
        no_console_errors(&b, &name);
    }

    // 4. 250,000 events: drawn in under a second.
    let snap = synthetic_history(250_000);
    let page = out_dir().join("history_250k.html");
    memory::viewer::write_page(&snap, &page, "250,000 events").unwrap();
    let d = load(&b, &page, "history_250k");
    assert_eq!(d.legend_items, 13, "{d:?}"); // 12 top sites and one band for the other 28
    assert_eq!(d.blocks, 1024);
    println!(
        "250,000 events: page ready {:.0} ms after navigation start",
        d.load_ms
    );
    assert!(
        d.load_ms < 1000.0,
        "250,000 events drew in {:.0} ms",
        d.load_ms
    );
    // Zooming redraws from the same events: a range of 1000 events.
    let z = b.eval("const t0 = performance.now(); window.gpuscopeViewer.zoom(100000, 101000); return performance.now() - t0;");
    println!(
        "250,000 events: a zoom redraw took {:.1} ms",
        z.as_f64().unwrap()
    );
    no_console_errors(&b, "history_250k");

    // Pages to time, for BENCHMARKS.md (GPUSCOPE_VIEW_TIME_PAGES=a.html:b.html).
    for page in std::env::var("GPUSCOPE_VIEW_TIME_PAGES")
        .unwrap_or_default()
        .split(':')
        .filter(|p| !p.is_empty())
    {
        let d = load(&b, Path::new(page), "timed");
        println!("{page}: ready {:.0} ms after navigation start", d.load_ms);
        no_console_errors(&b, page);
    }
}
