//! Other devices' access to virtual memory: a mapping is accessible only to the devices
//! its `cuMemSetAccess` named, so a peer copy from or into this allocator's memory
//! needs the peer granted access to every chunk mapped now and to every chunk mapped
//! later (PyTorch's expandable segments do the same when peer access is enabled).

use crate::backend::{BackendError, DeviceAddr};

use super::segment::SegmentMemory;
use super::state::AllocState;

impl AllocState {
    /// Grants device `peer` access to every chunk mapped, and has the backend grant it
    /// to every chunk mapped later. Nothing to do without virtual memory (device
    /// allocations are reached through the contexts' peer access) or when `peer` was
    /// granted before. A failure leaves `peer` ungranted: the next call does it again.
    pub(super) fn grant_peer_access(&mut self, peer: usize) -> Result<(), BackendError> {
        if !self.vmm || self.peers.contains(&peer) || peer == self.backend.ordinal() {
            return Ok(());
        }
        let backend = self.backend.clone();
        let vm = backend.virtual_memory().expect("virtual memory backend");
        vm.add_peer(peer)?;
        for seg in self.segments.iter().flatten() {
            let SegmentMemory::Mapped { chunks, .. } = &seg.memory else {
                continue;
            };
            let mut addr = seg.base;
            for &c in chunks {
                let size = self.chunks[c as usize]
                    .as_ref()
                    .expect("a segment's chunk exists")
                    .size;
                self.stats.other.num_set_access += 1;
                // SAFETY: the chunk is mapped at `addr`: a segment's chunks lie back to
                // back from its base.
                unsafe { vm.set_peer_access(DeviceAddr(addr), size, peer)? };
                addr += size as u64;
            }
        }
        self.peers.push(peer);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::alloc::{AllocConfig, CachingAllocator};
    use crate::backend::test::{Call, TestBackend};
    use crate::backend::{Backend as _, StreamId};

    const MIB: usize = 1 << 20;

    fn vmm() -> (Arc<TestBackend>, CachingAllocator) {
        let backend = Arc::new(TestBackend::builder().virtual_memory(2 * MIB).build());
        let alloc = CachingAllocator::new(backend.clone(), AllocConfig::default()).unwrap();
        (backend, alloc)
    }

    #[test]
    fn every_chunk_mapped_before_and_after_is_granted() {
        let (backend, alloc) = vmm();
        let side = backend.create_stream().unwrap();
        // Three arenas (large and small pool of the default stream, large of another),
        // several chunks in one of them.
        let blocks: Vec<_> = [
            (30 * MIB, StreamId::DEFAULT),
            (50 * MIB, StreamId::DEFAULT),
            (1000, StreamId::DEFAULT),
            (40 * MIB, side),
        ]
        .into_iter()
        .map(|(size, stream)| alloc.allocate(size, stream).unwrap())
        .collect();
        let mapped = backend.counters().maps;
        assert!(mapped >= 4, "{mapped} chunks mapped");
        assert_eq!(backend.mappings_without_access(1).len() as u64, mapped);

        alloc.grant_peer_access(1).unwrap();
        assert!(backend.mappings_without_access(1).is_empty());
        assert_eq!(backend.mappings_without_access(2).len() as u64, mapped);
        assert_eq!(
            alloc.stats().num_set_access,
            2 * mapped,
            "one grant per chunk"
        );

        // Growth after the grant: the new chunks are accessible to the peer too.
        let more = alloc.allocate(500 * MIB, StreamId::DEFAULT).unwrap();
        assert!(backend.counters().maps > mapped);
        assert!(backend.mappings_without_access(1).is_empty());

        // A second grant does nothing.
        let calls = backend.calls()[&Call::SetAccess];
        alloc.grant_peer_access(1).unwrap();
        assert_eq!(backend.calls()[&Call::SetAccess], calls);

        // Chunks released and mapped again are granted as they are mapped.
        for b in blocks.into_iter().chain([more]) {
            alloc.free(b).unwrap();
        }
        alloc.empty_cache().unwrap();
        let again = alloc.allocate(64 * MIB, StreamId::DEFAULT).unwrap();
        assert!(backend.mappings_without_access(1).is_empty());
        alloc.free(again).unwrap();
        alloc.check_invariants().unwrap();
    }

    #[test]
    fn a_failed_grant_is_an_error_and_the_next_call_finishes_it() {
        let (backend, alloc) = vmm();
        let blocks: Vec<_> = (0..3)
            .map(|_| alloc.allocate(30 * MIB, StreamId::DEFAULT).unwrap())
            .collect();
        let mapped = backend.counters().maps;
        assert!(mapped >= 2);
        backend.fail_call(Call::SetAccess, 2);
        let err = alloc.grant_peer_access(1).unwrap_err();
        assert!(err.to_string().contains("injected fault"), "{err}");
        assert!(!backend.mappings_without_access(1).is_empty());
        alloc.grant_peer_access(1).unwrap();
        assert!(backend.mappings_without_access(1).is_empty());
        for b in blocks {
            alloc.free(b).unwrap();
        }
        alloc.check_invariants().unwrap();
    }

    #[test]
    fn without_virtual_memory_or_for_its_own_device_nothing_is_called() {
        let backend = Arc::new(TestBackend::builder().virtual_memory(2 * MIB).build());
        let config = AllocConfig {
            expandable_segments: false,
            ..AllocConfig::default()
        };
        let plain = CachingAllocator::new(backend.clone(), config).unwrap();
        let b = plain.allocate(30 * MIB, StreamId::DEFAULT).unwrap();
        plain.grant_peer_access(1).unwrap();
        assert_eq!(backend.calls().get(&Call::SetAccess), None);
        plain.free(b).unwrap();

        let (backend, alloc) = vmm();
        let b = alloc.allocate(30 * MIB, StreamId::DEFAULT).unwrap();
        let calls = backend.calls()[&Call::SetAccess];
        alloc.grant_peer_access(0).unwrap(); // the test backend is device 0
        assert_eq!(backend.calls()[&Call::SetAccess], calls);
        alloc.free(b).unwrap();
    }
}
