//! False-alarm shape (`item_in_hot_loop`, off by default; `gpuscope.toml` here sets it to
//! `warn` for this file), as in a text-to-speech decoder on candle (2026-11-28,
//! twenty-second round): a helper that logs a tensor's min, max and mean returns first
//! unless tracing's debug level is on (`if !tracing::enabled!(..) { return; }`), so its
//! reads run only while debugging, however often the decoder's block loops call it.
//! Reported (true): the sampled token read for every batch row of every generated frame,
//! and the mean that a profiler's wrapper reads for every block, profiling on or off (it
//! leaves with the work itself, `return mean_of(t)`, when off).

use candle_core::{DType, Result, Tensor};

fn debug_tensor(name: &str, t: &Tensor) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    let Ok(t) = t.to_dtype(DType::F32) else {
        return;
    };
    if let (Ok(min), Ok(max)) = (
        t.flatten_all().and_then(|f| f.min(0)).and_then(|m| m.to_scalar::<f32>()),
        t.flatten_all().and_then(|f| f.max(0)).and_then(|m| m.to_scalar::<f32>()),
    ) {
        tracing::debug!(stage = name, min, max, "decoder tensor");
    }
}

fn mean_of(t: &Tensor) -> Result<f32> {
    t.mean_all()?.to_scalar::<f32>()
}

fn timed_mean(t: &Tensor) -> Result<f32> {
    if !enabled() {
        return mean_of(t);
    }
    let start = std::time::Instant::now();
    let mean = mean_of(t);
    eprintln!("mean in {:?}", start.elapsed());
    mean
}

fn enabled() -> bool {
    std::env::var_os("PROF").is_some()
}

pub trait Block {
    fn forward(&self, x: &Tensor) -> Result<Tensor>;
}

pub fn decode(blocks: &[Box<dyn Block>], frames: &[Tensor]) -> Result<Vec<u32>> {
    let mut codes = Vec::new();
    for frame in frames {
        let mut h = frame.clone();
        for block in blocks {
            h = block.forward(&h)?;
            debug_tensor("after block", &h);
            timed_mean(&h)?;
        }
        for b in 0..h.dim(0)? {
            codes.push(h.get(b)?.argmax(0)?.to_scalar::<u32>()?);
        }
    }
    Ok(codes)
}
