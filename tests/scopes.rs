//! Runtime behaviour of `#[gpu_scope]`, `#[no_grad]` and `#[derive(ScopeValue)]` on the
//! host device: what escapes, what is reported (read back from `tracing` through a test
//! layer), nesting, threads, panics, async functions and grad mode.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

use gpuscope::scope::{current_scope, scope_depth, set_tracking};
use gpuscope::{
    Device, ScopeValue, Tensor, TensorError, gpu_scope, is_grad_enabled, keep, no_grad,
};
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context as LayerContext, SubscriberExt};

// ---------------------------------------------------------------------------------------
// Helpers: capturing `tracing` events, finding columns, a tiny executor.

/// One `tracing` event of target `gpuscope::leak`, its fields as text.
#[derive(Clone, Debug)]
struct Event {
    fields: BTreeMap<String, String>,
}

impl Event {
    fn get(&self, field: &str) -> &str {
        self.fields.get(field).map(String::as_str).unwrap_or("")
    }

    /// A per-tensor leak event (not the per-scope summary).
    fn is_tensor(&self) -> bool {
        self.fields.contains_key("site")
    }
}

struct FieldsVisitor<'a>(&'a mut BTreeMap<String, String>);

impl Visit for FieldsVisitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Event>>>);

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: LayerContext<'_, S>) {
        if event.metadata().target() != "gpuscope::leak" {
            return;
        }
        let mut fields = BTreeMap::new();
        event.record(&mut FieldsVisitor(&mut fields));
        self.0.lock().unwrap().push(Event { fields });
    }
}

/// Runs `f` with a subscriber that records this thread's leak events.
fn capture<R>(f: impl FnOnce() -> R) -> (R, Vec<Event>) {
    let layer = Capture::default();
    let events = layer.0.clone();
    let subscriber = tracing_subscriber::registry().with(layer);
    let out = tracing::subscriber::with_default(subscriber, f);
    let events = events.lock().unwrap().clone();
    (out, events)
}

/// The per-tensor leak events of the scope named `scope`.
fn leaks_of<'a>(events: &'a [Event], scope: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| e.is_tensor() && e.get("scope") == scope)
        .collect()
}

/// `tests/scopes.rs:LINE:COL` of the one place in this file's code where `needle` is
/// written (1-based line and column, as `#[track_caller]` and `column!()` count).
fn site_of(needle: &str) -> String {
    let source = include_str!("scopes.rs");
    let found: Vec<(usize, usize)> = source
        .lines()
        .enumerate()
        .filter(|(_, text)| !text.contains("site_of("))
        .filter_map(|(i, text)| text.find(needle).map(|col| (i + 1, col + 1)))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "`{needle}` should be written once: {found:?}"
    );
    format!("{}:{}:{}", file!(), found[0].0, found[0].1)
}

fn dev() -> Device {
    set_tracking(true);
    Device::host().unwrap()
}

/// Polls `f` to completion on this thread.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// Pending once, then ready: an `.await` that really suspends.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

fn yield_now() -> YieldOnce {
    YieldOnce(false)
}

// ---------------------------------------------------------------------------------------
// Escape by return.

#[derive(ScopeValue)]
struct Output {
    logits: Tensor,
    extra: Option<Vec<Tensor>>,
    #[scope_value(skip)]
    label: String,
}

#[derive(ScopeValue)]
struct Pair<T>(T, Tensor);

#[derive(ScopeValue)]
enum Either {
    One(Tensor),
    Two { a: Tensor, b: Tensor },
    Nothing,
}

#[gpu_scope(leaks = "deny")]
fn ret_tensor(dev: &Device) -> Tensor {
    Tensor::zeros(&[8], dev).unwrap()
}

#[gpu_scope(leaks = "deny")]
fn ret_tuple(dev: &Device) -> (Tensor, usize, Tensor) {
    (
        Tensor::zeros(&[1], dev).unwrap(),
        3,
        Tensor::ones(&[2], dev).unwrap(),
    )
}

#[gpu_scope(leaks = "deny")]
fn ret_option(dev: &Device, some: bool) -> Option<Tensor> {
    some.then(|| Tensor::zeros(&[3], dev).unwrap())
}

