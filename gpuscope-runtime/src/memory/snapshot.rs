//! [`snapshot`]: the allocator's segments and blocks, joined with the tracking records
//! of the tensors that live in them; [`snapshot_all`]: one for each device opened.

use std::collections::HashMap;
use std::panic::Location;

use crate::alloc::{BlockState as AllocBlockState, Pool};
use crate::device::Device;
use crate::record::site::location_string;
use crate::record::{
    BlockSnapshot, BlockState, MemorySnapshot, SNAPSHOT_FORMAT, ScopeInfo, SegmentSnapshot,
    TensorInfo, TrackRecord,
};
use crate::scope;

/// Every segment and block of `device`'s allocator with its state, stream and size, and
/// for the blocks of live tracked tensors the tensor's dtype, shape, creating site and
/// scope; with the allocation history when one is being recorded
/// ([`record_history`](super::record_history)).
///
/// Tensors made while tracking was off are blocks without a tensor (their site is not
/// known). The allocator is locked once, to copy its segments; the tracking records are
/// read without stopping any thread.
pub fn snapshot(device: &Device) -> MemorySnapshot {
    let segments = device.allocator().snapshot();
    let stats = device.allocator().stats();
    // The device's records by address; blocks come in address order, so one merge.
    let mut records: Vec<TrackRecord> = scope::live_records_on(device.id());
    records.retain(|r| r.device_id() == device.id());
    records.sort_unstable_by_key(|r| r.addr());
    let mut records = records.into_iter().peekable();
    let mut unplaced: Vec<TensorInfo> = Vec::new();
    // `file:line:column` of each site, formatted once.
    let mut sites: HashMap<*const Location<'static>, String> = HashMap::new();
    let mut site_string = |r: &TrackRecord| -> String {
        sites
            .entry(r.site() as *const _)
            .or_insert_with(|| location_string(r.site()))
            .clone()
    };
    let segments = segments
        .into_iter()
        .map(|seg| SegmentSnapshot {
            addr: seg.base.0,
            size: seg.size as u64,
            stream: seg.stream.0 as u64,
            pool: match seg.pool {
                Pool::Small => "small",
                Pool::Large => "large",
            }
            .to_string(),
            blocks: seg
                .blocks
                .into_iter()
                .filter_map(|b| {
                    let state = match b.state {
                        AllocBlockState::Allocated => BlockState::Allocated,
                        AllocBlockState::PendingFree => BlockState::PendingFree,
                        AllocBlockState::Free => BlockState::Free,
                        AllocBlockState::Vacant => return None,
                    };
                    // Records below this block's address are in no block.
                    while let Some(r) = records.next_if(|r| r.addr() < b.addr.0) {
                        unplaced.push(tensor_info(&r));
                    }
                    let record = if state == BlockState::Allocated {
                        records.next_if(|r| r.addr() == b.addr.0)
                    } else {
                        None
                    };
                    Some(BlockSnapshot {
                        addr: b.addr.0,
                        size: b.size as u64,
                        requested: b.requested as u64,
                        state,
                        site: record.as_ref().map(&mut site_string),
                        tensor: record.as_ref().map(tensor_info),
                    })
                })
                .collect(),
        })
        .collect();
    unplaced.extend(records.map(|r| tensor_info(&r)));
    unplaced.sort_by_key(|t| t.id);
    MemorySnapshot {
        format: SNAPSHOT_FORMAT.to_string(),
        device: device.description(),
        allocated: stats.allocated_bytes.all.current.max(0) as u64,
        reserved: stats.reserved_bytes.all.current.max(0) as u64,
        segments,
        unplaced,
        history: super::history(device),
    }
}

/// A [`snapshot`] of every device the process has opened and that is still alive
/// ([`Device::opened`]: the host device and each CUDA device once opened, and devices
/// made by [`Device::with_backend`] while a clone of them lives), in the order they
/// were opened; each with its own allocation history when one is being recorded on
/// that device. The devices are taken one after the other, not at one instant.
pub fn snapshot_all() -> Vec<MemorySnapshot> {
    Device::opened().iter().map(snapshot).collect()
}

fn tensor_info(r: &TrackRecord) -> TensorInfo {
    TensorInfo {
        id: r.id(),
        dtype: r.dtype(),
        shape: r.shape().to_vec(),
        bytes: r.bytes() as u64,
        scope: r.owner().as_ref().map(ScopeInfo::from),
        leaked_from: r.leaked_scope().as_ref().map(ScopeInfo::from),
    }
}
