//! False-alarm shape (`item_in_hot_loop`, off by default; `gpuscope.toml` here sets it to
//! `warn` for this file), as in a streaming text-to-speech model (2026-11-27, seventeenth
//! session): the generation loop logs the audio of the first six speech tokens, read with
//! `to_vec1` under `if total < 6` where `total` counts the tokens; and the first step of
//! each window (`if step == 0`). Those guards let a bounded number of the inner loop's
//! iterations through: six reads in all, one per window. Reported (true): the end-of-speech
//! probability read with `to_scalar` for every token of every window.

use candle_core::{Result, Tensor};

use crate::model::{Generator, WINDOW};

pub fn generate(gen: &mut Generator, text: &[Tensor], max_tokens: usize) -> Result<Vec<Tensor>> {
    let mut audio = Vec::new();
    let mut total = 0usize;
    for window in text {
        gen.prefill(window)?;
        for step in 0..WINDOW {
            let latent = gen.sample_latent()?;
            let chunk = gen.decode(&latent)?;
            if total < 6 {
                let samples: Vec<f32> = chunk.flatten_all()?.to_vec1()?;
                log::debug!("token {total}: first samples {:?}", &samples[..10]);
            }
            if step == 0 {
                let first: Vec<f32> = latent.to_vec1()?;
                log::debug!("window start: {first:?}");
            }
            let eos = gen.eos_probability()?.to_scalar::<f32>()?;
            audio.push(chunk);
            total += 1;
            if eos > 0.5 || total >= max_tokens {
                return Ok(audio);
            }
        }
    }
    Ok(audio)
}
