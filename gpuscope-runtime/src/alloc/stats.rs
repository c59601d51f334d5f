//! Allocator statistics, with the names and meanings of PyTorch's
//! `torch.cuda.memory_stats()`.
//!
//! Each [`Stat`] has a current value, its peak since the last
//! [`reset_peak_stats`](crate::alloc::CachingAllocator::reset_peak_stats), and the
//! accumulated increases (`allocated`) and decreases (`freed`). Each [`StatArray`] holds
//! one stat for all pools together and one per pool.

use super::rounding::Pool;

/// One statistic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// The value now.
    pub current: i64,
    /// The highest value since the last peak reset.
    pub peak: i64,
    /// Sum of all increases since the last accumulated reset.
    pub allocated: i64,
    /// Sum of all decreases since the last accumulated reset.
    pub freed: i64,
}

impl Stat {
    #[inline]
    fn add(&mut self, amount: i64) {
        self.current += amount;
        if self.current > self.peak {
            self.peak = self.current;
        }
        self.allocated += amount;
    }

    #[inline]
    fn sub(&mut self, amount: i64) {
        self.current -= amount;
        self.freed += amount;
    }
}

/// A statistic for all pools together and for each pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatArray {
    /// Both pools.
    pub all: Stat,
    /// The small pool (requests up to 1 MiB).
    pub small_pool: Stat,
    /// The large pool.
    pub large_pool: Stat,
}

impl StatArray {
    /// The stat of one pool.
    pub fn pool(&self, pool: Pool) -> &Stat {
        match pool {
            Pool::Small => &self.small_pool,
            Pool::Large => &self.large_pool,
        }
    }

    /// Increases the stat of `pool` and of all pools.
    #[inline]
    pub(crate) fn add(&mut self, pool: Pool, amount: usize) {
        let amount = amount as i64;
        self.all.add(amount);
        match pool {
            Pool::Small => self.small_pool.add(amount),
            Pool::Large => self.large_pool.add(amount),
        }
    }

    /// Decreases the stat of `pool` and of all pools.
    #[inline]
    pub(crate) fn sub(&mut self, pool: Pool, amount: usize) {
        let amount = amount as i64;
        self.all.sub(amount);
        match pool {
            Pool::Small => self.small_pool.sub(amount),
            Pool::Large => self.large_pool.sub(amount),
        }
    }

    /// Increases only the all-pools stat (memory held outside either pool).
    #[inline]
    pub(crate) fn add_unpooled(&mut self, amount: usize) {
        self.all.add(amount as i64);
    }

    /// Decreases only the all-pools stat.
    #[inline]
    pub(crate) fn sub_unpooled(&mut self, amount: usize) {
        self.all.sub(amount as i64);
    }

    fn reset_peak(&mut self) {
        for s in [&mut self.all, &mut self.small_pool, &mut self.large_pool] {
            s.peak = s.current;
        }
    }

    fn reset_accumulated(&mut self) {
        for s in [&mut self.all, &mut self.small_pool, &mut self.large_pool] {
            s.allocated = 0;
            s.freed = 0;
        }
    }
}

