//! `item_in_hot_loop`'s tests of reads that loops in other files of the crate repeat
//! (`callgraph/crate_table.rs`, `package.rs`): each test lints a small package's files
//! together, as `gpuscope lint` does.

use super::RULE;
use crate::testing::{package_findings, package_hits};

fn hits(files: &[(&str, &str)]) -> Vec<(String, usize)> {
    package_hits(RULE, files)
}

fn at(path: &str, line: usize) -> (String, usize) {
    (path.to_owned(), line)
}

const DQN: &str = r#"use candle_core::{Tensor, Var};
use candle_core::backprop::GradStore;

fn clip_gradients(grads: &GradStore, vars: &[Var]) -> candle_core::Result<f64> {
    let mut total = 0.0;
    for var in vars {
        if let Some(g) = grads.get(var.as_tensor()) {
            total += g.sqr()?.sum_all()?.to_scalar::<f32>()? as f64;
        }
    }
    Ok(total)
}

pub struct DqnAgent {
    vars: Vec<Var>,
}

impl DqnAgent {
    pub fn new() -> Self {
        DqnAgent { vars: Vec::new() }
    }

    pub fn train_step(&mut self, loss: &Tensor) -> candle_core::Result<f32> {
        let grads = loss.backward()?;
        clip_gradients(&grads, &self.vars)?;
        loss.to_scalar::<f32>()
    }
}
"#;

#[test]
fn a_read_in_a_helper_of_another_file_fires_at_the_read_naming_the_call() {
    let main = r#"use kungfu::dqn::DqnAgent;

fn main() {
    let mut agent = DqnAgent::new();
    while running() {
        loop {
            agent.train_step(&next_loss()).unwrap();
        }
    }
}
"#;
    let files = [
        ("src/lib.rs", "pub mod dqn;\n"),
        ("src/dqn.rs", DQN),
        ("src/main.rs", main),
    ];
    assert_eq!(hits(&files), [at("src/dqn.rs", 8), at("src/dqn.rs", 26)]);
    let found = package_findings(RULE, &files);
    assert_eq!(
        found[1].1.message,
        "`loss.to_scalar()` runs in an inner loop through `agent.train_step(..)` (src/main.rs:7): it copies to the host and waits for the device on every iteration"
    );
    assert_eq!(
        found[0].1.note.as_deref(),
        Some(
            "`clip_gradients(..)` at line 25 (in `train_step`) calls this function, and `train_step` is itself called inside 2 loops that repeat it (through `agent.train_step(..)` at src/main.rs:7)"
        )
    );
    // Called once per run: nothing.
    let once = "use kungfu::dqn::DqnAgent;\nfn main() {\n    DqnAgent::new().train_step(&next_loss()).unwrap();\n}\n";
    let files = [
        ("src/lib.rs", "pub mod dqn;\n"),
        ("src/dqn.rs", DQN),
        ("src/main.rs", once),
    ];
    assert_eq!(hits(&files), []);
    // The file alone (another package's files, or none) finds nothing either.
    assert_eq!(hits(&[("src/dqn.rs", DQN)]), []);
}

#[test]
fn free_functions_resolve_through_uses_globs_and_module_paths_not_by_name_alone() {
    let metrics = r#"use candle_core::Tensor;
pub fn accuracy(t: &Tensor) -> f32 {
    t.to_scalar::<f32>().unwrap()
}
pub fn precision(t: &Tensor) -> f32 {
    t.to_scalar::<f32>().unwrap()
}
pub fn mse(t: &Tensor) -> f32 {
    t.to_scalar::<f32>().unwrap()
}
pub fn unused(t: &Tensor) -> f32 {
    t.to_scalar::<f32>().unwrap()
}
"#;
    let eval = r#"use candle_core::Tensor;
pub fn recall(t: &Tensor) -> f32 {
    t.to_scalar::<f32>().unwrap()
}
pub fn unused(t: &Tensor) -> f32 {
    t.to_scalar::<f32>().unwrap()
}
"#;
    let train = r#"use candle_core::Tensor;
use candle_nn::loss::mse;
use crate::metrics::accuracy;
use super::metrics::*;

pub fn train(epochs: &[Vec<Tensor>]) {
    for epoch in epochs {
        for x in epoch {
            accuracy(x);
            precision(x);
            crate::eval::recall(x);
            mse(x);
            unused(x);
        }
    }
}
"#;
    let files = [
        (
            "src/lib.rs",
            "pub mod eval;\npub mod metrics;\npub mod train;\n",
        ),
        ("src/metrics.rs", metrics),
        ("src/eval.rs", eval),
        ("src/train.rs", train),
    ];
    // `accuracy` through its `use`, `precision` and `unused` through the glob (the other
    // `unused` is not imported), `recall` through its path; `mse` is candle_nn's.
    assert_eq!(
        hits(&files),
        [
            at("src/eval.rs", 3),
            at("src/metrics.rs", 3),
            at("src/metrics.rs", 6),
            at("src/metrics.rs", 12),
        ]
    );
    // A file that no `mod` declaration reaches is not part of the crate.
    let files = [
        ("src/lib.rs", "pub mod train;\n"),
        ("src/metrics.rs", metrics),
        ("src/eval.rs", eval),
        ("src/train.rs", train),
    ];
    assert_eq!(hits(&files), []);
}

