//! False-alarm shape (`item_in_hot_loop`, off by default; `gpuscope.toml` here sets it to
//! `warn` for this file), as in a basin-hopping trainer on candle (2026-11-27, twenty-first
//! round) and in demo training loops that stop after a few batches: the loss is read in the
//! block that `break`s out of the loop (the L-BFGS loop's `Converged` arm, `if batch % 5 ==
//! 0 { println!(.., loss.to_scalar()); break; }`), so the read runs once per run of that
//! loop, whatever loop is around it.
//! Reported (true): the loss added up every step of the same loops, and a loop body that
//! `continue`s before its `break`, which may run again.

use candle_core::{Result, Tensor};

pub enum Outcome {
    Converged(Tensor),
    Stepped(Tensor),
}

pub trait Minimizer {
    fn backward_step(&mut self, loss: &Tensor) -> Result<Outcome>;
}

pub fn hop<M: Minimizer>(opt: &mut M, start: &Tensor, hops: usize, steps: usize) -> Result<f32> {
    let mut total = 0.0;
    for _ in 0..hops {
        let mut loss = start.clone();
        for _ in 0..steps {
            match opt.backward_step(&loss)? {
                Outcome::Converged(new_loss) => {
                    println!("converged at {}", new_loss.to_scalar::<f32>()?);
                    loss = new_loss;
                    break;
                }
                Outcome::Stepped(new_loss) => {
                    total += new_loss.to_scalar::<f32>()?;
                    loss = new_loss;
                }
            }
        }
    }
    Ok(total)
}

pub fn retry<M: Minimizer>(opt: &mut M, start: &Tensor, hops: usize) -> Result<()> {
    for _ in 0..hops {
        loop {
            let Outcome::Stepped(loss) = opt.backward_step(start)? else {
                break;
            };
            if loss.to_scalar::<f32>()? > 1.0 {
                continue;
            }
            break;
        }
    }
    Ok(())
}