/// Everything the allocator counts. Field names are PyTorch's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemoryStats {
    /// Number of allocated blocks (handed out and not freed).
    pub allocation: StatArray,
    /// Number of segments (memory reserved from the device in one piece).
    pub segment: StatArray,
    /// Number of active blocks: allocated, or freed but waiting for another stream.
    pub active: StatArray,
    /// Number of free blocks that are pieces of a split segment (they cannot be
    /// returned to the device on their own).
    pub inactive_split: StatArray,
    /// Bytes in allocated blocks (sizes after rounding).
    pub allocated_bytes: StatArray,
    /// Bytes reserved from the device (segments and held physical chunks).
    pub reserved_bytes: StatArray,
    /// Bytes in active blocks.
    pub active_bytes: StatArray,
    /// Bytes in inactive split blocks.
    pub inactive_split_bytes: StatArray,
    /// Bytes asked for by callers (before rounding).
    pub requested_bytes: StatArray,
    /// Allocations that failed once and succeeded after cached memory was released.
    pub num_alloc_retries: u64,
    /// Allocations that failed with out-of-memory.
    pub num_ooms: u64,
    /// Times the allocator waited for all outstanding stream events (only on the
    /// out-of-memory path and in `empty_cache`).
    pub num_sync_all_streams: u64,
    /// Device allocations: successful `cudaMalloc` calls, or with virtual memory
    /// successful `cuMemCreate` calls (one physical chunk each).
    pub num_device_alloc: u64,
    /// Device frees: `cudaFree` calls, or with virtual memory `cuMemRelease` calls.
    pub num_device_free: u64,
    /// Blocks allocated at or above `max_split_size`.
    pub oversize_allocations: Stat,
    /// Segments at or above `max_split_size`.
    pub oversize_segments: Stat,
    /// The `max_split_size` in effect (bytes; `-1` when unlimited).
    pub max_split_size: i64,
    /// `cuMemMap` calls: physical chunks mapped into address ranges (virtual memory).
    pub num_device_map: u64,
    /// `cuMemUnmap` calls (virtual memory; only when memory goes back to the device).
    pub num_device_unmap: u64,
    /// `cuMemSetAccess` calls (virtual memory; one per mapped chunk).
    pub num_set_access: u64,
    /// `cuMemAddressReserve` calls: address ranges reserved (virtual memory).
    pub num_address_reserve: u64,
    /// Times one stream was synchronised (`cuStreamSynchronize`) before its free memory
    /// was unmapped or freed (no fence covered the memory).
    pub num_stream_syncs: u64,
    /// Event synchronisations (`cuEventSynchronize`): waits for a stream's fence before
    /// its free memory went back, and waits for cross-stream frees on the
    /// out-of-memory path and in `empty_cache`.
    pub num_event_syncs: u64,
    /// Events recorded (`cuEventRecord`): frees of blocks used on other streams
    /// (`record_stream`), one per stream still busy for the frees since the last
    /// allocation, and fences.
    pub num_event_records: u64,
    /// Events queried (`cuEventQuery`), never blocking: pending cross-stream frees
    /// polled on `allocate`, and fences polled before memory goes back.
    pub num_event_queries: u64,
    /// Streams queried (`cuStreamQuery`), never blocking: on `allocate`, once per
    /// stream that blocks freed since the last allocation were used on (an idle stream
    /// gives them back without an event), and the queries of `num_sharing_queries`.
    pub num_stream_queries: u64,
    /// Of `num_stream_queries`, those asking whether a stream's work before a free is
    /// done, so that its memory may serve another stream (`share_across_streams`): at
    /// most once per stream in an allocation, and on a free next to such memory.
    pub num_sharing_queries: u64,
    /// Fences recorded on streams (`record_fence`, at scope exit).
    pub num_fences: u64,
    /// Times the allocator waited for a fence's event (rather than the whole stream)
    /// before free memory of the stream was unmapped or freed.
    pub num_fence_waits: u64,
}

/// The driver calls an allocator made, by kind: what [`MemoryStats`] counts, in one
/// value that subtracts (calls made between two readings) and sums.
///
/// ```
/// use gpuscope_runtime::alloc::stats::{DriverCalls, MemoryStats};
/// let before = MemoryStats::default().driver_calls();
/// let after = MemoryStats { num_device_map: 3, num_set_access: 3, ..Default::default() }.driver_calls();
/// let d = after - before;
/// assert_eq!((d.maps, d.set_access, d.total()), (3, 3, 6));
/// assert!(!d.is_zero());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriverCalls {
    /// `cudaMalloc` or `cuMemCreate`.
    pub allocs: u64,
    /// `cudaFree` or `cuMemRelease`.
    pub frees: u64,
    /// `cuMemMap`.
    pub maps: u64,
    /// `cuMemUnmap`.
    pub unmaps: u64,
    /// `cuMemSetAccess`.
    pub set_access: u64,
    /// `cuMemAddressReserve`.
    pub address_reserves: u64,
    /// `cuStreamSynchronize`.
    pub stream_syncs: u64,
    /// `cuEventSynchronize`.
    pub event_syncs: u64,
    /// `cuEventRecord`.
    pub event_records: u64,
    /// `cuEventQuery`.
    pub event_queries: u64,
    /// `cuStreamQuery`.
    pub stream_queries: u64,
}

