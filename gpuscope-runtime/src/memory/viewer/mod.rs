//! The memory viewer (feature `viewer`): one self-contained HTML file that shows a
//! [`MemorySnapshot`] and its allocation history. Its script and style are inline and
//! it loads nothing, so it opens from disk, offline, in any browser.
//!
//! It shows allocated memory over time as a chart stacked by the line that allocated
//! it (the top sites each get a band, the rest are grouped), reserved memory as a line
//! over it, a map of every segment and its blocks (by state and site, so fragmentation
//! shows), the live allocations with leaked tensors in red, and details on hover and
//! click; the timeline zooms (wheel, drag, double-click to reset). It draws on canvases,
//! one pixel column at a time (each column shows the moment of its highest allocated
//! memory), so a history of 250,000 events stays responsive.
//!
//! ```no_run
//! use gpuscope_runtime::{memory, Device};
//! let dev = Device::host().unwrap();
//! memory::record_history(&dev, 100_000);
//! // ... train ...
//! memory::viewer::write_page(&memory::snapshot(&dev), "memory.html".as_ref(), "train").unwrap();
//! ```
//!
//! Several devices ([`render_all`], [`write_page_all`]; `gpuscope view` of a file of
//! several devices or a PyTorch snapshot of several GPUs): one page that holds each
//! device's data and shows one device at a time, exactly as a one-device page shows
//! it, with a selector of the device at the top. The device shown is in the address's
//! fragment (`memory.html#device=1`); choosing another reloads the page on it, so each
//! device is drawn by a fresh page (nothing of the previous one is left, and only the
//! shown device's data is parsed). With one device the page has no selector.
//!
//! ```no_run
//! use gpuscope_runtime::memory;
//! memory::viewer::write_page_all(&memory::snapshot_all(), "memory.html".as_ref(), "train").unwrap();
//! ```
//!
//! `gpuscope view` writes the same page from a saved snapshot, an allocation trace or a
//! PyTorch snapshot.

mod data;

use std::path::Path;

use crate::record::MemorySnapshot;

const TEMPLATE: &str = include_str!("../../../assets/viewer/viewer.html");
const CSS: &str = include_str!("../../../assets/viewer/viewer.css");
/// The page's script, in three files joined in order (one function scope).
const JS: [&str; 3] = [
    include_str!("../../../assets/viewer/viewer-1-main.js"),
    include_str!("../../../assets/viewer/viewer-2-chart.js"),
    include_str!("../../../assets/viewer/viewer-3-segments.js"),
];

/// Sites that get a band of their own in the chart (the others share one).
pub const TOP_SITES: usize = 12;

/// The page for `snapshot` (and its history), titled `title`, as HTML text.
///
/// ```
/// use gpuscope_runtime::{memory, Device, Tensor};
/// let dev = Device::host().unwrap();
/// let t = Tensor::zeros(&[64], &dev).unwrap();
/// let html = memory::viewer::render(&memory::snapshot(&dev), "example");
/// assert!(html.starts_with("<!doctype html>") && html.contains("<title>example</title>"));
/// assert!(!html.contains("http://") && !html.contains("https://")); // loads nothing
/// # drop(t);
/// ```
pub fn render(snapshot: &MemorySnapshot, title: &str) -> String {
    render_with(snapshot, title, TOP_SITES)
}

/// [`render`] with `top` sites getting a band of their own.
pub fn render_with(snapshot: &MemorySnapshot, title: &str, top: usize) -> String {
    render_all_with(std::slice::from_ref(snapshot), title, top)
}

/// The page for several devices' snapshots, titled `title`: each device's data, one
/// device shown at a time with a selector to choose it (see the [module docs](self));
/// for one snapshot, the page [`render`] makes. No snapshot is a page that says there
/// is no device.
///
/// ```
/// use gpuscope_runtime::memory;
/// let snaps = memory::snapshot_all();
/// let html = memory::viewer::render_all(&snaps, "all devices");
/// assert_eq!(html.contains(r#"<select id="device">"#), snaps.len() > 1);
/// ```
pub fn render_all(snapshots: &[MemorySnapshot], title: &str) -> String {
    render_all_with(snapshots, title, TOP_SITES)
}

