//! The GPT example's model, data and command line (`examples/gpt/`), tested where CI
//! runs (the host): a two-layer model learns the Markov chain down to a bound derived
//! from its entropy floor; bad flags and bad token files are errors that say what to
//! do; out of memory in the middle of a step names the live tensors by site and leaves
//! nothing allocated but the model and its optimizer state. On a machine with a GPU,
//! one training step on CUDA agrees with the same step on the host.

#[path = "../examples/gpt/cli.rs"]
mod cli;
#[path = "../examples/gpt/data.rs"]
#[allow(dead_code)]
mod data;
#[path = "../examples/gpt/model.rs"]
#[allow(dead_code)]
mod model;
#[path = "../examples/common/svg_chart.rs"]
#[allow(dead_code)]
mod svg_chart;
#[path = "../examples/gpt/timeline.rs"]
#[allow(dead_code)]
mod timeline;

use std::sync::Arc;

use clap::Parser;
use gpuscope::alloc::AllocConfig;
use gpuscope::backend::host::HostBackend;
use gpuscope::optim::{AdamW, Optimizer};
use gpuscope::{Device, Tensor, TensorError};

use data::{Batches, DataError, MarkovChain};
use model::{Config, Gpt};

/// Tests that make the model's tensors take turns: tracking records are global, and the
/// timeline counts the live tensors of every host device (their labels are alike).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A host device of its own (its allocator's statistics are this test's alone).
fn private_host() -> Device {
    Device::with_backend(Arc::new(HostBackend::new()), AllocConfig::default()).unwrap()
}

fn batch(b: &mut Batches, n: usize, block: usize, dev: &Device) -> (Tensor, Tensor) {
    let (x, y) = b.next(n);
    (
        Tensor::from_vec(x, &[n, block], dev).unwrap(),
        Tensor::from_vec(y, &[n * block], dev).unwrap(),
    )
}

const SMALL: Config = Config {
    layers: 2,
    heads: 4,
    embd: 32,
    block: 16,
    vocab: 32,
};

#[test]
fn a_two_layer_model_learns_the_chain_to_near_its_entropy_floor() {
    let _turn = serial();
    let dev = private_host();
    let chain = MarkovChain::new(SMALL.vocab, 0);
    let tokens = chain.sample(100_000, 1);
    let floor = chain.entropy;
    let uniform = (SMALL.vocab as f64).ln();
    assert!(floor > 0.5 && floor < uniform - 0.5, "floor {floor}");
    let model = Gpt::new(SMALL, &dev, 0).unwrap();
    let mut opt = AdamW::new(model.params(), 3e-3).weight_decay(0.1);
    let mut batches = Batches::new(&tokens, SMALL.block, 7);
    let mut last = Vec::new();
    let steps = 300;
    for i in 0..steps {
        let (x, y) = batch(&mut batches, 8, SMALL.block, &dev);
        let loss = model.loss(&x, &y, false, None).unwrap();
        let l = loss.item().unwrap();
        if i == 0 {
            assert!(
                (l - uniform).abs() < 0.3,
                "first loss {l}, uniform {uniform}"
            );
        }
        loss.backward().unwrap();
        opt.step().unwrap();
        opt.zero_grad();
        if i >= steps - 30 {
            last.push(l);
        }
    }
    let mean = last.iter().sum::<f64>() / last.len() as f64;
    // The bound: the floor plus a fifth of the way from the floor to knowing nothing
    // (the uniform guess). A model that learnt only the token frequencies stays near
    // the unigram entropy, well above it.
    let bound = floor + 0.2 * (uniform - floor);
    assert!(
        mean < bound,
        "mean loss of the last 30 steps {mean:.4}; floor {floor:.4}, bound {bound:.4}, uniform {uniform:.4}"
    );
    assert!(mean > floor - 0.1, "below the floor: {mean} < {floor}");
    println!("mean loss of the last 30 steps {mean:.4}; floor {floor:.4}, bound {bound:.4}");
}