const CUDA: &str = r#"use cudarc::driver::{CudaSlice, CudaStream};

pub struct CudaNetwork {
    stream: CudaStream,
    losses: CudaSlice<f32>,
}

impl CudaNetwork {
    pub fn train_batch(&mut self, x: &[f32]) -> f32 {
        let losses = self.stream.memcpy_dtov(&self.losses).unwrap();
        losses[0]
    }
}
"#;

const NETWORK: &str = r#"use crate::cuda;

pub struct CpuNetwork;

impl CpuNetwork {
    pub fn train_batch(&mut self, x: &[f32]) -> f32 {
        x[0]
    }
}

enum Inner {
    Cpu(Box<CpuNetwork>),
    Gpu(Box<cuda::CudaNetwork>),
}

pub struct Network {
    inner: Inner,
}

impl Network {
    pub fn new() -> Self {
        todo!()
    }

    pub fn train_batch(&mut self, x: &[f32]) -> f32 {
        match &mut self.inner {
            Inner::Cpu(net) => net.train_batch(x),
            Inner::Gpu(net) => net.train_batch(x),
        }
    }
}
"#;

#[test]
fn methods_resolve_through_types_fields_and_variants_of_other_files() {
    let trainer = r#"use crate::network;

pub fn train(data: &[Vec<f32>], epochs: usize) {
    let mut net = network::Network::new();
    for _ in 0..epochs {
        for x in data {
            net.train_batch(x);
        }
    }
}
"#;
    let files = [
        (
            "src/lib.rs",
            "pub mod cuda;\npub mod network;\npub mod trainer;\n",
        ),
        ("src/cuda.rs", CUDA),
        ("src/network.rs", NETWORK),
        ("src/trainer.rs", trainer),
    ];
    assert_eq!(hits(&files), [at("src/cuda.rs", 10)]);
    let note = package_findings(RULE, &files)[0].1.note.clone().unwrap();
    assert_eq!(
        note,
        "`net.train_batch(..)` at src/network.rs:28 (in `train_batch`) calls this function, and `train_batch` is itself called inside 2 loops that repeat it (through `net.train_batch(..)` at src/trainer.rs:7)"
    );
}

#[test]
fn a_type_of_another_crate_is_not_taken_for_the_packages_own() {
    let layers = r#"use candle_core::Tensor;
pub struct Linear;
impl Linear {
    pub fn forward(&self, x: &Tensor) -> f32 {
        x.to_scalar::<f32>().unwrap()
    }
}
"#;
    let model = |import: &str| {
        format!(
            "use candle_core::Tensor;\n{import}\n\npub fn run(l: &Linear, xs: &[Vec<Tensor>]) {{\n    for batch in xs {{\n        for x in batch {{\n            l.forward(x);\n        }}\n    }}\n}}\n"
        )
    };
    let theirs = model("use candle_nn::Linear;");
    let ours = model("use crate::layers::Linear;");
    for (model, expected) in [(&theirs, vec![]), (&ours, vec![at("src/layers.rs", 5)])] {
        let files = [
            ("src/lib.rs", "pub mod layers;\npub mod model;\n"),
            ("src/layers.rs", layers),
            ("src/model.rs", model.as_str()),
        ];
        assert_eq!(hits(&files), expected, "{model}");
    }
}

const TRAIN: &str = r#"use burn::tensor::{Tensor, backend::AutodiffBackend};

pub fn train<B: AutodiffBackend>(loss: Tensor<B, 1>) -> f32 {
    loss.into_scalar().to_f32()
}
"#;