/// [`render_all`] with `top` sites getting a band of their own.
pub fn render_all_with(snapshots: &[MemorySnapshot], title: &str, top: usize) -> String {
    let none;
    let snapshots = if snapshots.is_empty() {
        none = [no_device()];
        &none[..]
    } else {
        snapshots
    };
    let payloads: Vec<String> = snapshots
        .iter()
        .map(|s| data::payload(s, title, top))
        .collect();
    let data_len: usize = payloads.iter().map(|p| p.len() + 80).sum();
    let js_len: usize = JS.iter().map(|p| p.len()).sum();
    let mut out = String::with_capacity(TEMPLATE.len() + CSS.len() + js_len + data_len);
    let mut rest = TEMPLATE;
    while let Some(at) = rest.find("{{") {
        out.push_str(&rest[..at]);
        let end = rest[at..].find("}}").map_or(rest.len(), |e| at + e + 2);
        match &rest[at..end] {
            "{{TITLE}}" => escape_html(&mut out, title),
            "{{CSS}}" => out.push_str(CSS),
            "{{JS}}" => JS.iter().for_each(|p| out.push_str(p)),
            "{{DEVICES}}" => device_selector(&mut out, snapshots),
            "{{DATA}}" => data_elements(&mut out, &payloads),
            other => out.push_str(other),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Writes the page for `snapshot` to `path`.
pub fn write_page(snapshot: &MemorySnapshot, path: &Path, title: &str) -> std::io::Result<()> {
    std::fs::write(path, render(snapshot, title))
}

/// Writes the page for several devices' snapshots ([`render_all`]) to `path`.
pub fn write_page_all(
    snapshots: &[MemorySnapshot],
    path: &Path,
    title: &str,
) -> std::io::Result<()> {
    std::fs::write(path, render_all(snapshots, title))
}

/// The data of each device, in `<script type="application/json">` elements: one device
/// is `#gpuscope-data` (as pages always had it); several are `#gpuscope-data-0`,
/// `#gpuscope-data-1`, ..., and the script gives the shown one the id `gpuscope-data`.
fn data_elements(out: &mut String, payloads: &[String]) {
    for (i, payload) in payloads.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(r#"<script type="application/json" id="gpuscope-data"#);
        if payloads.len() > 1 {
            out.push_str(&format!("-{i}"));
        }
        out.push_str(r#"">"#);
        out.push_str(payload);
        out.push_str("</script>");
    }
}

/// The device selector (several devices only): one option per device, named by its
/// description; a name that repeats gets its position (`host:0 (host) [2]`).
fn device_selector(out: &mut String, snapshots: &[MemorySnapshot]) {
    if snapshots.len() < 2 {
        return;
    }
    out.push_str(r#"<label id="device-picker">device <select id="device">"#);
    for (i, s) in snapshots.iter().enumerate() {
        out.push_str(&format!(r#"<option value="{i}">"#));
        escape_html(out, &s.device);
        if snapshots.iter().filter(|o| o.device == s.device).count() > 1 {
            out.push_str(&format!(" [{}]", i + 1));
        }
        out.push_str("</option>");
    }
    out.push_str(&format!(
        "</select></label> <span class=\"hint\">{} devices</span>",
        snapshots.len()
    ));
}

fn no_device() -> MemorySnapshot {
    MemorySnapshot {
        format: crate::record::SNAPSHOT_FORMAT.into(),
        device: "no device".into(),
        allocated: 0,
        reserved: 0,
        segments: vec![],
        unplaced: vec![],
        history: None,
    }
}

fn escape_html(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(device: &str) -> MemorySnapshot {
        MemorySnapshot {
            device: device.into(),
            ..no_device()
        }
    }

    fn loads_nothing(html: &str) {
        for needle in [
            "src=",
            "href=",
            "import(",
            "fetch(",
            "XMLHttpRequest",
            "http:",
            "https:",
        ] {
            assert!(
                !html.contains(needle),
                "the page must load nothing: found `{needle}`"
            );
        }
    }

    #[test]
    fn every_placeholder_is_filled_and_nothing_is_fetched() {
        let html = render(&snap("d"), "a <b> & c");
        assert!(!html.contains("{{"), "a placeholder is left");
        assert!(html.contains("<title>a &lt;b&gt; &amp; c</title>"));
        loads_nothing(&html);
        // One device: its data where pages always had it, and no selector.
        assert_eq!(
            html.matches(r#"<script type="application/json""#).count(),
            1
        );
        assert!(html.contains(r#"<script type="application/json" id="gpuscope-data">{"title""#));
        assert!(!html.contains("<select id=\"device\">"));
        assert_eq!(render_all(&[snap("d")], "a <b> & c"), html);
    }

    #[test]
    fn several_devices_get_a_selector_and_each_its_data() {
        let snaps = [snap("cuda:0 <A>"), snap("cuda:1 (B)"), snap("cuda:1 (B)")];
        let html = render_all(&snaps, "t");
        assert!(!html.contains("{{"), "a placeholder is left");
        loads_nothing(&html);
        assert_eq!(html.matches(r#"<select id="device">"#).count(), 1);
        assert!(
            html.contains(concat!(
                r#"<option value="0">cuda:0 &lt;A&gt;</option>"#,
                r#"<option value="1">cuda:1 (B) [2]</option>"#,
                r#"<option value="2">cuda:1 (B) [3]</option>"#
            )),
            "{html}"
        );
        for (i, s) in snaps.iter().enumerate() {
            let mut device = String::new();
            data::string(&mut device, &s.device);
            let element = format!(
                r#"<script type="application/json" id="gpuscope-data-{i}">{{"title":"t","device":{device},"#
            );
            assert!(html.contains(&element), "{element}");
        }
        assert!(!html.contains(r#"id="gpuscope-data">"#));
        // No snapshot: a page that says so.
        let html = render_all(&[], "none");
        assert!(
            html.contains(r#""device":"no device""#) && !html.contains("<select id=\"device\">")
        );
    }
}