/// Every parameter's gradient, cleared after reading.
fn take_grads(model: &Gpt) -> Vec<Vec<f32>> {
    let g = model
        .params()
        .iter()
        .map(|p| p.grad().unwrap().to_vec::<f32>().unwrap())
        .collect();
    for p in model.params() {
        p.set_grad(None);
    }
    g
}

#[test]
fn checkpointing_gives_the_same_loss_and_gradients() {
    let _turn = serial();
    let dev = private_host();
    let tokens = MarkovChain::new(SMALL.vocab, 3).sample(10_000, 4);
    let model = Gpt::new(SMALL, &dev, 5).unwrap();
    let (x, y) = batch(
        &mut Batches::new(&tokens, SMALL.block, 6),
        4,
        SMALL.block,
        &dev,
    );
    let grads = |ckpt: bool| {
        let loss = model.loss(&x, &y, ckpt, None).unwrap();
        loss.backward().unwrap();
        (loss.item().unwrap(), take_grads(&model))
    };
    let ((l0, g0), (l1, g1)) = (grads(false), grads(true));
    assert_eq!(l0, l1);
    for (a, b) in g0.iter().zip(&g1) {
        for (x, y) in a.iter().zip(b) {
            assert!(
                (x - y).abs() <= 1e-6 + 1e-4 * x.abs().max(y.abs()),
                "{x} vs {y}"
            );
        }
    }
}

/// `--sdpa`: blocks that compute the attention matrix again in backward give the same
/// loss and gradients and reach a lower peak of allocated memory.
#[test]
fn recomputed_attention_gives_the_same_gradients_for_less_memory() {
    let _turn = serial();
    let dev = private_host();
    let tokens = MarkovChain::new(SMALL.vocab, 3).sample(10_000, 4);
    let mut model = Gpt::new(SMALL, &dev, 5).unwrap();
    let (x, y) = batch(
        &mut Batches::new(&tokens, SMALL.block, 6),
        4,
        SMALL.block,
        &dev,
    );
    let mut run = |recompute: bool| {
        model.set_recompute_attention(recompute);
        dev.allocator().reset_peak_stats();
        let loss = model.loss(&x, &y, false, None).unwrap();
        loss.backward().unwrap();
        let peak = dev.allocator().stats().allocated_bytes.all.peak;
        (loss.item().unwrap(), take_grads(&model), peak)
    };
    let (l0, g0, peak0) = run(false);
    let (l1, g1, peak1) = run(true);
    assert_eq!(l0, l1);
    assert_eq!(g0, g1, "the same kernels on the same inputs");
    assert!(
        peak1 < peak0,
        "peak allocated {peak1} with recomputing, {peak0} without"
    );
}

fn parse(flags: &str) -> Result<Config, String> {
    let argv = std::iter::once("gpt").chain(flags.split_whitespace());
    let args = cli::Args::try_parse_from(argv).map_err(|e| e.to_string())?;
    cli::check_args(&args)
}

/// Every flag of the reference script (`bench/torch_gpt.py`, the same file as
/// `../shared/bench/torch_gpt.py`) parses here, so that the two run with the same command
/// line.
#[test]
fn the_reference_scripts_flags_are_accepted() {
    let reference = include_str!("../bench/torch_gpt.py");
    let flags: Vec<&str> = reference
        .lines()
        .filter_map(|l| l.trim().strip_prefix("p.add_argument(\"--"))
        .filter_map(|l| l.split('"').next())
        .collect();
    assert!(flags.len() >= 14, "{flags:?}");
    for flag in flags {
        let line = match flag {
            "bf16" | "sdpa" | "compile" => format!("--{flag}"),
            "lr" => "--lr 0.001".to_owned(),
            "write-data" => "--write-data /tmp/gpuscope-gpt-flags.bin".to_owned(),
            "steps" => "--steps 20".to_owned(),
            _ => format!("--{flag} 8"),
        };
        if let Err(e) = parse(&line) {
            panic!("{line}: {e}");
        }
    }
}

