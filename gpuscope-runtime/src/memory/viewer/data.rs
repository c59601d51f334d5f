//! The page's data: a [`MemorySnapshot`] (and its history) turned into the compact JSON
//! the page's script reads. Columns instead of objects for the events (a 250,000-event
//! history is a few MB), sites as indices into one table, and the free of each
//! allocation already matched to its allocation's group, so the script only adds.
//!
//! Groups: the `top` sites that held the most memory at any moment (in the history, or
//! in the snapshot's live blocks) each get a band of the chart; the other sites share
//! one; allocations without a site (a trace, or tracking off) another; and memory
//! allocated before the first event kept is a band of its own, shrinking as it is
//! freed.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::record::{BlockState, HistoryAction, MemorySnapshot, ScopeInfo};

/// Group index of "allocated before the first event kept".
const BEFORE: usize = 0;
/// Group index of allocations without a site.
const NO_SITE: usize = 1;
/// Group index of the sites past the top ones.
const OTHER: usize = 2;
/// First group of a top site.
const FIRST_TOP: usize = 3;

/// Builds the payload (JSON text) for `snapshot`.
pub(crate) fn payload(snapshot: &MemorySnapshot, title: &str, top: usize) -> String {
    let mut sites = SiteTable::default();
    // Sites of the history, then of the blocks, in one table.
    let history = snapshot.history.as_ref();
    let history_sites: Vec<u32> = history
        .map(|h| h.sites.iter().map(|s| sites.index(s)).collect())
        .unwrap_or_default();
    let event_site = |e: &crate::record::HistoryEvent| -> Option<u32> {
        e.site.and_then(|i| history_sites.get(i as usize).copied())
    };

    // Rank sites by the most memory they held at once.
    let mut peak: HashMap<u32, u64> = HashMap::new();
    if let Some(h) = history {
        let mut live: HashMap<u32, u64> = HashMap::new();
        let mut by_addr: HashMap<u64, (Option<u32>, u64)> = HashMap::new();
        for e in &h.events {
            match e.action {
                HistoryAction::Alloc => {
                    let site = event_site(e);
                    by_addr.insert(e.addr, (site, e.size));
                    if let Some(s) = site {
                        let v = live.entry(s).or_default();
                        *v += e.size;
                        let p = peak.entry(s).or_default();
                        *p = (*p).max(*v);
                    }
                }
                HistoryAction::Free => {
                    if let Some((Some(s), size)) = by_addr.remove(&e.addr) {
                        if let Some(v) = live.get_mut(&s) {
                            *v = v.saturating_sub(size);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let mut block_bytes: HashMap<u32, u64> = HashMap::new();
    let block_sites: Vec<Option<u32>> = snapshot
        .blocks()
        .map(|b| b.site.as_deref().map(|s| sites.index(s)))
        .collect();
    for (b, site) in snapshot.blocks().zip(&block_sites) {
        if let (Some(s), BlockState::Allocated) = (site, b.state) {
            *block_bytes.entry(*s).or_default() += b.size;
        }
    }
    for (s, bytes) in block_bytes {
        let p = peak.entry(s).or_default();
        *p = (*p).max(bytes);
    }
    let mut ranked: Vec<(u32, u64)> = peak.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut group_of_site: HashMap<u32, usize> = HashMap::new();
    for (i, (s, _)) in ranked.iter().take(top).enumerate() {
        group_of_site.insert(*s, FIRST_TOP + i);
    }
    let others = ranked.len().saturating_sub(top);
    let group = |site: Option<u32>| match site {
        None => NO_SITE,
        Some(s) => group_of_site.get(&s).copied().unwrap_or(OTHER),
    };

    let mut out = String::with_capacity(64 + history.map_or(0, |h| h.events.len() * 24));
    out.push('{');
    key(&mut out, "title");
    string(&mut out, title);
    out.push(',');
    key(&mut out, "device");
    string(&mut out, &snapshot.device);
    let _ = write!(
        out,
        ",\"allocated\":{},\"reserved\":{}",
        snapshot.allocated, snapshot.reserved
    );

    // Groups: name and site (-1: none).
    out.push_str(",\"groups\":[");
    let fixed = [
        "allocated before the history".to_string(),
        "no site recorded".to_string(),
        format!("{others} other site{}", if others == 1 { "" } else { "s" }),
    ];
    for (i, name) in fixed.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"name\":");
        string(&mut out, name);
        out.push_str(",\"site\":-1}");
    }
    for (s, _) in ranked.iter().take(top) {
        out.push_str(",{\"name\":");
        string(&mut out, sites.name(*s));
        let _ = write!(out, ",\"site\":{s}}}");
    }
    out.push(']');

    // The history, in columns.
    if let Some(h) = history {
        let _ = write!(
            out,
            ",\"history\":{{\"dropped\":{},\"baseAllocated\":{},\"baseReserved\":{}",
            h.dropped, h.base_allocated, h.base_reserved
        );
        let n = h.events.len();
        let (mut t, mut k, mut s, mut g, mut x) = (
            String::with_capacity(n * 6),
            String::with_capacity(n * 2),
            String::with_capacity(n * 7),
            String::with_capacity(n * 2),
            String::with_capacity(n * 3),
        );
        let mut by_addr: HashMap<u64, (usize, i64)> = HashMap::new();
        let mut last_t = 0u64;
        for (i, e) in h.events.iter().enumerate() {
            if i > 0 {
                for col in [&mut t, &mut k, &mut s, &mut g, &mut x] {
                    col.push(',');
                }
            }
            let dt = e.time_ns.saturating_sub(last_t);
            last_t = last_t.max(e.time_ns);
            let _ = write!(t, "{dt}");
            let (kind, grp, site) = match e.action {
                HistoryAction::Alloc => {
                    let site = event_site(e);
                    let grp = group(site);
                    by_addr.insert(e.addr, (grp, site.map_or(-1, i64::from)));
                    (0, grp, site.map_or(-1, i64::from))
                }
                HistoryAction::Free => {
                    let (grp, site) = by_addr.remove(&e.addr).unwrap_or((BEFORE, -1));
                    (1, grp, site)
                }
                HistoryAction::SegmentAlloc => (2, 0, -1),
                HistoryAction::SegmentFree => (3, 0, -1),
            };
            let _ = write!(k, "{kind}");
            let _ = write!(s, "{}", e.size);
            let _ = write!(g, "{grp}");
            let _ = write!(x, "{site}");
        }
        for (name, col) in [("t", t), ("k", k), ("s", s), ("g", g), ("x", x)] {
            let _ = write!(out, ",\"{name}\":[{col}]");
        }
        out.push('}');
    }

    // Segments: [addr, size, stream, pool]; blocks: [segment, offset, size, state,
    // group, site, tensor].
    out.push_str(",\"segments\":[");
    for (i, seg) in snapshot.segments.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "[{},{},{},", seg.addr, seg.size, seg.stream);
        string(&mut out, &seg.pool);
        out.push(']');
    }
    out.push_str("],\"blocks\":[");
    let mut tensors = String::new();
    let mut n_tensors = 0usize;
    let mut first = true;
    let mut block_site = block_sites.iter();
    for (si, seg) in snapshot.segments.iter().enumerate() {
        for b in &seg.blocks {
            let site = block_site.next().copied().flatten();
            let state = match b.state {
                BlockState::Allocated => 0,
                BlockState::PendingFree => 1,
                BlockState::Free => 2,
            };
            let grp = if b.state == BlockState::Allocated {
                group(site) as i64
            } else {
                -1
            };
            let tensor = match &b.tensor {
                Some(t) => {
                    if n_tensors > 0 {
                        tensors.push(',');
                    }
                    let _ = write!(
                        tensors,
                        "{{\"id\":{},\"dtype\":\"{}\",\"shape\":{:?},\"bytes\":{}",
                        t.id, t.dtype, t.shape, t.bytes
                    );
                    scope_field(&mut tensors, "scope", t.scope.as_ref());
                    scope_field(&mut tensors, "leakedFrom", t.leaked_from.as_ref());
                    tensors.push('}');
                    n_tensors += 1;
                    (n_tensors - 1) as i64
                }
                None => -1,
            };
            if !first {
                out.push(',');
            }
            first = false;
            let _ = write!(
                out,
                "[{si},{},{},{state},{grp},{},{tensor}]",
                b.addr.saturating_sub(seg.addr),
                b.size,
                site.map_or(-1, i64::from)
            );
        }
    }
    out.push_str("],\"tensors\":[");
    out.push_str(&tensors);
    out.push_str("],\"sites\":[");
    for (i, name) in sites.names.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        string(&mut out, name);
    }
    out.push_str("]}");
    out
}

#[derive(Default)]
struct SiteTable {
    names: Vec<String>,
    index: HashMap<String, u32>,
}

impl SiteTable {
    fn index(&mut self, name: &str) -> u32 {
        if let Some(i) = self.index.get(name) {
            return *i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), i);
        i
    }

    fn name(&self, i: u32) -> &str {
        &self.names[i as usize]
    }
}

