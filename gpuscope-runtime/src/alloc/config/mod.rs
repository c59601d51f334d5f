//! Allocator configuration, read from `GPUSCOPE_ALLOC_CONF` with the key syntax of
//! PyTorch's `PYTORCH_CUDA_ALLOC_CONF`: `key:value` pairs separated by commas.
//!
//! | key | value | default | meaning |
//! |---|---|---|---|
//! | `max_split_size_mb` | integer > 20 | unlimited | blocks at least this large are never split; requests below it never use them |
//! | `max_non_split_rounding_mb` | integer | 20 | a request of at least `max_split_size` may take an unsplit block at most this much larger |
//! | `roundup_power2_divisions` | power of two, or `[256:1,512:2,>:8]` | 1 (off) | round requests up to this many steps per power of two (fewer distinct sizes, less fragmentation) |
//! | `garbage_collection_threshold` | 0 < t < 1 | off | when reserved memory passes this fraction of the limit, release the least recently used free segments before growing |
//! | `expandable_segments` | `True` / `False` | `True` | build each stream's pools from physical chunks mapped at the top of a reserved address range (CUDA virtual memory), so a pool grows in place instead of in separate segments; no effect on a backend without virtual memory |
//! | `share_across_streams` | `True` / `False` | `False` | with `expandable_segments`, one pool for every stream: memory one stream freed serves another once a poll finds the freeing stream's work before the free done (never a wait). It lowers reserved memory where the other streams are idle when a stream allocates (a replay: up to 29% less on multi-stream traces), but where they are busy, as on a GPU that the host runs ahead of, memory drifts to whichever stream finds it free and the pool grows (`tests/busy_replay.rs`). `False`: each stream's memory serves only that stream until it goes back, as in PyTorch |
//! | `fence_interval_us` | integer ≥ 0 | 1000 | record a stream fence (at scope exit, [`record_fence`](super::CachingAllocator::record_fence)) at most once per this many microseconds per stream; 0: every time one is asked for (each costs an event record and query on CUDA, a few microseconds) |
//! | `per_process_memory_fraction` | 0 < f ≤ 1 | 1 | cap reserved memory at this fraction of the device's capacity |
//! | `memory_limit_mb` | integer | none | cap reserved memory at this many MiB |
//! | `max_chunk_size_mb` | integer ≥ 20 | 1/160 of the device (or cap) | with `expandable_segments`, the largest physical allocation one growth makes, in whole 20 MiB pages; a larger growth is several, side by side. Memory goes back to the device only as whole chunks, so smaller chunks let more of it go when the device runs out (20: page by page, as PyTorch's expandable segments, at one device allocation per page). Replaces `page_chunk_threshold` |
//! | `page_chunk_threshold` | 0 ≤ t ≤ 1 | 0.25 | with `expandable_segments`, once a growth would take reserved memory past this fraction of the device (or cap), it is mapped in single 20 MiB pages, so that memory freed between live blocks goes back page by page when the device runs out (a workload fits closer to the device's memory, at one device allocation per page past the line: about 57 µs each on an H100, once); 1: never |
//!
//! An unknown key, a repeated key or a bad value is an error that names the key and
//! says what is accepted; nothing is silently ignored.
//!
//! ```
//! use gpuscope_runtime::alloc::AllocConfig;
//! let c: AllocConfig = "max_split_size_mb:128,roundup_power2_divisions:[256:1,>:4]".parse().unwrap();
//! assert_eq!(c.max_split_size, 128 << 20);
//! let err = "max_split_size:128".parse::<AllocConfig>().unwrap_err();
//! assert!(err.to_string().contains("did you mean `max_split_size_mb`"));
//! ```

use std::fmt;

use super::rounding::LARGE_BUFFER;

mod parse;

pub use parse::ConfigError;

/// The environment variable the allocator reads its configuration from.
pub const ALLOC_CONF_VAR: &str = "GPUSCOPE_ALLOC_CONF";