#[gpu_scope(leaks = "deny")]
fn ret_result(dev: &Device) -> Result<Tensor, TensorError> {
    let t = Tensor::zeros(&[4], dev)?;
    Ok(t)
}

#[gpu_scope(leaks = "deny")]
fn ret_vec(dev: &Device, n: usize) -> Vec<Tensor> {
    (0..n)
        .map(|i| Tensor::zeros(&[i + 1], dev).unwrap())
        .collect()
}

#[gpu_scope(leaks = "deny")]
fn ret_derived(dev: &Device) -> Output {
    let logits = Tensor::randn(&[2, 2], dev).unwrap();
    let extra = Some(vec![Tensor::zeros(&[1], dev).unwrap()]);
    Output {
        logits,
        extra,
        label: "x".into(),
    }
}

#[gpu_scope(leaks = "deny")]
fn ret_generic_pair(dev: &Device) -> Pair<Vec<Tensor>> {
    Pair(
        vec![Tensor::zeros(&[1], dev).unwrap()],
        Tensor::ones(&[1], dev).unwrap(),
    )
}

#[gpu_scope(leaks = "deny")]
fn ret_enum(dev: &Device, which: u8) -> Either {
    match which {
        0 => Either::One(Tensor::zeros(&[1], dev).unwrap()),
        1 => Either::Two {
            a: Tensor::zeros(&[1], dev).unwrap(),
            b: Tensor::zeros(&[2], dev).unwrap(),
        },
        _ => Either::Nothing,
    }
}

#[gpu_scope(leaks = "deny")]
fn early_return(dev: &Device, early: bool) -> Tensor {
    let a = Tensor::zeros(&[1], dev).unwrap();
    if early {
        return a;
    }
    let b = Tensor::ones(&[2], dev).unwrap();
    drop(a);
    b
}

#[gpu_scope(leaks = "deny")]
fn returns_from_loop(dev: &Device) -> Tensor {
    let mut i = 0;
    loop {
        let t = Tensor::zeros(&[i + 1], dev).unwrap();
        if i == 2 {
            return t;
        }
        i += 1;
    }
}

#[gpu_scope(leaks = "deny")]
fn closure_returns_are_their_own(dev: &Device) -> Tensor {
    // The closure's `return` is not the function's: the closure's value is dropped.
    #[allow(clippy::needless_return)]
    let make = || {
        return Tensor::ones(&[5], dev).unwrap();
    };
    let _ = make();
    Tensor::zeros(&[1], dev).unwrap()
}

#[test]
fn escape_by_return_is_not_reported() {
    let dev = dev();
    let (_, events) = capture(|| {
        assert_eq!(ret_tensor(&dev).shape(), &[8]);
        let (a, n, b) = ret_tuple(&dev);
        assert_eq!((a.shape(), n, b.shape()), (&[1][..], 3, &[2][..]));
        assert!(ret_option(&dev, true).is_some());
        assert!(ret_option(&dev, false).is_none());
        assert_eq!(ret_result(&dev).unwrap().shape(), &[4]);
        assert_eq!(ret_vec(&dev, 3).len(), 3);
        let out = ret_derived(&dev);
        assert_eq!(
            (
                out.logits.shape(),
                out.extra.as_ref().map(Vec::len),
                out.label.as_str()
            ),
            (&[2, 2][..], Some(1), "x")
        );
        let pair = ret_generic_pair(&dev);
        assert_eq!((pair.0.len(), pair.1.shape()), (1, &[1][..]));
        for which in 0..3 {
            let _ = ret_enum(&dev, which);
        }
        assert_eq!(early_return(&dev, true).shape(), &[1]);
        assert_eq!(early_return(&dev, false).shape(), &[2]);
        assert_eq!(returns_from_loop(&dev).shape(), &[3]);
        assert_eq!(closure_returns_are_their_own(&dev).shape(), &[1]);
    });
    assert!(events.is_empty(), "no leak expected: {events:?}");
    assert_eq!(scope_depth(), 0);
}

/// An error type that is not a `ScopeValue`.
#[derive(Debug)]
struct PlainError;

/// A type holding a tensor that is not a `ScopeValue`.
struct Holder(Tensor);