fn scope_field(out: &mut String, name: &str, scope: Option<&ScopeInfo>) {
    if let Some(s) = scope {
        let _ = write!(out, ",\"{name}\":{{\"name\":");
        string(out, &s.name);
        out.push_str(",\"site\":");
        string(out, &s.site);
        out.push('}');
    }
}

fn key(out: &mut String, name: &str) {
    string(out, name);
    out.push(':');
}

/// A JSON string, also safe inside an HTML `<script>` element (no `<`, `>` or `&`).
pub(crate) fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::record::{
        BlockSnapshot, History, HistoryEvent, SNAPSHOT_FORMAT, SegmentSnapshot, TensorInfo,
    };

    fn event(action: HistoryAction, addr: u64, size: u64, site: Option<u32>) -> HistoryEvent {
        HistoryEvent {
            time_ns: addr * 10,
            action,
            addr,
            size,
            stream: 0,
            site,
        }
    }

    fn snapshot() -> MemorySnapshot {
        use HistoryAction::*;
        MemorySnapshot {
            format: SNAPSHOT_FORMAT.into(),
            device: "test:0 </script>".into(),
            allocated: 512,
            reserved: 2048,
            segments: vec![SegmentSnapshot {
                addr: 1000,
                size: 2048,
                stream: 0,
                pool: "small".into(),
                blocks: vec![
                    BlockSnapshot {
                        addr: 1000,
                        size: 512,
                        requested: 500,
                        state: BlockState::Allocated,
                        site: Some("a.rs:1:1".into()),
                        tensor: Some(TensorInfo {
                            id: 3,
                            dtype: DType::F32,
                            shape: vec![125],
                            bytes: 500,
                            scope: None,
                            leaked_from: Some(ScopeInfo {
                                name: "step".into(),
                                site: "a.rs:0:1".into(),
                            }),
                        }),
                    },
                    BlockSnapshot {
                        addr: 1512,
                        size: 1536,
                        requested: 0,
                        state: BlockState::Free,
                        site: None,
                        tensor: None,
                    },
                ],
            }],
            unplaced: vec![],
            history: Some(History {
                max_entries: 10,
                dropped: 1,
                base_allocated: 64,
                base_reserved: 0,
                sites: vec!["b.rs:2:2".into(), "a.rs:1:1".into()],
                events: vec![
                    event(SegmentAlloc, 0, 2048, None),
                    event(Alloc, 1000, 500, Some(1)),
                    event(Alloc, 1600, 100, Some(0)),
                    event(Free, 1600, 100, None),
                    event(Free, 9, 64, None), // allocated before the history
                    event(Alloc, 1700, 8, None),
                    event(Free, 1700, 8, None),
                ],
            }),
        }
    }

    #[test]
    fn frees_take_their_allocation_s_group_and_sites_are_ranked_by_peak() {
        let text = payload(&snapshot(), "t", 1);
        // a.rs (500 B at peak) is the top site; b.rs falls into "1 other site".
        assert!(
            text.contains(r#"{"name":"1 other site","site":-1},{"name":"a.rs:1:1","site":1}"#),
            "{text}"
        );
        assert!(text.contains(r#""k":[2,0,0,1,1,0,1]"#), "{text}");
        assert!(text.contains(r#""g":[0,3,2,2,0,1,1]"#), "{text}");
        assert!(text.contains(r#""t":[0,10000,6000,0,0,1000,0]"#), "{text}");
        assert!(
            text.contains(r#""blocks":[[0,0,512,0,3,1,0],[0,512,1536,2,-1,-1,-1]]"#),
            "{text}"
        );
        assert!(
            text.contains(r#""leakedFrom":{"name":"step","site":"a.rs:0:1"}"#),
            "{text}"
        );
        // Nothing can close the script element.
        assert!(
            !text.contains("</script>") && text.contains(r#"test:0 \u003c/script\u003e"#),
            "{text}"
        );
    }
}