/// Number of power-of-two size intervals `roundup_power2_divisions` can set, from
/// below 1 MiB up to 32 GiB and above (as in PyTorch).
pub const ROUNDUP_INTERVALS: usize = 16;

/// Default `fence_interval_us`: a training step's scope asks for a fence at every exit.
/// A fence at every exit (an event record and a query) cost ~2 µs a step on an H100,
/// 0.9% of a 0.25 ms step (BENCHMARKS.md); one a millisecond costs a fraction of that,
/// while memory freed more than a millisecond before a reclaim is still covered.
pub const DEFAULT_FENCE_INTERVAL_US: u64 = 1000;

/// Default `page_chunk_threshold`: growths past a quarter of the device are single pages
/// (`growth::chunk_limit` says why a quarter).
pub const DEFAULT_PAGE_CHUNK_THRESHOLD: f64 = 0.25;

/// The keys [`AllocConfig`] accepts.
pub const KNOWN_KEYS: &[&str] = &[
    "max_split_size_mb",
    "max_non_split_rounding_mb",
    "roundup_power2_divisions",
    "garbage_collection_threshold",
    "expandable_segments",
    "share_across_streams",
    "fence_interval_us",
    "per_process_memory_fraction",
    "memory_limit_mb",
    "max_chunk_size_mb",
    "page_chunk_threshold",
];

/// The caching allocator's settings. See the [module documentation](self) for the keys.
#[derive(Clone, Debug, PartialEq)]
pub struct AllocConfig {
    /// Blocks of at least this many bytes are never split (`usize::MAX`: no limit).
    pub max_split_size: usize,
    /// How much larger than a request an unsplit block above `max_split_size` may be.
    pub max_non_split_rounding: usize,
    /// Divisions per power-of-two interval (index 0: below 1 MiB, then one per doubling).
    pub roundup_power2_divisions: [usize; ROUNDUP_INTERVALS],
    /// Fraction of the limit above which free segments are released before growing.
    pub garbage_collection_threshold: Option<f64>,
    /// Whether to use the backend's virtual memory when it has one.
    pub expandable_segments: bool,
    /// With virtual memory, whether memory freed on one stream serves the others
    /// (one pool for every stream) once the freeing stream's work is seen done
    /// (default `false`: pools per stream, as PyTorch's).
    pub share_across_streams: bool,
    /// Least time between two fences on one stream, in microseconds (0: no limit).
    pub fence_interval_us: u64,
    /// Cap on reserved memory as a fraction of the device's capacity.
    pub per_process_memory_fraction: f64,
    /// Cap on reserved memory in bytes.
    pub memory_limit: Option<usize>,
    /// With virtual memory, the largest physical chunk one growth creates, in bytes
    /// (rounded down to whole 20 MiB pages); `None`: 1/160 of the device or the cap.
    pub max_chunk_size: Option<usize>,
    /// With virtual memory, the fraction of the device (or cap) past which growths are
    /// mapped in single 20 MiB pages (1: never).
    pub page_chunk_threshold: f64,
}

impl Default for AllocConfig {
    fn default() -> Self {
        AllocConfig {
            max_split_size: usize::MAX,
            max_non_split_rounding: LARGE_BUFFER,
            roundup_power2_divisions: [1; ROUNDUP_INTERVALS],
            garbage_collection_threshold: None,
            expandable_segments: true,
            share_across_streams: false,
            fence_interval_us: DEFAULT_FENCE_INTERVAL_US,
            per_process_memory_fraction: 1.0,
            memory_limit: None,
            max_chunk_size: None,
            page_chunk_threshold: DEFAULT_PAGE_CHUNK_THRESHOLD,
        }
    }
}

impl AllocConfig {
    /// Divisions that apply to a request of `size` bytes.
    #[inline]
    pub fn roundup_divisions_for(&self, size: usize) -> usize {
        self.roundup_power2_divisions[roundup_interval(size)]
    }
}