/// `--bf16` means bf16 matrix products; `--matmul-precision` names any of PyTorch's three.
#[test]
fn bf16_and_matmul_precision_choose_the_products_precision() {
    use gpuscope::MatmulPrecision::{High, Highest, Medium};
    let precision = |flags: &str| {
        let argv = std::iter::once("gpt").chain(flags.split_whitespace());
        cli::matmul_precision(&cli::Args::try_parse_from(argv).unwrap())
    };
    assert_eq!(precision(""), Ok(Highest));
    assert_eq!(precision("--bf16"), Ok(Medium));
    assert_eq!(precision("--bf16 --matmul-precision medium"), Ok(Medium));
    assert_eq!(precision("--matmul-precision high"), Ok(High));
    assert_eq!(precision("--matmul-precision HIGHEST"), Ok(Highest));
    assert!(precision("--bf16 --matmul-precision highest").is_err());
}

#[test]
fn flags_out_of_range_are_errors_that_name_the_flag() {
    assert!(parse("").is_ok());
    let e = parse("--heads 7").unwrap_err();
    assert!(
        e.contains("--heads 7 does not divide --embd 512") && e.contains("divisors"),
        "{e}"
    );
    assert!(
        parse("--batch 0")
            .unwrap_err()
            .contains("--batch must be at least 1")
    );
    assert!(parse("--layers 0").unwrap_err().contains("--layers"));
    assert!(
        parse("--steps 5 --warmup 10")
            .unwrap_err()
            .contains("--steps 5 must be more than --warmup 10")
    );
    assert!(parse("--lr=-1").unwrap_err().contains("--lr"));
    assert!(parse("--lr nan").unwrap_err().contains("--lr"));
    assert!(parse("--vocab 70000").unwrap_err().contains("u16"));
    assert!(
        parse("--bf16 --matmul-precision high")
            .unwrap_err()
            .contains("--bf16 runs matrix products at --matmul-precision medium")
    );
    assert!(parse("--matmul-precision tf32").is_err()); // clap: names the three
    assert!(parse("--batch -3").is_err()); // clap: not a number of sequences
    assert!(parse("--device tpu").is_err());
}