#[gpu_scope(name = "rung_ok", leaks = "deny")]
fn rung_ok(dev: &Device, fail: bool) -> Result<Tensor, PlainError> {
    if fail {
        return Err(PlainError);
    }
    Ok(Tensor::zeros(&[12], dev).unwrap())
}

#[gpu_scope(name = "rung_none")]
fn rung_none(dev: &Device) -> Holder {
    Holder(Tensor::zeros(&[14], dev).unwrap())
}

#[gpu_scope(name = "async_rung_ok", leaks = "deny")]
async fn async_rung_ok(dev: &Device) -> Result<Tensor, PlainError> {
    yield_now().await;
    Ok(Tensor::zeros(&[15], dev).unwrap())
}

#[gpu_scope(name = "async_rung_none")]
async fn async_rung_none(dev: &Device) -> Holder {
    yield_now().await;
    Holder(Tensor::zeros(&[17], dev).unwrap())
}

#[test]
fn escape_dispatch_by_return_type() {
    let dev = dev();
    // A `Result` whose `Ok` type is a `ScopeValue` and whose error type is not: the `Ok`
    // value escapes.
    let (r, events) = capture(|| (rung_ok(&dev, false), rung_ok(&dev, true)));
    assert_eq!(r.0.unwrap().shape(), &[12]);
    assert!(r.1.is_err());
    assert!(events.is_empty(), "{events:?}");
    let (r, events) = capture(|| block_on(async_rung_ok(&dev)));
    assert_eq!(r.unwrap().shape(), &[15]);
    assert!(events.is_empty(), "{events:?}");
    // Any other type is let through untouched: the tensor inside cannot be found, and is
    // reported.
    let (h, events) = capture(|| rung_none(&dev));
    assert_eq!(h.0.shape(), &[14]);
    assert_eq!(leaks_of(&events, "rung_none").len(), 1, "{events:?}");
    let (h, events) = capture(|| block_on(async_rung_none(&dev)));
    assert_eq!(h.0.shape(), &[17]);
    assert_eq!(leaks_of(&events, "async_rung_none").len(), 1, "{events:?}");
}

#[gpu_scope(name = "keeper", leaks = "deny")]
fn keeps(dev: &Device, params: &mut Vec<Tensor>) -> usize {
    let w = Tensor::randn(&[4, 4], dev).unwrap();
    keep(&w);
    params.push(w);
    params.len()
}

#[test]
fn kept_tensors_are_not_reported() {
    let dev = dev();
    let mut params = Vec::new();
    let (n, events) = capture(|| keeps(&dev, &mut params));
    assert_eq!(n, 1);
    assert!(events.is_empty(), "{events:?}");
    assert!(
        gpuscope::report_live()
            .iter()
            .any(|l| l.record.site().line() == params[0].track_record().unwrap().site().line())
    );
}

// ---------------------------------------------------------------------------------------
// Each kind of leak, reported with the line that made the tensor.

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
            .starts_with("`leak_captured` at tests/scopes.rs:")
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

// ---------------------------------------------------------------------------------------
// Nesting.

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
        message.contains("scope `denier` at tests/scopes.rs:"),
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

// ---------------------------------------------------------------------------------------
// Async functions.

struct Loader {
    dev: Device,
}

impl Loader {
    #[gpu_scope(name = "load", allow(scope_escape))]
    async fn load(&self, sink: &mut Vec<Tensor>) -> Result<Tensor, TensorError> {
        let a = Tensor::zeros(&[1], &self.dev)?;
        yield_now().await;
        // Made after an await: still owned by this scope.
        assert_eq!(current_scope().as_deref(), Some("load"));
        let leaked = Tensor::ones(&[6], &self.dev)?;
        sink.push(leaked);
        yield_now().await;
        drop(a);
        let out = Tensor::zeros(&[2], &self.dev)?;
        Ok(out)
    }

    #[gpu_scope(name = "load_forever", allow(scope_escape))]
    async fn never_finishes(&self, sink: &mut Vec<Tensor>) -> Tensor {
        sink.push(Tensor::zeros(&[3], &self.dev).unwrap());
        std::future::pending::<()>().await;
        unreachable!()
    }