/// The interval index of `size` for `roundup_power2_divisions`: 0 below 2 MiB, then
/// one per doubling, the last one open-ended.
fn roundup_interval(size: usize) -> usize {
    let log = (usize::BITS - 1 - size.max(1).leading_zeros()) as usize;
    log.saturating_sub(20).min(ROUNDUP_INTERVALS - 1)
}

impl fmt::Display for AllocConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.max_split_size != usize::MAX {
            parts.push(format!("max_split_size_mb:{}", self.max_split_size >> 20));
        }
        if self.max_non_split_rounding != LARGE_BUFFER {
            parts.push(format!(
                "max_non_split_rounding_mb:{}",
                self.max_non_split_rounding >> 20
            ));
        }
        if self.roundup_power2_divisions != [1; ROUNDUP_INTERVALS] {
            let list: Vec<String> = self
                .roundup_power2_divisions
                .iter()
                .enumerate()
                .map(|(i, d)| format!("{}:{d}", 1usize << i))
                .collect();
            parts.push(format!("roundup_power2_divisions:[{}]", list.join(",")));
        }
        if let Some(t) = self.garbage_collection_threshold {
            parts.push(format!("garbage_collection_threshold:{t}"));
        }
        parts.push(format!(
            "expandable_segments:{}",
            if self.expandable_segments {
                "True"
            } else {
                "False"
            }
        ));
        if self.share_across_streams {
            parts.push("share_across_streams:True".to_string());
        }
        if self.fence_interval_us != DEFAULT_FENCE_INTERVAL_US {
            parts.push(format!("fence_interval_us:{}", self.fence_interval_us));
        }
        if self.per_process_memory_fraction != 1.0 {
            parts.push(format!(
                "per_process_memory_fraction:{}",
                self.per_process_memory_fraction
            ));
        }
        if let Some(l) = self.memory_limit {
            parts.push(format!("memory_limit_mb:{}", l >> 20));
        }
        if let Some(c) = self.max_chunk_size {
            parts.push(format!("max_chunk_size_mb:{}", c >> 20));
        }
        if self.page_chunk_threshold != DEFAULT_PAGE_CHUNK_THRESHOLD {
            parts.push(format!(
                "page_chunk_threshold:{}",
                self.page_chunk_threshold
            ));
        }
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> ConfigError {
        text.parse::<AllocConfig>().unwrap_err()
    }

    #[test]
    fn defaults_when_empty() {
        assert_eq!("".parse::<AllocConfig>().unwrap(), AllocConfig::default());
        assert_eq!(
            " , ".parse::<AllocConfig>().unwrap(),
            AllocConfig::default()
        );
    }

    #[test]
    fn parses_every_key() {
        let c: AllocConfig = "max_split_size_mb:64, max_non_split_rounding_mb:8,\
            garbage_collection_threshold:0.75,expandable_segments:False,\
            per_process_memory_fraction:0.5,memory_limit_mb:1024,roundup_power2_divisions:8,\
            fence_interval_us:0,share_across_streams:True"
            .parse()
            .unwrap();
        assert_eq!(c.fence_interval_us, 0);
        assert!(c.share_across_streams);
        assert_eq!(c.max_split_size, 64 << 20);
        assert_eq!(c.max_non_split_rounding, 8 << 20);
        assert_eq!(c.garbage_collection_threshold, Some(0.75));
        assert!(!c.expandable_segments);
        assert_eq!(c.per_process_memory_fraction, 0.5);
        assert_eq!(c.memory_limit, Some(1 << 30));
        assert_eq!(c.roundup_power2_divisions, [8; ROUNDUP_INTERVALS]);
    }

    #[test]
    fn division_lists() {
        let c: AllocConfig = "roundup_power2_divisions:[4:2,64:4,>:8]".parse().unwrap();
        assert_eq!(c.roundup_divisions_for(1 << 20), 2);
        assert_eq!(c.roundup_divisions_for(4 << 20), 2);
        assert_eq!(c.roundup_divisions_for(8 << 20), 1);
        assert_eq!(c.roundup_divisions_for(64 << 20), 4);
        assert_eq!(c.roundup_divisions_for(65 << 20), 4);
        assert_eq!(c.roundup_divisions_for(128 << 20), 8);
        assert_eq!(c.roundup_divisions_for(1 << 40), 8);
        assert!(
            err("roundup_power2_divisions:[64:4,4:2]")
                .message
                .contains("must increase")
        );
        assert!(
            err("roundup_power2_divisions:[64:3]")
                .message
                .contains("powers of two")
        );
        assert!(
            err("roundup_power2_divisions:[64:4")
                .message
                .contains("unterminated")
        );
    }

    #[test]
    fn errors_name_the_key_and_help() {
        let e = err("max_split_size:64");
        assert_eq!(e.item, "max_split_size:64");
        assert!(e.message.contains("unknown key `max_split_size`"), "{e}");
        assert!(e.help.contains("did you mean `max_split_size_mb`"), "{e}");
        let e = err("max_split_size_mb:abc");
        assert!(e.message.contains("whole number"), "{e}");
        let e = err("max_split_size_mb:10");
        assert!(e.message.contains("greater than 20"), "{e}");
        let e = err("garbage_collection_threshold:1.5");
        assert!(e.message.contains("between 0 and 1"), "{e}");
        let e = err("expandable_segments:yes");
        assert!(e.help.contains("True"), "{e}");
        let e = err("expandable_segments");
        assert!(e.message.contains("key:value"), "{e}");
        let e = err("memory_limit_mb:1,memory_limit_mb:2");
        assert!(e.message.contains("more than once"), "{e}");
        let e = err("release_lock_on_cudamalloc:True");
        assert!(e.message.contains("PyTorch option"), "{e}");
        let e = err("zzz:1");
        assert!(!e.help.contains("did you mean"), "{e}");
        let e = err("fence_interval_us:-1");
        assert!(e.message.contains("whole number"), "{e}");
        let e = err("reserve_ratio:1.05");
        assert!(e.message.contains("no longer"), "{e}");
        let e = err("fence_interval:5");
        assert!(e.help.contains("did you mean `fence_interval_us`"), "{e}");
        let e = err("max_chunk_size_mb:99999999999999999999");
        assert!(e.message.contains("too large"), "{e}");
        let e = err("max_chunk_size_mb:4");
        assert!(e.message.contains("at least 20"), "{e}");
        assert!(e.help.contains("max_chunk_size_mb:20"), "{e}");
        let e = err("page_chunk_threshold:1.5");
        assert!(e.message.contains("between 0 and 1"), "{e}");
        assert!(e.help.contains("page_chunk_threshold:1"), "{e}");
        let e = err("max_chunk_size:64");
        assert!(e.help.contains("did you mean `max_chunk_size_mb`"), "{e}");
        // A word left out.
        let e = err("max_chunk_mb:64");
        assert!(e.help.contains("did you mean `max_chunk_size_mb`"), "{e}");
        let e = err("max_split_mb:64");
        assert!(e.help.contains("did you mean `max_split_size_mb`"), "{e}");
        // One word alone says too little.
        let e = err("mb:64");
        assert!(!e.help.contains("did you mean"), "{e}");
    }

    #[test]
    fn display_round_trips() {
        let c: AllocConfig = "max_split_size_mb:64,garbage_collection_threshold:0.5,\
            roundup_power2_divisions:[2:2,>:4],memory_limit_mb:7,fence_interval_us:250,\
            share_across_streams:True,max_chunk_size_mb:100,page_chunk_threshold:0.5"
            .parse()
            .unwrap();
        assert_eq!(c.page_chunk_threshold, 0.5);
        assert_eq!(c.fence_interval_us, 250);
        assert_eq!(c.max_chunk_size, Some(100 << 20));
        assert!(c.share_across_streams);
        let again: AllocConfig = c.to_string().parse().unwrap();
        assert_eq!(c, again);
    }
}