#[test]
fn bad_token_files_are_errors_that_say_what_is_wrong() {
    let dir = std::env::temp_dir().join(format!("gpuscope-gpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tokens.bin");
    // Odd length: not whole u16 tokens.
    std::fs::write(&path, [1u8, 0, 2]).unwrap();
    let e = data::read_tokens(&path, 512, 4).unwrap_err();
    assert!(matches!(e, DataError::OddLength { bytes: 3, .. }), "{e}");
    assert!(e.to_string().contains("not a whole number of u16 tokens"));
    // Too short for the block: a block larger than the data.
    data::write_tokens(&path, &[1, 2, 3, 4, 5]).unwrap();
    let e = data::read_tokens(&path, 512, 8).unwrap_err().to_string();
    assert!(e.contains("5 tokens are too few for --block 8"), "{e}");
    // Out of the vocabulary: the first one named, the others counted.
    data::write_tokens(&path, &[1, 2, 600, 3, 700, 4, 5, 6]).unwrap();
    let e = data::read_tokens(&path, 512, 2).unwrap_err().to_string();
    assert!(
        e.contains("token 600 at position 2") && e.contains("1 more") && e.contains("--vocab"),
        "{e}"
    );
    // A missing file.
    let e = data::read_tokens(&dir.join("none.bin"), 512, 2).unwrap_err();
    assert!(matches!(e, DataError::Io { .. }));
    // A good file round-trips.
    let tokens = MarkovChain::new(16, 1).sample(1000, 2);
    data::write_tokens(&path, &tokens).unwrap();
    assert_eq!(data::read_tokens(&path, 16, 8).unwrap(), tokens);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_chain_matches_its_empirical_entropy() {
    let chain = MarkovChain::new(64, 11);
    for row in chain.p.chunks_exact(64) {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }
    let tokens = chain.sample(400_000, 12);
    let est = data::empirical_entropy(&tokens, 64);
    assert!(
        (est - chain.entropy).abs() < 0.03,
        "{est} vs {}",
        chain.entropy
    );
}

#[test]
fn out_of_memory_in_a_step_names_sites_and_leaves_only_the_model() {
    let _turn = serial();
    let dev = private_host();
    gpuscope::scope::set_tracking(true);
    let cfg = Config {
        layers: 2,
        heads: 2,
        embd: 32,
        block: 32,
        vocab: 64,
    };
    let tokens = MarkovChain::new(cfg.vocab, 0).sample(5_000, 1);
    let model = Gpt::new(cfg, &dev, 0).unwrap();
    let mut opt = AdamW::new(model.params(), 1e-3);
    let mut batches = Batches::new(&tokens, cfg.block, 2);
    // One step to make the optimizer's state, then a cap just above what is held.
    let (x, y) = batch(&mut batches, 2, cfg.block, &dev);
    model.loss(&x, &y, false, None).unwrap().backward().unwrap();
    opt.step().unwrap();
    opt.zero_grad();
    drop((x, y));
    let held = dev.allocator().stats().allocated_bytes.all.current;
    dev.allocator()
        .set_memory_limit(Some(held as usize + (1 << 20)));
    let (x, y) = batch(&mut batches, 64, cfg.block, &dev);
    let r = (|| -> Result<(), TensorError> {
        model.loss(&x, &y, false, None)?.backward()?;
        opt.step()
    })();
    let e = r.unwrap_err();
    assert!(e.is_out_of_memory(), "{e}");
    let TensorError::OutOfMemory(report) = &e else {
        panic!("not a tensor OOM report: {e}")
    };
    assert!(!report.live.is_empty());
    let text = e.to_string();
    assert!(
        text.contains("Largest live tensors by the line that made them"),
        "{text}"
    );
    assert!(text.contains("examples/gpt/model.rs:"), "{text}");
    opt.zero_grad();
    drop((x, y));
    let after = dev.allocator().stats().allocated_bytes.all.current;
    assert_eq!(
        after, held,
        "nothing but the model and its optimizer state is left"
    );
}

#[test]
fn the_timeline_tells_parameters_state_gradients_activations_and_attention_apart() {
    let _turn = serial();
    gpuscope::scope::set_tracking(true);
    for checkpointed in [false, true] {
        let dev = private_host();
        let tokens = MarkovChain::new(SMALL.vocab, 0).sample(5_000, 1);
        let model = Gpt::new(SMALL, &dev, 0).unwrap();
        let params = model.params();
        let param_bytes: usize = params.iter().map(Tensor::nbytes).sum();
        let mut opt = AdamW::new(params.clone(), 1e-3);
        let mut batches = Batches::new(&tokens, SMALL.block, 2);
        let recorder = timeline::Recorder::new(
            &dev,
            timeline::Classifier {
                param_tensors: params.clone(),
                params: timeline::ids(&params),
                moments: Default::default(),
                backward_site: None,
                attention_site: None,
            },
        );
        for step in 0..2 {
            {
                let mut c = recorder.classifier.lock().unwrap();
                c.moments = timeline::ids(opt.moments().iter().flatten().flat_map(|(m, v)| [m, v]));
                c.attention_site = model::ATTENTION_SITE.get().map(|l| (l.file(), l.line()));
            }
            let (x, y) = batch(&mut batches, 4, SMALL.block, &dev);
            let r = recorder.clone();
            let probe: model::Probe = Arc::new(move |label: &str| r.sample(label));
            let loss = model.loss(&x, &y, checkpointed, Some(&probe)).unwrap();
            let (done, at) = (loss.backward(), std::panic::Location::caller());
            done.unwrap();
            recorder.classifier.lock().unwrap().backward_site = Some((at.file(), at.line()));
            recorder.sample(&format!("step {step}: backward done"));
            opt.step().unwrap();
            recorder.classifier.lock().unwrap().moments =
                timeline::ids(opt.moments().iter().flatten().flat_map(|(m, v)| [m, v]));
            recorder.sample(&format!("step {step}: optimizer step"));
            opt.zero_grad();
        }
        let samples = recorder.samples.lock().unwrap().clone();
        let at = |label: &str| {
            samples
                .iter()
                .rev()
                .find(|s| s.label == label)
                .unwrap()
                .bytes
        };
        // [parameters, optimizer state, gradients, activations, attention, untracked]
        let fwd = at("forward: block 1");
        assert_eq!(fwd[0], param_bytes, "{checkpointed}: {fwd:?}");
        assert_eq!(
            fwd[1],
            2 * param_bytes,
            "the second step sees the moments: {fwd:?}"
        );
        assert!(fwd[3] > 0, "activations: {fwd:?}");
        if checkpointed {
            assert_eq!(fwd[4], 0, "checkpointed blocks keep no attention: {fwd:?}");
        } else {
            // Each block keeps q, k, v and the attention matrix: 3·B·T·C + B·H·T² floats,
            // plus its output.
            let per_block = 4 * (3 * 4 * 16 * 32 + 4 * 4 * 16 * 16 + 4 * 16 * 32);
            assert_eq!(fwd[4], 2 * per_block, "{fwd:?}");
        }
        let done = at("step 1: backward done");
        assert_eq!(
            done[2], param_bytes,
            "every gradient, and only those: {done:?}"
        );
        assert_eq!(done[4], 0, "{done:?}");
        let after = at("step 1: optimizer step");
        assert_eq!((after[0], after[1]), (param_bytes, 2 * param_bytes));
        println!("{}", timeline::table(&samples));
    }
}

/// One step on CUDA agrees with the same step on the host (skipped without a GPU).
#[cfg(feature = "cuda")]
#[test]
fn a_cuda_step_agrees_with_the_host() {
    let _turn = serial();
    if let Some(reason) = gpuscope::backend::cuda::unavailable_reason() {
        println!("skipped: {reason}");
        return;
    }
    let cuda = Device::cuda(0).expect("device 0 opens when a driver and a GPU are present");
    let cfg = Config {
        layers: 2,
        heads: 4,
        embd: 64,
        block: 32,
        vocab: 96,
    };
    let tokens = MarkovChain::new(cfg.vocab, 0).sample(20_000, 1);
    let run = |dev: &Device, ckpt: bool| {
        let model = Gpt::new(cfg, dev, 3).unwrap();
        let (x, y) = batch(&mut Batches::new(&tokens, cfg.block, 4), 6, cfg.block, dev);
        let loss = model.loss(&x, &y, ckpt, None).unwrap();
        loss.backward().unwrap();
        let grads: Vec<Vec<f64>> = model
            .params()
            .iter()
            .map(|p| p.grad().unwrap().to_f64_vec().unwrap())
            .collect();
        let mut opt = AdamW::new(model.params(), 1e-3).weight_decay(0.1);
        opt.step().unwrap();
        let after: Vec<f64> = model.params()[2].to_f64_vec().unwrap();
        (loss.item().unwrap(), grads, after)
    };
    let host = Device::host().unwrap();
    let (l0, g0, p0) = run(&host, false);
    for ckpt in [false, true] {
        let (l1, g1, p1) = run(&cuda, ckpt);
        assert!(
            (l0 - l1).abs() < 1e-4 * l0.abs(),
            "loss host {l0}, cuda {l1}"
        );
        for (i, (a, b)) in g0.iter().zip(&g1).enumerate() {
            let num: f64 = a
                .iter()
                .zip(b)
                .map(|(x, y)| (x - y).powi(2))
                .sum::<f64>()
                .sqrt();
            let den: f64 = a.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-12);
            assert!(
                num / den < 1e-4,
                "parameter {i} (checkpoint {ckpt}): relative error {}",
                num / den
            );
        }
        for (x, y) in p0.iter().zip(&p1) {
            assert!((x - y).abs() < 1e-6, "after AdamW: host {x}, cuda {y}");
        }
    }
}
