//! [`snapshot`]: the allocator's segments and blocks, joined with the tracking records
//! of the tensors that live in them.

use std::collections::HashMap;

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
    let mut tensors: HashMap<u64, TrackRecord> = scope::live_records()
        .into_iter()
        .filter(|r| r.device_id() == device.id())
        .map(|r| (r.addr(), r))
        .collect();
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
                    let record = if state == BlockState::Allocated {
                        tensors.remove(&b.addr.0)
                    } else {
                        None
                    };
                    Some(BlockSnapshot {
                        addr: b.addr.0,
                        size: b.size as u64,
                        requested: b.requested as u64,
                        state,
                        site: record.as_ref().map(|r| location_string(r.site())),
                        tensor: record.as_ref().map(tensor_info),
                    })
                })
                .collect(),
        })
        .collect();
    let mut unplaced: Vec<TensorInfo> = tensors.values().map(tensor_info).collect();
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
