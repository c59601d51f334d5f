//! Makes each kind of leak on purpose inside `#[gpu_scope]` functions and shows what
//! gpuscope reports. With no `tracing` subscriber (as in most programs), each leak is
//! written to stderr, rustc-like, with the line that made the tensor, and at exit a
//! summary groups the tensors still alive by site. With `--tracing`, a subscriber gets
//! the same reports as structured events (one per leaked tensor, one per scope). With
//! `--page memory.html`, the memory viewer page shows every allocation and the leaked
//! tensors in red.
//!
//! ```text
//! cargo run --example leak_report
//! cargo run --example leak_report -- --tracing
//! cargo run --example leak_report -- --page memory.html
//! ```

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Mutex, OnceLock};

use gpuscope::{Device, ScopeValue, Tensor, TensorError, gpu_scope, keep, memory};

/// A cache that outlives every scope.
static CACHE: OnceLock<Mutex<Vec<Tensor>>> = OnceLock::new();

/// What a step returns: escapes to the caller, never reported.
#[derive(ScopeValue)]
struct StepOutput {
    loss: Tensor,
    #[scope_value(skip)]
    step: usize,
}

/// Leak 1: a tensor stored in a static. (The `static_escape` lint rule refuses this at
/// compile time unless allowed.)
#[gpu_scope(name = "fill_cache", allow(static_escape))]
fn fill_cache(dev: &Device) -> Result<(), TensorError> {
    let embedding = Tensor::randn(&[1024, 64], dev)?;
    CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .push(embedding);
    Ok(())
}

/// Leak 2: a tensor pushed into a `&mut Vec` the caller owns (the lint says so too).
#[gpu_scope(allow(scope_escape))]
fn collect_activations(dev: &Device, history: &mut Vec<Tensor>) -> Result<StepOutput, TensorError> {
    let activation = Tensor::ones(&[256, 256], dev)?;
    history.push(activation.clone()); // outlives the scope
    let loss = Tensor::zeros(&[1], dev)?; // returned: fine
    Ok(StepOutput {
        loss,
        step: history.len(),
    })
}

struct Node {
    _value: Tensor,
    next: RefCell<Option<Rc<Node>>>,
}

/// Leak 3: two tensors kept alive by an `Rc` cycle.
#[gpu_scope(name = "graph")]
fn build_cycle(dev: &Device) -> Result<(), TensorError> {
    let a = Rc::new(Node {
        _value: Tensor::zeros(&[128], dev)?,
        next: RefCell::new(None),
    });
    let b = Rc::new(Node {
        _value: Tensor::zeros(&[32, 32], dev)?,
        next: RefCell::new(Some(a.clone())),
    });
    *a.next.borrow_mut() = Some(b);
    Ok(())
}

/// Leak 4: `mem::forget`. (The `forget_tensor` lint rule refuses this at compile time
/// unless allowed.)
#[gpu_scope(allow(forget_tensor))]
fn forget_buffer(dev: &Device) -> Result<(), TensorError> {
    let scratch = Tensor::full(&[4096], 0.5, dev)?;
    std::mem::forget(scratch);
    Ok(())
}

/// Not a leak: kept on purpose with `keep`.
#[gpu_scope(leaks = "deny")]
fn init_params(dev: &Device, params: &mut Vec<Tensor>) -> Result<(), TensorError> {
    let w = Tensor::randn(&[64, 64], dev)?;
    keep(&w);
    params.push(w);
    Ok(())
}

/// Nested scopes: the inner one returns its tensor to the outer one, which leaks it;
/// it is reported once, by `epoch`.
#[gpu_scope(name = "epoch")]
fn epoch(dev: &Device, history: &mut Vec<Tensor>) -> Result<f64, TensorError> {
    let out = collect_activations(dev, history)?;
    history.push(out.loss.clone());
    Ok(out.step as f64)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--tracing") {
        tracing_subscriber::fmt()
            .with_target(true)
            .without_time()
            .init();
    }
    let page = args
        .iter()
        .position(|a| a == "--page")
        .map(|i| args.get(i + 1).cloned().ok_or("--page needs a path"))
        .transpose()?;
    gpuscope::scope::set_tracking(true);
    let dev = Device::host()?;
    if page.is_some() {
        memory::record_history(&dev, 100_000);
    }
    let mut history = Vec::new();
    let mut params = Vec::new();

    println!("== leaks, as the scopes close:");
    fill_cache(&dev)?;
    collect_activations(&dev, &mut history)?;
    build_cycle(&dev)?;
    forget_buffer(&dev)?;
    init_params(&dev, &mut params)?;
    epoch(&dev, &mut history)?;

    println!("\n== every tensor still alive (gpuscope::report_live):");
    for live in gpuscope::report_live() {
        println!("  {live}");
    }
    if let Some(page) = page {
        memory::viewer::write_page(&memory::snapshot(&dev), page.as_ref(), "leak_report")?;
        println!("\n== memory viewer: {page}");
    }
    // The history and params are still alive here; at exit, what a static or a leak
    // still holds is summed up on stderr (without a subscriber).
    drop((history, params));
    Ok(())
}
