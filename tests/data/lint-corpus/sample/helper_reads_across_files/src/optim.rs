use candle_core::backprop::GradStore;
use candle_core::{Result, Var};

/// Clips the gradients to `max_norm`: reads every parameter's squared norm to the host,
/// once per parameter per step (true: one `to_scalar` of a stacked sum would do).
pub fn clip_grad_norm(grads: &mut GradStore, vars: &[Var], max_norm: f64) -> Result<f64> {
    let mut total = 0.0f64;
    for var in vars {
        if let Some(g) = grads.get(var.as_tensor()) {
            total += g.sqr()?.sum_all()?.to_scalar::<f32>()? as f64;
        }
    }
    let total = total.sqrt();
    if total > max_norm {
        for var in vars {
            if let Some(g) = grads.get(var.as_tensor()) {
                let clipped = (g * (max_norm / total))?;
                grads.insert(var.as_tensor(), clipped);
            }
        }
    }
    Ok(total)
}
