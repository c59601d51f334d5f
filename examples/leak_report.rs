//! Makes each kind of leak on purpose inside `#[gpu_scope]` functions and shows what
//! gpuscope reports: one `tracing` warning per leaked tensor (with the line that made
//! it) and one per scope, then every tensor still alive.
//!
//! ```text
//! cargo run --example leak_report
//! ```

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Mutex, OnceLock};

use gpuscope::{Device, ScopeValue, Tensor, TensorError, gpu_scope, keep};

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
    tracing_subscriber::fmt()
        .with_target(true)
        .without_time()
        .init();
    gpuscope::scope::set_tracking(true);
    let dev = Device::host()?;
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
    Ok(())
}