impl DriverCalls {
    /// Each kind with its name, in a fixed order (for tables and JSON).
    pub fn named(&self) -> [(&'static str, u64); 11] {
        [
            ("allocs", self.allocs),
            ("frees", self.frees),
            ("maps", self.maps),
            ("unmaps", self.unmaps),
            ("set_access", self.set_access),
            ("address_reserves", self.address_reserves),
            ("stream_syncs", self.stream_syncs),
            ("event_syncs", self.event_syncs),
            ("event_records", self.event_records),
            ("event_queries", self.event_queries),
            ("stream_queries", self.stream_queries),
        ]
    }

    /// All calls together.
    pub fn total(&self) -> u64 {
        self.named().iter().map(|(_, n)| n).sum()
    }

    /// Whether no call was made.
    pub fn is_zero(&self) -> bool {
        self.total() == 0
    }

    /// The calls that change memory or wait: allocations, frees, maps, unmaps, access
    /// changes, reservations and synchronisations (event records and event and stream
    /// queries left out).
    pub fn memory_and_waits(&self) -> u64 {
        self.allocs
            + self.frees
            + self.maps
            + self.unmaps
            + self.set_access
            + self.address_reserves
            + self.stream_syncs
            + self.event_syncs
    }
}

impl std::ops::Sub for DriverCalls {
    type Output = DriverCalls;
    fn sub(self, o: DriverCalls) -> DriverCalls {
        DriverCalls {
            allocs: self.allocs - o.allocs,
            frees: self.frees - o.frees,
            maps: self.maps - o.maps,
            unmaps: self.unmaps - o.unmaps,
            set_access: self.set_access - o.set_access,
            address_reserves: self.address_reserves - o.address_reserves,
            stream_syncs: self.stream_syncs - o.stream_syncs,
            event_syncs: self.event_syncs - o.event_syncs,
            event_records: self.event_records - o.event_records,
            event_queries: self.event_queries - o.event_queries,
            stream_queries: self.stream_queries - o.stream_queries,
        }
    }
}

impl std::ops::Add for DriverCalls {
    type Output = DriverCalls;
    fn add(self, o: DriverCalls) -> DriverCalls {
        DriverCalls {
            allocs: self.allocs + o.allocs,
            frees: self.frees + o.frees,
            maps: self.maps + o.maps,
            unmaps: self.unmaps + o.unmaps,
            set_access: self.set_access + o.set_access,
            address_reserves: self.address_reserves + o.address_reserves,
            stream_syncs: self.stream_syncs + o.stream_syncs,
            event_syncs: self.event_syncs + o.event_syncs,
            event_records: self.event_records + o.event_records,
            event_queries: self.event_queries + o.event_queries,
            stream_queries: self.stream_queries + o.stream_queries,
        }
    }
}

impl std::fmt::Display for DriverCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .named()
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        f.write_str(&parts.join(", "))
    }
}

impl MemoryStats {
    /// The driver calls counted so far.
    pub fn driver_calls(&self) -> DriverCalls {
        DriverCalls {
            allocs: self.num_device_alloc,
            frees: self.num_device_free,
            maps: self.num_device_map,
            unmaps: self.num_device_unmap,
            set_access: self.num_set_access,
            address_reserves: self.num_address_reserve,
            stream_syncs: self.num_stream_syncs,
            event_syncs: self.num_event_syncs,
            event_records: self.num_event_records,
            event_queries: self.num_event_queries,
            stream_queries: self.num_stream_queries,
        }
    }

    /// Sets every peak to its current value.
    pub(crate) fn reset_peak(&mut self) {
        for a in self.arrays_mut() {
            a.reset_peak();
        }
        self.oversize_allocations.peak = self.oversize_allocations.current;
        self.oversize_segments.peak = self.oversize_segments.current;
    }

    /// Zeroes accumulated counts and event counters.
    pub(crate) fn reset_accumulated(&mut self) {
        for a in self.arrays_mut() {
            a.reset_accumulated();
        }
        for s in [&mut self.oversize_allocations, &mut self.oversize_segments] {
            s.allocated = 0;
            s.freed = 0;
        }
        self.num_alloc_retries = 0;
        self.num_ooms = 0;
        self.num_sync_all_streams = 0;
        self.num_device_alloc = 0;
        self.num_device_free = 0;
        self.num_device_map = 0;
        self.num_device_unmap = 0;
        self.num_set_access = 0;
        self.num_address_reserve = 0;
        self.num_stream_syncs = 0;
        self.num_event_syncs = 0;
        self.num_event_records = 0;
        self.num_event_queries = 0;
        self.num_stream_queries = 0;
        self.num_sharing_queries = 0;
        self.num_fences = 0;
        self.num_fence_waits = 0;
    }

