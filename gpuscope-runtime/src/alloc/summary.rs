//! `memory_summary()`: the statistics as a table, laid out like PyTorch's
//! `torch.cuda.memory_summary()` so that people who know one can read the other.

use std::fmt::Write;

use super::config::AllocConfig;
use super::stats::{MemoryStats, Stat, StatArray};

const WIDTH: usize = 78;

/// Formats a byte count in a fixed-width column (PyTorch's rule: switch unit once the
/// value reaches 768 of the next).
fn size_cell(bytes: i64) -> String {
    let units = ["B  ", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let (mut value, mut unit) = (bytes, 0);
    let mut pref = bytes.unsigned_abs() as f64;
    while unit + 1 < units.len() && pref >= 768.0 * 1024.0 {
        value /= 1024;
        pref /= 1024.0;
        unit += 1;
    }
    format!("{value:>6} {}", units[unit])
}

fn count_cell(n: i64) -> String {
    format!("{n:>10}")
}

fn rule(out: &mut String, c: char) {
    let _ = writeln!(out, "|{}|", c.to_string().repeat(WIDTH));
}

fn centered(out: &mut String, text: &str) {
    let _ = writeln!(out, "|{text:^WIDTH$}|");
}

fn row(out: &mut String, name: &str, stat: &Stat, cell: fn(i64) -> String) {
    let _ = writeln!(
        out,
        "| {name:<24} | {} | {} | {} | {} |",
        cell(stat.current),
        cell(stat.peak),
        cell(stat.allocated),
        cell(stat.freed)
    );
}

fn group(out: &mut String, name: &str, stat: &StatArray, cell: fn(i64) -> String) {
    row(out, name, &stat.all, cell);
    row(out, "      from large pool", &stat.large_pool, cell);
    row(out, "      from small pool", &stat.small_pool, cell);
    rule(out, '-');
}

/// Renders the summary table.
pub(crate) fn render(device: &str, s: &MemoryStats, config: &AllocConfig) -> String {
    let mut out = String::new();
    rule(&mut out, '=');
    centered(&mut out, &format!("gpuscope memory summary, {device}"));
    rule(&mut out, '-');
    centered(
        &mut out,
        &format!(
            "OOMs: {:<5} alloc retries: {:<5} device allocs: {:<6} device frees: {:<6}",
            s.num_ooms, s.num_alloc_retries, s.num_device_alloc, s.num_device_free
        ),
    );
    centered(
        &mut out,
        &format!(
            "maps: {:<6} unmaps: {:<6} stream syncs: {:<6} all-stream syncs: {:<6}",
            s.num_device_map, s.num_device_unmap, s.num_stream_syncs, s.num_sync_all_streams
        ),
    );
    centered(
        &mut out,
        &format!(
            "set access: {:<6} event syncs: {:<6} fences: {:<6} fence waits: {:<6}",
            s.num_set_access, s.num_event_syncs, s.num_fences, s.num_fence_waits
        ),
    );
    rule(&mut out, '=');
    let _ = writeln!(
        out,
        "| {:<24} | {:>10} | {:>10} | {:>10} | {:>10} |",
        "Metric", "Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed"
    );
    rule(&mut out, '-');
    group(&mut out, "Allocated memory", &s.allocated_bytes, size_cell);
    group(&mut out, "Active memory", &s.active_bytes, size_cell);
    group(&mut out, "Requested memory", &s.requested_bytes, size_cell);
    group(
        &mut out,
        "Device reserved memory",
        &s.reserved_bytes,
        size_cell,
    );
    group(
        &mut out,
        "Non-releasable memory",
        &s.inactive_split_bytes,
        size_cell,
    );
    group(&mut out, "Allocations", &s.allocation, count_cell);
    group(&mut out, "Active allocs", &s.active, count_cell);
    group(&mut out, "Device reserved segments", &s.segment, count_cell);
    group(
        &mut out,
        "Non-releasable allocs",
        &s.inactive_split,
        count_cell,
    );
    row(
        &mut out,
        "Oversize allocations",
        &s.oversize_allocations,
        count_cell,
    );
    row(
        &mut out,
        "Oversize segments",
        &s.oversize_segments,
        count_cell,
    );
    rule(&mut out, '=');
    centered(&mut out, &format!("config: {config}"));
    rule(&mut out, '=');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_switch_units_like_pytorch() {
        assert_eq!(size_cell(512), "   512 B  ");
        assert_eq!(size_cell(1 << 20), "  1024 KiB");
        assert_eq!(size_cell(800 << 10), "   800 KiB");
        assert_eq!(size_cell(3 << 30), "  3072 MiB");
        assert_eq!(size_cell(800 << 20), "   800 MiB");
    }

    #[test]
    fn every_line_has_the_same_width() {
        let text = render(
            "test:0 (test)",
            &MemoryStats::default(),
            &AllocConfig::default(),
        );
        for line in text.lines() {
            assert_eq!(line.chars().count(), WIDTH + 2, "{line:?}");
        }
        assert!(text.contains("Allocated memory"));
        assert!(text.contains("from small pool"));
        assert!(text.contains("fences: 0") && text.contains("fence waits: 0"));
    }
}
