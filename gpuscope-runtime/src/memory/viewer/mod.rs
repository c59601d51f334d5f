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
    let payload = data::payload(snapshot, title, top);
    let js_len: usize = JS.iter().map(|p| p.len()).sum();
    let mut out = String::with_capacity(TEMPLATE.len() + CSS.len() + js_len + payload.len());
    let mut rest = TEMPLATE;
    while let Some(at) = rest.find("{{") {
        out.push_str(&rest[..at]);
        let end = rest[at..].find("}}").map_or(rest.len(), |e| at + e + 2);
        match &rest[at..end] {
            "{{TITLE}}" => escape_html(&mut out, title),
            "{{CSS}}" => out.push_str(CSS),
            "{{JS}}" => JS.iter().for_each(|p| out.push_str(p)),
            "{{DATA}}" => out.push_str(&payload),
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

    #[test]
    fn every_placeholder_is_filled_and_nothing_is_fetched() {
        let snap = MemorySnapshot {
            format: crate::record::SNAPSHOT_FORMAT.into(),
            device: "d".into(),
            allocated: 0,
            reserved: 0,
            segments: vec![],
            unplaced: vec![],
            history: None,
        };
        let html = render(&snap, "a <b> & c");
        assert!(!html.contains("{{"), "a placeholder is left");
        assert!(html.contains("<title>a &lt;b&gt; &amp; c</title>"));
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
}
