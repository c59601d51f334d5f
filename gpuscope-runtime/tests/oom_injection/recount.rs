//! Statistics recounted from a snapshot.

use super::*;

/// Compares the current values of the statistics, per pool, with a recount from the
/// snapshot (`held`: bytes of pages held outside both pools).
pub(crate) fn check_recount(
    stats: &MemoryStats,
    snap: &[SegmentInfo],
    held: usize,
) -> Result<(), String> {
    let mut count: HashMap<&str, [i64; 2]> = HashMap::new();
    for seg in snap {
        let p = seg.pool.index();
        let mut add = |name: &'static str, v: usize| count.entry(name).or_default()[p] += v as i64;
        add("segment", 1);
        add("reserved_bytes", seg.size);
        for b in &seg.blocks {
            match b.state {
                BlockState::Allocated => {
                    add("allocation", 1);
                    add("allocated_bytes", b.size);
                    add("requested_bytes", b.requested);
                    add("active", 1);
                    add("active_bytes", b.size);
                }
                BlockState::PendingFree => {
                    add("active", 1);
                    add("active_bytes", b.size);
                }
                BlockState::Free if seg.blocks.len() > 1 => {
                    add("inactive_split", 1);
                    add("inactive_split_bytes", b.size);
                }
                _ => {}
            }
        }
    }
    for (name, a) in stats.named_arrays() {
        let [small, large] = count.get(name).copied().unwrap_or_default();
        let unpooled = if name == "reserved_bytes" {
            held as i64
        } else {
            0
        };
        let want = (small, large, small + large + unpooled);
        let got = (a.small_pool.current, a.large_pool.current, a.all.current);
        if got != want {
            return Err(format!(
                "{name} (small, large, all): statistics {got:?}, recount {want:?}"
            ));
        }
    }
    Ok(())
}
