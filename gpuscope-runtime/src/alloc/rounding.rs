//! Size rules: how requests are rounded, which pool serves them, how large a new
//! segment is, and when a block is split. The constants are PyTorch's, so sizes and
//! statistics read the same as `torch.cuda.memory_stats()`.

use super::config::AllocConfig;

/// Every block is a multiple of this many bytes (and at least this large).
pub const MIN_BLOCK_SIZE: usize = 512;
/// Requests of at most this many bytes are served from the small pool.
pub const SMALL_SIZE: usize = 1 << 20;
/// Segment size of the small pool.
pub const SMALL_BUFFER: usize = 2 << 20;
/// Large requests below this size get a [`LARGE_BUFFER`] segment.
pub const MIN_LARGE_ALLOC: usize = 10 << 20;
/// Segment size for large requests below [`MIN_LARGE_ALLOC`].
pub const LARGE_BUFFER: usize = 20 << 20;
/// Larger segments are rounded up to a multiple of this.
pub const ROUND_LARGE: usize = 2 << 20;
/// The largest request the allocator tries to serve (64 PiB, past any device): larger
/// ones fail at once with an out-of-memory error, so that no size arithmetic can
/// overflow.
pub const MAX_ALLOCATION: usize = 1 << 56;

/// Which pool a block belongs to.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Pool {
    /// Requests of at most 1 MiB, carved from 2 MiB segments.
    Small = 0,
    /// Everything larger.
    Large = 1,
}

impl Pool {
    /// The pool that serves a request of `rounded` bytes.
    #[inline]
    pub fn for_size(rounded: usize) -> Pool {
        if rounded <= SMALL_SIZE {
            Pool::Small
        } else {
            Pool::Large
        }
    }

    /// `0` for small, `1` for large: an index into per-pool tables.
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    /// `"small"` or `"large"`.
    pub fn name(self) -> &'static str {
        match self {
            Pool::Small => "small",
            Pool::Large => "large",
        }
    }
}

/// Rounds a request up to a block size: a multiple of 512 bytes, or a power-of-two
/// division when `roundup_power2_divisions` asks for one.
#[inline]
pub fn round_size(size: usize, config: &AllocConfig) -> usize {
    if size < MIN_BLOCK_SIZE {
        return MIN_BLOCK_SIZE;
    }
    let divisions = config.roundup_divisions_for(size);
    if divisions > 1 && size > MIN_BLOCK_SIZE * divisions {
        round_to_power2_division(size, divisions)
    } else {
        size.div_ceil(MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE
    }
}

/// Rounds `size` up to the next of `divisions` equal steps between the power of two
/// below it and the one above (e.g. 1200 MiB with 4 divisions: 1280 MiB).
fn round_to_power2_division(size: usize, divisions: usize) -> usize {
    if size.is_power_of_two() {
        return size;
    }
    let floor = 1usize << (usize::BITS - 1 - size.leading_zeros());
    let step = floor >> divisions.ilog2();
    if step == 0 {
        return floor << 1;
    }
    size.div_ceil(step) * step
}

/// Size of the segment made for a request of `rounded` bytes that nothing cached fits.
#[inline]
pub fn segment_size(rounded: usize) -> usize {
    if rounded <= SMALL_SIZE {
        SMALL_BUFFER
    } else if rounded < MIN_LARGE_ALLOC {
        LARGE_BUFFER
    } else {
        rounded.div_ceil(ROUND_LARGE) * ROUND_LARGE
    }
}

/// Whether a free block of `block_size` serving `rounded` bytes is split, leaving the
/// rest free. Small-pool blocks split whenever a minimum block remains. Large-pool blocks
/// never split above `max_split_size`; otherwise, with plain segments (PyTorch's rule)
/// only when more than [`SMALL_SIZE`] remains, since a smaller remainder could serve no
/// large request and its segment can never be returned in part; with virtual memory
/// whenever a minimum block remains, since the remainder rejoins its neighbours and the
/// pool grows in place anyway, so it is not counted as allocated.
#[inline]
pub fn should_split(
    pool: Pool,
    block_size: usize,
    rounded: usize,
    config: &AllocConfig,
    paged: bool,
) -> bool {
    let remaining = block_size - rounded;
    match pool {
        Pool::Small => remaining >= MIN_BLOCK_SIZE,
        // A paged block is split whatever its size: the rest rejoins its neighbours, and
        // a merged free run past `max_split_size` must not go whole to a small request.
        Pool::Large if paged => remaining >= MIN_BLOCK_SIZE,
        Pool::Large => block_size < config.max_split_size && remaining > SMALL_SIZE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_like_pytorch() {
        let c = AllocConfig::default();
        assert_eq!(round_size(1, &c), 512);
        assert_eq!(round_size(512, &c), 512);
        assert_eq!(round_size(513, &c), 1024);
        assert_eq!(round_size(3072, &c), 3072);
        assert_eq!(Pool::for_size(1 << 20), Pool::Small);
        assert_eq!(Pool::for_size((1 << 20) + 512), Pool::Large);
        assert_eq!(segment_size(4096), 2 << 20);
        assert_eq!(segment_size(3 << 20), 20 << 20);
        assert_eq!(segment_size((10 << 20) + 512), 12 << 20);
    }

    #[test]
    fn power2_divisions() {
        assert_eq!(round_to_power2_division(1200 << 20, 4), 1280 << 20);
        assert_eq!(round_to_power2_division(1025, 4), 1280);
        assert_eq!(round_to_power2_division(1 << 30, 8), 1 << 30);
        let c: AllocConfig = "roundup_power2_divisions:4".parse().unwrap();
        assert_eq!(round_size(1200 << 20, &c), 1280 << 20);
        assert_eq!(round_size(1500, &c), 1536);
    }

    #[test]
    fn splitting() {
        let c = AllocConfig::default();
        assert!(should_split(Pool::Small, 2 << 20, 512, &c, false));
        assert!(!should_split(Pool::Small, 1024, 1024, &c, false));
        assert!(!should_split(Pool::Large, 3 << 20, 2 << 20, &c, false));
        assert!(should_split(Pool::Large, 3 << 20, 2 << 20, &c, true));
        assert!(should_split(Pool::Large, 20 << 20, 2 << 20, &c, false));
        let c: AllocConfig = "max_split_size_mb:40".parse().unwrap();
        assert!(!should_split(Pool::Large, 60 << 20, 2 << 20, &c, false));
        // Pages split whatever the size (the rest rejoins its neighbours).
        assert!(should_split(Pool::Large, 60 << 20, 2 << 20, &c, true));
    }
}