    /// Every stat array with its PyTorch name (`allocation`, `segment`, ...,
    /// `requested_bytes`), in PyTorch's order.
    ///
    /// ```
    /// use gpuscope_runtime::alloc::MemoryStats;
    ///
    /// let stats = MemoryStats::default();
    /// let names: Vec<_> = stats.named_arrays().iter().map(|(n, _)| *n).collect();
    /// assert_eq!(names[0], "allocation");
    /// assert!(names.contains(&"reserved_bytes"));
    /// ```
    pub fn named_arrays(&self) -> [(&'static str, &StatArray); 9] {
        [
            ("allocation", &self.allocation),
            ("segment", &self.segment),
            ("active", &self.active),
            ("inactive_split", &self.inactive_split),
            ("allocated_bytes", &self.allocated_bytes),
            ("reserved_bytes", &self.reserved_bytes),
            ("active_bytes", &self.active_bytes),
            ("inactive_split_bytes", &self.inactive_split_bytes),
            ("requested_bytes", &self.requested_bytes),
        ]
    }

    fn arrays_mut(&mut self) -> [&mut StatArray; 9] {
        [
            &mut self.allocation,
            &mut self.segment,
            &mut self.active,
            &mut self.inactive_split,
            &mut self.allocated_bytes,
            &mut self.reserved_bytes,
            &mut self.active_bytes,
            &mut self.inactive_split_bytes,
            &mut self.requested_bytes,
        ]
    }

    /// Every statistic as a flat `(name, value)` list with PyTorch's key names, e.g.
    /// `allocated_bytes.all.peak` or `num_device_alloc`.
    pub fn to_flat(&self) -> Vec<(String, i64)> {
        let mut out = Vec::new();
        let arrays = self.named_arrays();
        let stat = |out: &mut Vec<(String, i64)>, prefix: &str, s: &Stat| {
            for (k, v) in [
                ("current", s.current),
                ("peak", s.peak),
                ("allocated", s.allocated),
                ("freed", s.freed),
            ] {
                out.push((format!("{prefix}.{k}"), v));
            }
        };
        for (name, a) in arrays {
            for (pool, s) in [
                ("all", &a.all),
                ("small_pool", &a.small_pool),
                ("large_pool", &a.large_pool),
            ] {
                stat(&mut out, &format!("{name}.{pool}"), s);
            }
        }
        stat(&mut out, "oversize_allocations", &self.oversize_allocations);
        stat(&mut out, "oversize_segments", &self.oversize_segments);
        for (k, v) in [
            ("num_alloc_retries", self.num_alloc_retries),
            ("num_ooms", self.num_ooms),
            ("num_sync_all_streams", self.num_sync_all_streams),
            ("num_device_alloc", self.num_device_alloc),
            ("num_device_free", self.num_device_free),
            ("num_device_map", self.num_device_map),
            ("num_device_unmap", self.num_device_unmap),
            ("num_set_access", self.num_set_access),
            ("num_address_reserve", self.num_address_reserve),
            ("num_stream_syncs", self.num_stream_syncs),
            ("num_event_syncs", self.num_event_syncs),
            ("num_event_records", self.num_event_records),
            ("num_event_queries", self.num_event_queries),
            ("num_stream_queries", self.num_stream_queries),
            ("num_sharing_queries", self.num_sharing_queries),
            ("num_fences", self.num_fences),
            ("num_fence_waits", self.num_fence_waits),
        ] {
            out.push((k.to_string(), v as i64));
        }
        out.push(("max_split_size".to_string(), self.max_split_size));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peaks_and_accumulation() {
        let mut a = StatArray::default();
        a.add(Pool::Small, 10);
        a.add(Pool::Large, 5);
        a.sub(Pool::Small, 10);
        assert_eq!(a.all.current, 5);
        assert_eq!(a.all.peak, 15);
        assert_eq!(a.small_pool.peak, 10);
        assert_eq!(a.all.allocated, 15);
        assert_eq!(a.all.freed, 10);
        let mut s = MemoryStats {
            allocated_bytes: a,
            num_device_alloc: 3,
            num_fences: 2,
            num_fence_waits: 1,
            ..Default::default()
        };
        s.reset_peak();
        assert_eq!(s.allocated_bytes.all.peak, 5);
        s.reset_accumulated();
        assert_eq!(s.allocated_bytes.all.allocated, 0);
        assert_eq!(s.num_device_alloc, 0);
        assert_eq!((s.num_fences, s.num_fence_waits), (0, 0));
        assert_eq!(s.allocated_bytes.all.current, 5);
        let flat = s.to_flat();
        assert!(flat.contains(&("allocated_bytes.all.current".to_string(), 5)));
        assert!(flat.iter().any(|(k, _)| k == "num_sync_all_streams"));
        for key in [
            "num_stream_syncs",
            "num_fences",
            "num_fence_waits",
            "num_set_access",
            "num_event_syncs",
        ] {
            assert!(flat.iter().any(|(k, _)| k == key), "{key} missing");
        }
    }
}
