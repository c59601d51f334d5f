use super::*;

#[test]
fn events_complete_on_sync_in_manual_mode() {
    let dev = TestBackend::builder().event_mode(EventMode::Manual).build();
    let s = dev.create_stream().unwrap();
    let e = dev.create_event().unwrap();
    assert!(
        dev.query_event(e).unwrap(),
        "a never-recorded event is complete"
    );
    dev.record_event(e, s).unwrap();
    assert!(!dev.query_event(e).unwrap());
    dev.synchronize_stream(StreamId::DEFAULT).unwrap();
    assert!(
        !dev.query_event(e).unwrap(),
        "another stream's sync does not complete it"
    );
    dev.synchronize_stream(s).unwrap();
    assert!(dev.query_event(e).unwrap());
}

#[test]
fn launched_work_completes_with_its_stream_or_a_later_event() {
    let dev = TestBackend::builder()
        .virtual_memory(2 << 20)
        .event_mode(EventMode::Manual)
        .build();
    let s = dev.create_stream().unwrap();
    let a = dev.malloc(4 << 20).unwrap();
    dev.launch(s, a, 1 << 20).unwrap();
    let e = dev.create_event().unwrap();
    dev.record_event(e, s).unwrap();
    dev.launch(s, a.offset(2 << 20), 1 << 20).unwrap();
    dev.synchronize_event(e).unwrap();
    {
        let mut st = dev.state();
        st.check_idle(a.0, a.0 + (2 << 20), "check");
    }
    let late = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        dev.state().check_idle(a.0, a.0 + (4 << 20), "check");
    }));
    assert!(
        late.is_err(),
        "work launched after the event is still in flight"
    );
    dev.complete_stream(s);
    unsafe { dev.free(a, 4 << 20).unwrap() };
}

#[test]
#[should_panic(expected = "still uses")]
fn unmapping_memory_in_use_panics() {
    let dev = TestBackend::builder()
        .virtual_memory(2 << 20)
        .event_mode(EventMode::Manual)
        .build();
    let vm = dev.virtual_memory().unwrap();
    let va = vm.reserve_address(4 << 20).unwrap();
    let c = vm.create_chunk(2 << 20).unwrap();
    unsafe { vm.map(va, 2 << 20, c).unwrap() };
    dev.launch(StreamId::DEFAULT, va.offset(4096), 512).unwrap();
    unsafe { vm.unmap(va, 2 << 20).unwrap() };
}

#[test]
#[should_panic(expected = "not allocated or mapped")]
fn work_on_unmapped_memory_panics() {
    let dev = TestBackend::builder().virtual_memory(2 << 20).build();
    let vm = dev.virtual_memory().unwrap();
    let va = vm.reserve_address(4 << 20).unwrap();
    dev.launch(StreamId::DEFAULT, va, 512).unwrap();
}

#[test]
fn every_nth_allocation_fails() {
    let dev = TestBackend::builder().fail_every(3).build();
    let results: Vec<bool> = (0..6).map(|_| dev.malloc(512).is_ok()).collect();
    assert_eq!(results, [true, true, false, true, true, false]);
    assert_eq!(dev.counters().failed_allocs, 2);
}

#[test]
fn virtual_memory_checks_mappings() {
    let dev = TestBackend::builder().virtual_memory(2 << 20).build();
    let vm = dev.virtual_memory().unwrap();
    let va = vm.reserve_address(8 << 20).unwrap();
    let a = vm.create_chunk(2 << 20).unwrap();
    let b = vm.create_chunk(4 << 20).unwrap();
    unsafe {
        vm.map(va, 2 << 20, a).unwrap();
        vm.map(va.offset(2 << 20), 4 << 20, b).unwrap();
        vm.set_access(va, 6 << 20).unwrap();
        vm.unmap(va, 2 << 20).unwrap();
        vm.unmap(va.offset(2 << 20), 4 << 20).unwrap();
        vm.release_chunk(a, 2 << 20).unwrap();
        vm.release_chunk(b, 4 << 20).unwrap();
        vm.free_address(va, 8 << 20).unwrap();
    }
    assert_eq!(dev.used(), 0);
}

#[test]
#[should_panic(expected = "already mapped")]
fn aliasing_a_chunk_panics() {
    let dev = TestBackend::builder().virtual_memory(2 << 20).build();
    let vm = dev.virtual_memory().unwrap();
    let va = vm.reserve_address(8 << 20).unwrap();
    let a = vm.create_chunk(2 << 20).unwrap();
    unsafe {
        vm.map(va, 2 << 20, a).unwrap();
        vm.map(va.offset(4 << 20), 2 << 20, a).unwrap();
    }
}

#[test]
#[should_panic(expected = "chunks map whole")]
fn mapping_part_of_a_chunk_panics() {
    let dev = TestBackend::builder().virtual_memory(2 << 20).build();
    let vm = dev.virtual_memory().unwrap();
    let va = vm.reserve_address(8 << 20).unwrap();
    let a = vm.create_chunk(4 << 20).unwrap();
    unsafe {
        vm.map(va, 2 << 20, a).unwrap();
    }
}

#[test]
#[should_panic(expected = "overlaps")]
fn overlapping_mappings_panic() {
    let dev = TestBackend::builder().virtual_memory(2 << 20).build();
    let vm = dev.virtual_memory().unwrap();
    let va = vm.reserve_address(8 << 20).unwrap();
    let a = vm.create_chunk(4 << 20).unwrap();
    let b = vm.create_chunk(4 << 20).unwrap();
    unsafe {
        vm.map(va, 4 << 20, a).unwrap();
        vm.map(va.offset(2 << 20), 4 << 20, b).unwrap();
    }
}
