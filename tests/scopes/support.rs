//! Helpers: capturing `tracing` events, finding where a test file writes something,
//! a tiny executor.

use super::*;

/// One `tracing` event of target `gpuscope::leak`, its fields as text.
#[derive(Clone, Debug)]
pub(crate) struct Event {
    fields: BTreeMap<String, String>,
}

impl Event {
    pub(crate) fn get(&self, field: &str) -> &str {
        self.fields.get(field).map(String::as_str).unwrap_or("")
    }

    /// A per-tensor leak event (not the per-scope summary).
    pub(crate) fn is_tensor(&self) -> bool {
        self.fields.contains_key("site")
    }
}

pub(crate) struct FieldsVisitor<'a>(&'a mut BTreeMap<String, String>);

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
pub(crate) struct Capture(Arc<Mutex<Vec<Event>>>);

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
pub(crate) fn capture<R>(f: impl FnOnce() -> R) -> (R, Vec<Event>) {
    let layer = Capture::default();
    let events = layer.0.clone();
    let subscriber = tracing_subscriber::registry().with(layer);
    let out = tracing::subscriber::with_default(subscriber, f);
    let events = events.lock().unwrap().clone();
    (out, events)
}

/// The per-tensor leak events of the scope named `scope`.
pub(crate) fn leaks_of<'a>(events: &'a [Event], scope: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| e.is_tensor() && e.get("scope") == scope)
        .collect()
}

/// `FILE:LINE:COL` of the one place in `source` (the text of test file `file`) where
/// `needle` is written outside a `site_of(` call (1-based line and column, as
/// `#[track_caller]` and `column!()` count). Each test file wraps it as
/// `site_of(needle)` with its own `include_str!` and `file!()`.
pub(crate) fn site_in(source: &str, file: &str, needle: &str) -> String {
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
    format!("{file}:{}:{}", found[0].0, found[0].1)
}

pub(crate) fn dev() -> Device {
    set_tracking(true);
    Device::host().unwrap()
}

/// Polls `f` to completion on this thread.
pub(crate) fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// Pending once, then ready: an `.await` that really suspends.
pub(crate) struct YieldOnce(bool);

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

pub(crate) fn yield_now() -> YieldOnce {
    YieldOnce(false)
}
