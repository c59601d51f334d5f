//! The test backend's virtual memory: address ranges, chunks and mappings, checked as
//! the CUDA driver would check them (a chunk moves only whole, mappings never overlap).

use super::*;

impl VirtualMemory for TestBackend {
    fn granularity(&self) -> usize {
        self.granularity.unwrap_or(2 << 20)
    }

    fn reserve_address(&self, size: usize) -> Result<DeviceAddr, BackendError> {
        let mut st = self.state();
        st.faults.enter(Call::ReserveAddress)?;
        let addr = st.fresh_range(size);
        st.reservations.insert(addr, size);
        Ok(DeviceAddr(addr))
    }

    unsafe fn free_address(&self, addr: DeviceAddr, size: usize) -> Result<(), BackendError> {
        let mut st = self.state();
        assert_eq!(
            st.reservations.remove(&addr.0),
            Some(size),
            "test backend: free_address({addr}, {size}) is not one reservation"
        );
        let inside = st.mappings.range(addr.0..addr.0 + size as u64).next();
        assert!(
            inside.is_none(),
            "test backend: free_address({addr}) with memory still mapped in it"
        );
        Ok(())
    }

    fn create_chunk(&self, size: usize) -> Result<PhysHandle, BackendError> {
        let g = self.granularity();
        assert!(
            size > 0 && size % g == 0,
            "test backend: chunk size {size} is not a multiple of {g}"
        );
        let mut st = self.state();
        st.faults.enter(Call::Allocate)?;
        st.admit(size, self.capacity)?;
        st.next_chunk += 1;
        let h = st.next_chunk;
        st.chunks.insert(h, size);
        Ok(PhysHandle(h))
    }

    unsafe fn release_chunk(&self, chunk: PhysHandle, size: usize) -> Result<(), BackendError> {
        let mut st = self.state();
        st.faults.enter(Call::Free)?;
        assert!(
            !st.mapped_chunks.contains(&chunk.0),
            "test backend: release of chunk {chunk:?} while it is mapped"
        );
        assert_eq!(
            st.chunks.remove(&chunk.0),
            Some(size),
            "test backend: release of unknown chunk {chunk:?}"
        );
        st.used -= size;
        st.counters.device_frees += 1;
        Ok(())
    }

    unsafe fn map(
        &self,
        addr: DeviceAddr,
        size: usize,
        chunk: PhysHandle,
    ) -> Result<(), BackendError> {
        let g = self.granularity();
        let mut st = self.state();
        st.faults.enter(Call::Map)?;
        let chunk_size = *st
            .chunks
            .get(&chunk.0)
            .unwrap_or_else(|| panic!("test backend: map of unknown chunk {chunk:?}"));
        assert!(
            addr.0 % g as u64 == 0,
            "test backend: map at {addr} is not aligned to {g}"
        );
        assert_eq!(
            size, chunk_size,
            "test backend: map of {size} bytes of {chunk:?}, which has {chunk_size}: chunks map whole"
        );
        assert!(
            st.mapped_chunks.insert(chunk.0),
            "test backend: chunk {chunk:?} is already mapped"
        );
        let (start, end) = (addr.0, addr.0 + size as u64);
        let inside = st
            .reservations
            .range(..=start)
            .next_back()
            .is_some_and(|(&r, &rs)| end <= r + rs as u64);
        assert!(
            inside,
            "test backend: map at {addr} (+{size}) outside any reservation"
        );
        if let Some((&m, &(ms, _))) = st.mappings.range(..end).next_back() {
            assert!(
                m + ms as u64 <= start,
                "test backend: map at {addr} overlaps the mapping at {m:#x}"
            );
        }
        st.mappings.insert(start, (size, chunk.0));
        st.counters.maps += 1;
        Ok(())
    }

    unsafe fn set_access(&self, addr: DeviceAddr, size: usize) -> Result<(), BackendError> {
        let mut st = self.state();
        st.faults.enter(Call::SetAccess)?;
        let peers = st.peers.clone();
        for m in st.mappings_in(addr.0, size, "set_access") {
            st.peer_access.extend(peers.iter().map(|&p| (m, p)));
        }
        Ok(())
    }

    fn add_peer(&self, peer: usize) -> Result<bool, BackendError> {
        let mut st = self.state();
        if st.peers.contains(&peer) {
            return Ok(false);
        }
        st.peers.push(peer);
        Ok(true)
    }

    unsafe fn set_peer_access(
        &self,
        addr: DeviceAddr,
        size: usize,
        peer: usize,
    ) -> Result<(), BackendError> {
        let mut st = self.state();
        st.faults.enter(Call::SetAccess)?;
        for m in st.mappings_in(addr.0, size, "set_peer_access") {
            st.peer_access.insert((m, peer));
        }
        Ok(())
    }

    unsafe fn unmap(&self, addr: DeviceAddr, size: usize) -> Result<(), BackendError> {
        let mut st = self.state();
        st.faults.enter(Call::Unmap)?;
        st.check_idle(addr.0, addr.0 + size as u64, "unmap");
        let Some((ms, chunk)) = st.mappings.remove(&addr.0) else {
            panic!("test backend: unmap of {addr}, where nothing is mapped");
        };
        assert_eq!(
            ms, size,
            "test backend: unmap of {addr} with size {size}, mapped {ms}"
        );
        st.mapped_chunks.remove(&chunk);
        st.peer_access.retain(|&(m, _)| m != addr.0);
        st.counters.unmaps += 1;
        Ok(())
    }
}

impl State {
    /// The mappings that tile `addr..addr+size` exactly, by address; panics, naming
    /// `call`, when the range is not fully mapped or ends inside a mapping.
    fn mappings_in(&self, addr: u64, size: usize, call: &str) -> Vec<u64> {
        let (mut cur, end, mut found) = (addr, addr + size as u64, Vec::new());
        while cur < end {
            match self.mappings.get(&cur) {
                Some(&(ms, _)) => {
                    found.push(cur);
                    cur += ms as u64;
                }
                None => {
                    panic!("test backend: {call} over {addr:#x} (+{size}) with {cur:#x} unmapped")
                }
            }
        }
        assert_eq!(cur, end, "test backend: {call} ends inside a mapping");
        found
    }
}

impl TestBackend {
    /// The mappings (by address) that device `peer` may not access: mapped before
    /// `peer` was added with `add_peer` and not granted since.
    pub fn mappings_without_access(&self, peer: usize) -> Vec<u64> {
        let st = self.state();
        st.mappings
            .keys()
            .filter(|&&m| !st.peer_access.contains(&(m, peer)))
            .copied()
            .collect()
    }
}
