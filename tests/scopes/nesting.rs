//! Nested scopes, scopes on several threads, and panics inside scopes.

use super::support::*;
use super::*;

/// Where this file writes `needle` (see `support::site_in`).
fn site_of(needle: &str) -> String {
    site_in(include_str!("nesting.rs"), file!(), needle)
}

#[gpu_scope(name = "inner", leaks = "deny")]
fn inner(dev: &Device) -> Tensor {
    Tensor::zeros(&[32], dev).unwrap()
}

#[gpu_scope(name = "outer")]
fn outer(dev: &Device, sink: &mut Vec<Tensor>) -> usize {
    let t = inner(dev); // returned to this scope: not reported by `inner`
    assert_eq!(current_scope().as_deref(), Some("outer"));
    sink.push(t); // ... but leaked from this one
    sink.len()
}

#[gpu_scope(name = "inner_leaky", allow(scope_escape))]
fn inner_leaky(dev: &Device, sink: &mut Vec<Tensor>) -> Tensor {
    sink.push(Tensor::ones(&[2], dev).unwrap());
    Tensor::zeros(&[1], dev).unwrap()
}

#[gpu_scope(name = "outer_of_leaky")]
fn outer_of_leaky(dev: &Device, sink: &mut Vec<Tensor>) -> Tensor {
    assert_eq!(scope_depth(), 1);
    inner_leaky(dev, sink)
}

#[test]
fn nested_scopes() {
    let dev = dev();
    let mut sink = Vec::new();
    let (_, events) = capture(|| outer(&dev, &mut sink));
    assert!(leaks_of(&events, "inner").is_empty(), "{events:?}");
    let outer_leaks = leaks_of(&events, "outer");
    assert_eq!(outer_leaks.len(), 1, "{events:?}");
    assert_eq!(outer_leaks[0].get("shape"), "[32]");

    // Leaked from the inner scope: reported once, by the inner scope only.
    let mut sink = Vec::new();
    let (t, events) = capture(|| outer_of_leaky(&dev, &mut sink));
    assert_eq!(t.shape(), &[1]);
    assert_eq!(leaks_of(&events, "inner_leaky").len(), 1, "{events:?}");
    assert!(leaks_of(&events, "outer_of_leaky").is_empty(), "{events:?}");
    assert_eq!(events.iter().filter(|e| e.is_tensor()).count(), 1);
    assert_eq!(scope_depth(), 0);
}

// ---------------------------------------------------------------------------------------
// Threads.

#[gpu_scope(name = "threaded", allow(scope_escape))]
fn threaded(dev: &Device, i: usize, sink: &mut Vec<Tensor>) -> Tensor {
    for _ in 0..10 {
        let _tmp = Tensor::zeros(&[64], dev).unwrap();
        std::thread::yield_now();
    }
    sink.push(Tensor::zeros(&[i + 1], dev).unwrap());
    assert_eq!(current_scope().as_deref(), Some("threaded"));
    Tensor::ones(&[i + 1], dev).unwrap()
}

#[test]
fn scopes_on_several_threads() {
    let dev = dev();
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let dev = dev.clone();
            std::thread::spawn(move || {
                let mut sink = Vec::new();
                let (t, events) = capture(|| threaded(&dev, i, &mut sink));
                assert_eq!(scope_depth(), 0);
                let leaks = leaks_of(&events, "threaded");
                assert_eq!(leaks.len(), 1, "thread {i}: {events:?}");
                assert_eq!(leaks[0].get("shape"), format!("[{}]", i + 1));
                t.shape().to_vec()
            })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.join().unwrap(), vec![i + 1]);
    }
}

// ---------------------------------------------------------------------------------------
// Panics.

static PANIC_SINK: OnceLock<Mutex<Vec<Tensor>>> = OnceLock::new();

#[gpu_scope(name = "panicky", leaks = "deny", allow(static_escape))]
fn panicky(dev: &Device) -> Tensor {
    let t = Tensor::zeros(&[9], dev).unwrap();
    PANIC_SINK
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .push(t);
    panic!("boom");
}

#[test]
fn panic_inside_a_scope() {
    let dev = dev();
    let (result, events) =
        capture(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| panicky(&dev))));
    let payload = result.expect_err("it panicked");
    // The user's panic, not a `deny` panic during unwinding.
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
    assert_eq!(scope_depth(), 0);
    let leaks = leaks_of(&events, "panicky");
    assert_eq!(leaks.len(), 1, "{events:?}");
    assert_eq!(leaks[0].get("shape"), "[9]");
}

#[gpu_scope(name = "denier", leaks = "deny", allow(scope_escape))]
fn denier(dev: &Device, sink: &mut Vec<Tensor>) {
    sink.push(Tensor::zeros(&[11], dev).unwrap());
}

#[test]
fn deny_panics_with_the_site() {
    let dev = dev();
    let mut sink = Vec::new();
    let (result, events) = capture(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| denier(&dev, &mut sink)))
    });
    let payload = result.expect_err("deny panics");
    let message = payload
        .downcast_ref::<String>()
        .expect("a formatted message");
    assert!(
        message.contains("scope `denier` at tests/scopes/nesting.rs:"),
        "{message}"
    );
    assert!(
        message.contains(&format!("created at {}", site_of("Tensor::zeros(&[11]"))),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "scope `denier` at {}",
            site_of("denier(dev: &Device")
        )),
        "{message}"
    );
    assert!(message.contains("leak policy `deny`"), "{message}");
    assert_eq!(leaks_of(&events, "denier").len(), 1);
    assert_eq!(scope_depth(), 0);
}
