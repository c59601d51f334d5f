//! Each kind of leak, reported with the line that made the tensor: into a static, into
//! an argument, an `Rc` cycle, `mem::forget`; the scope's own site.

use super::support::*;
use super::*;

/// Where this file writes `needle` (see `support::site_in`).
fn site_of(needle: &str) -> String {
    site_in(include_str!("leaks.rs"), file!(), needle)
}

static CACHE: OnceLock<Mutex<Vec<Tensor>>> = OnceLock::new();

// Deliberate: the lint rule that would refuse to compile this is allowed.
#[gpu_scope(name = "leak_static", allow(static_escape))]
fn leak_into_static(dev: &Device) {
    let t = Tensor::zeros(&[16, 4], dev).unwrap();
    CACHE.get_or_init(Default::default).lock().unwrap().push(t);
}

#[gpu_scope(name = "leak_captured", allow(scope_escape))]
fn leak_into_argument(dev: &Device, out: &mut Vec<Tensor>) {
    out.push(Tensor::ones(&[3], dev).unwrap());
}

struct Node {
    _t: Tensor,
    next: std::cell::RefCell<Option<Rc<Node>>>,
}

#[gpu_scope(name = "leak_rc_cycle")]
fn leak_rc_cycle(dev: &Device) {
    let a = Rc::new(Node {
        _t: Tensor::zeros(&[5], dev).unwrap(),
        next: Default::default(),
    });
    let b = Rc::new(Node {
        _t: Tensor::zeros(&[2], dev).unwrap(),
        next: Default::default(),
    });
    *a.next.borrow_mut() = Some(b.clone());
    *b.next.borrow_mut() = Some(a.clone());
}

#[gpu_scope(name = "leak_forget", allow(forget_tensor))]
fn leak_forget(dev: &Device) {
    let t = Tensor::full(&[7], 2.0, dev).unwrap();
    std::mem::forget(t);
}

#[test]
fn static_leak_is_reported_with_its_site() {
    let dev = dev();
    let (_, events) = capture(|| leak_into_static(&dev));
    let leaks = leaks_of(&events, "leak_static");
    assert_eq!(leaks.len(), 1, "{events:?}");
    let e = leaks[0];
    assert_eq!(e.get("site"), site_of("Tensor::zeros(&[16, 4]"));
    assert_eq!(e.get("bytes"), "256");
    assert_eq!(e.get("dtype"), "f32");
    assert_eq!(e.get("shape"), "[16, 4]");
    // The per-scope summary follows.
    let summary = events
        .iter()
        .find(|e| !e.is_tensor() && e.get("scope") == "leak_static")
        .expect("summary");
    assert_eq!((summary.get("leaked"), summary.get("bytes")), ("1", "256"));
}

#[test]
fn captured_vec_leak_is_reported() {
    let dev = dev();
    let mut out = Vec::new();
    let (_, events) = capture(|| leak_into_argument(&dev, &mut out));
    let leaks = leaks_of(&events, "leak_captured");
    assert_eq!(leaks.len(), 1, "{events:?}");
    assert_eq!(leaks[0].get("site"), site_of("Tensor::ones(&[3]"));
    assert_eq!(leaks[0].get("shape"), "[3]");
    // Still alive, and known as leaked from that scope.
    let rec = out[0].track_record().unwrap();
    assert!(
        rec.leaked_from()
            .unwrap()
            .starts_with("`leak_captured` at tests/scopes/leaks.rs:")
    );
}

#[test]
fn rc_cycle_leak_is_reported() {
    let dev = dev();
    let (_, events) = capture(|| leak_rc_cycle(&dev));
    let leaks = leaks_of(&events, "leak_rc_cycle");
    assert_eq!(leaks.len(), 2, "{events:?}");
    assert_eq!(leaks[0].get("site"), site_of("Tensor::zeros(&[5]"));
    assert_eq!(
        (leaks[0].get("bytes"), leaks[0].get("shape")),
        ("20", "[5]")
    );
    assert_eq!((leaks[1].get("bytes"), leaks[1].get("shape")), ("8", "[2]"));
}

#[test]
fn forgotten_tensor_is_reported() {
    let dev = dev();
    let (_, events) = capture(|| leak_forget(&dev));
    let leaks = leaks_of(&events, "leak_forget");
    assert_eq!(leaks.len(), 1, "{events:?}");
    assert_eq!(leaks[0].get("site"), site_of("Tensor::full(&[7]"));
    assert_eq!(leaks[0].get("bytes"), "28");
}

#[gpu_scope(name = "site_check", allow(scope_escape))]
fn site_check(dev: &Device, sink: &mut Vec<Tensor>) {
    sink.push(Tensor::zeros(&[1], dev).unwrap());
}

#[test]
fn the_scope_site_is_the_function_name() {
    let dev = dev();
    let mut sink = Vec::new();
    let (_, events) = capture(|| site_check(&dev, &mut sink));
    let leaks = leaks_of(&events, "site_check");
    assert_eq!(leaks.len(), 1);
    assert_eq!(
        leaks[0].get("scope_site"),
        site_of("site_check(dev: &Device")
    );
}