    /// What `#[async_trait]` generates for an `async fn` in a trait.
    #[gpu_scope(name = "boxed_load", leaks = "deny")]
    fn boxed_load(&self) -> Pin<Box<dyn Future<Output = Tensor> + '_>> {
        Box::pin(async move {
            yield_now().await;
            assert_eq!(current_scope().as_deref(), Some("boxed_load"));
            Tensor::zeros(&[4], &self.dev).unwrap()
        })
    }
}

/// A return type that is not a `ScopeValue`: let through untouched.
struct Opaque(u32);

#[gpu_scope(name = "async_opaque", leaks = "deny")]
async fn async_opaque(dev: Device) -> Opaque {
    yield_now().await;
    let t = Tensor::zeros(&[1], &dev).unwrap();
    Opaque(t.numel() as u32)
}

#[test]
fn async_scope_stays_open_across_awaits() {
    let dev = dev();
    let loader = Loader { dev: dev.clone() };
    let mut sink = Vec::new();
    let (t, events) = capture(|| {
        let mut fut = std::pin::pin!(loader.load(&mut sink));
        let mut cx = Context::from_waker(Waker::noop());
        let mut polls = 0;
        loop {
            polls += 1;
            if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                break v;
            }
            // Between polls, the scope is put aside: this thread sees none.
            assert_eq!(scope_depth(), 0);
            assert_eq!(current_scope(), None);
            assert!(polls < 10);
        }
    });
    assert_eq!(t.unwrap().shape(), &[2]);
    let leaks = leaks_of(&events, "load");
    assert_eq!(leaks.len(), 1, "{events:?}");
    assert_eq!(leaks[0].get("shape"), "[6]");
    assert_eq!(scope_depth(), 0);

    let (t, events) = capture(|| block_on(loader.boxed_load()));
    assert_eq!(t.shape(), &[4]);
    assert!(events.is_empty(), "{events:?}");

    let (o, events) = capture(|| block_on(async_opaque(dev.clone())));
    assert_eq!(o.0, 1);
    assert!(events.is_empty(), "{events:?}");
}

#[test]
fn dropping_an_async_scope_closes_it() {
    let dev = dev();
    let loader = Loader { dev };
    let mut sink = Vec::new();
    let (_, events) = capture(|| {
        let mut fut = Box::pin(loader.never_finishes(&mut sink));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert_eq!(scope_depth(), 0);
        drop(fut); // closes the scope: its leak is reported now
    });
    let leaks = leaks_of(&events, "load_forever");
    assert_eq!(leaks.len(), 1, "{events:?}");
    assert_eq!(leaks[0].get("shape"), "[3]");
    assert_eq!(scope_depth(), 0);
}

#[gpu_scope(name = "async_escape", leaks = "deny")]
async fn async_escape(dev: &Device) -> (Tensor, Vec<Tensor>) {
    yield_now().await;
    let a = Tensor::zeros(&[1], dev).unwrap();
    if a.numel() == 1 {
        return (a, vec![Tensor::ones(&[2], dev).unwrap()]);
    }
    (a, Vec::new())
}

#[test]
fn async_return_escapes() {
    let dev = dev();
    let ((a, v), events) = capture(|| block_on(async_escape(&dev)));
    assert_eq!((a.shape(), v.len()), (&[1][..], 1));
    assert!(events.is_empty(), "{events:?}");
}

impl Loader {
    /// A returned future with `device` and `sync`: evaluated at the first poll, inside
    /// the scope.
    #[gpu_scope(name = "boxed_on_device", leaks = "deny", sync, device = &self.dev)]
    fn boxed_on_device(&self) -> Pin<Box<dyn Future<Output = Tensor> + '_>> {
        Box::pin(async move {
            yield_now().await;
            assert_eq!(current_scope().as_deref(), Some("boxed_on_device"));
            Tensor::zeros(&[19], &self.dev).unwrap()
        })
    }
}

#[test]
fn returned_future_with_device() {
    let loader = Loader { dev: dev() };
    let fut = loader.boxed_on_device();
    // Building the future opens nothing.
    assert_eq!(scope_depth(), 0);
    let (t, events) = capture(|| block_on(fut));
    assert_eq!(t.shape(), &[19]);
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(scope_depth(), 0);
}

fn assert_send<T: Send>(_: &T) {}

#[gpu_scope(device = dev, sync)]
async fn send_future(dev: Device) -> Tensor {
    yield_now().await;
    Tensor::zeros(&[1], &dev).unwrap()
}