#[test]
fn a_binary_reaches_the_library_by_its_name_also_inside_a_dispatch_macro() {
    let bin = r#"use mz_rs::train::train;

fn main() {
    with_env!(conf, E => {
        for _step in 0..steps() {
            for _ in 0..per_step() {
                train(next());
            }
        }
    });
}
"#;
    let files = [
        ("src/lib.rs", "pub mod train;\n"),
        ("src/train.rs", TRAIN),
        ("src/bin/train.rs", bin),
    ];
    assert_eq!(hits(&files), [at("src/train.rs", 4)]);
    let found = package_findings(RULE, &files);
    assert!(
        found[0].1.message.contains("(src/bin/train.rs:7)"),
        "{}",
        found[0].1.message
    );
}

#[test]
fn spawned_tasks_and_debug_switches_do_not_repeat_calls_of_other_files() {
    let main = |call: &str| {
        format!(
            "use app::train::train;\n\nfn main() {{\n    let debug = std::env::var_os(\"APP_DEBUG\").is_some();\n    for _ in 0..epochs() {{\n        for x in batches() {{\n            {call}\n        }}\n    }}\n}}\n"
        )
    };
    for (call, fires) in [
        ("train(x);", true),
        ("tokio::task::spawn_blocking(move || train(x));", false),
        ("std::thread::spawn(move || train(x));", false),
        ("if debug { train(x); }", false),
        (
            "if tracing::enabled!(tracing::Level::DEBUG) { train(x); }",
            false,
        ),
        ("if VERBOSE.load(Ordering::Relaxed) { train(x); }", false),
    ] {
        let main = main(call);
        let files = [
            ("src/lib.rs", "pub mod train;\n"),
            ("src/train.rs", TRAIN),
            ("src/main.rs", main.as_str()),
        ];
        assert_eq!(hits(&files).len(), usize::from(fires), "{call}");
    }
}

#[test]
fn a_name_defined_in_two_modules_of_a_file_resolves_to_the_callers_own_module() {
    // The file alone follows no call of a name it defines twice; its crate's module
    // structure says which one a call names.
    let parity = r#"use candle_core::Tensor;

mod tests {
    use candle_core::Tensor;

    fn mse(a: &Tensor) -> f32 {
        a.sqr().unwrap().mean_all().unwrap().to_scalar::<f32>().unwrap()
    }

    fn sweep(runs: &[Vec<Tensor>]) {
        for run in runs {
            for x in run {
                mse(x);
            }
        }
    }
}

mod other {
    use candle_core::Tensor;

    fn mse(a: &Tensor) -> f32 {
        a.sqr().unwrap().mean_all().unwrap().to_scalar::<f32>().unwrap()
    }
}
"#;
    assert_eq!(crate::testing::hits(RULE, parity), []);
    let files = [("tests/parity.rs", parity), ("src/lib.rs", "")];
    assert_eq!(hits(&files), [at("tests/parity.rs", 7)]);
}

#[test]
fn a_generic_method_of_another_file_called_where_the_caller_runs_on_a_cpu_backend_does_not_fire() {
    // An agent generic over burn's backend in one file; the episode loops of the binary
    // name only `NdArray`: through them the agent runs on the CPU. A caller on `Wgpu`
    // repeats the read.
    let agent = r#"use burn::tensor::{Tensor, backend::AutodiffBackend};

pub struct Agent<B: AutodiffBackend> {
    net: Net<B>,
}

impl<B: AutodiffBackend> Agent<B> {
    pub fn act(&self, obs: Tensor<B, 2>) -> i64 {
        self.net.forward(obs).argmax(1).into_scalar()
    }
}
"#;
    let main = r#"use burn::backend::{Autodiff, NdArray};
use rl::agent::Agent;

fn main() {
    let agent: Agent<Autodiff<NdArray>> = Agent::new();
    for _ in 0..500 {
        while !done() {
            agent.act(observe());
        }
    }
}
"#;
    let files = [
        ("src/lib.rs", "pub mod agent;\n"),
        ("src/agent.rs", agent),
        ("src/main.rs", main),
    ];
    assert!(hits(&files).is_empty(), "{:?}", hits(&files));
    let gpu = main.replace("NdArray", "Wgpu");
    let files = [
        ("src/lib.rs", "pub mod agent;\n"),
        ("src/agent.rs", agent),
        ("src/main.rs", gpu.as_str()),
    ];
    assert_eq!(hits(&files), [at("src/agent.rs", 9)]);
}