#[test]
fn async_scopes_stay_send() {
    let dev = dev();
    let fut = send_future(dev);
    assert_send(&fut);
    let t = std::thread::spawn(move || block_on(fut)).join().unwrap();
    assert_eq!(t.shape(), &[1]);
}

// ---------------------------------------------------------------------------------------
// Arguments.

struct Model {
    device: Device,
    steps: u32,
}

impl Model {
    #[gpu_scope(name = "model_step", leaks = "deny", sync, device = &self.device)]
    fn step(&mut self) -> Tensor {
        self.steps += 1; // `device` borrowed `self` only while the scope opened
        Tensor::zeros(&[self.steps as usize], &self.device).unwrap()
    }
}

#[test]
fn all_arguments() {
    let dev = dev();
    let mut m = Model {
        device: dev,
        steps: 0,
    };
    let (t, events) = capture(|| {
        m.step();
        m.step()
    });
    assert_eq!((t.shape(), m.steps), (&[2][..], 2));
    assert!(events.is_empty(), "{events:?}");
}

#[gpu_scope(sync, device = gpuscope::Device::host().unwrap())]
fn sync_without_tracking(dev: &Device) -> f32 {
    let t = Tensor::ones(&[2], dev).unwrap();
    t.to_vec::<f32>().unwrap()[0]
}

#[test]
fn sync_scope_runs_with_tracking_off() {
    let dev = Device::host().unwrap();
    // Tracking is process-wide: only check that the function runs and returns.
    assert_eq!(sync_without_tracking(&dev), 1.0);
}

// ---------------------------------------------------------------------------------------
// Documented limits.

#[gpu_scope(name = "err_holds_tensor")]
fn err_holds_tensor(dev: &Device) -> Result<(), Tensor> {
    let t = Tensor::zeros(&[13], dev).unwrap();
    let r: Result<(), Tensor> = Err(t);
    r?;
    Ok(())
}

#[test]
fn question_mark_does_not_escape() {
    let dev = dev();
    let (r, events) = capture(|| err_holds_tensor(&dev));
    assert_eq!(r.unwrap_err().shape(), &[13]);
    // `?` returns are not rewritten: the tensor in the `Err` is reported.
    assert_eq!(leaks_of(&events, "err_holds_tensor").len(), 1, "{events:?}");
}

// ---------------------------------------------------------------------------------------
// Grad mode.

#[no_grad]
fn grad_inside() -> bool {
    is_grad_enabled()
}

#[no_grad]
fn grad_early(early: bool) -> bool {
    if early {
        return is_grad_enabled();
    }
    is_grad_enabled()
}

#[no_grad]
fn grad_panics() {
    assert!(!is_grad_enabled());
    panic!("no_grad panic");
}

#[no_grad]
async fn grad_async() -> (bool, bool) {
    let before = is_grad_enabled();
    yield_now().await;
    (before, is_grad_enabled())
}

#[gpu_scope(leaks = "deny")]
#[no_grad]
fn scoped_no_grad(dev: &Device) -> (Tensor, bool) {
    (Tensor::zeros(&[1], dev).unwrap(), is_grad_enabled())
}

#[test]
fn no_grad_restores_grad_mode() {
    let dev = dev();
    assert!(is_grad_enabled());
    assert!(!grad_inside());
    assert!(is_grad_enabled());
    assert!(!grad_early(true));
    assert!(is_grad_enabled());
    assert!(!grad_early(false));
    assert!(is_grad_enabled());
    assert!(std::panic::catch_unwind(grad_panics).is_err());
    assert!(is_grad_enabled());
    // Nested in a region with grad off: restored to off.
    no_grad(|| {
        assert!(!grad_inside());
        assert!(!is_grad_enabled());
    });

    // Async: off during each poll, back on between polls.
    let mut fut = std::pin::pin!(grad_async());
    let mut cx = Context::from_waker(Waker::noop());
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    assert!(is_grad_enabled());
    assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready((false, false)));
    assert!(is_grad_enabled());

    let ((t, grad), events) = capture(|| scoped_no_grad(&dev));
    assert_eq!((t.shape(), grad), (&[1][..], false));
    assert!(events.is_empty());
    assert!(is_grad_enabled());
}
