//! False-alarm shape (`out_of_place_update`, off by default; `gpuscope.toml` here sets it to
//! `warn` for this file): a crate with a tensor type of its own (a host `Vec` and a shape,
//! imported from `crate::tensor`) averages the gradients of data-parallel replicas with
//! `avg = (&avg + grad)?`. Its tensor has no in-place `add_` to suggest, and the lint does not
//! know its memory: nothing to report.

use crate::graph::{Graph, GraphError, ParamId};
use crate::tensor::{Tensor, TensorOps};
use rayon::prelude::*;

pub fn averaged_grads<G: Graph + Sync>(
    replicas: &[G],
    params: &[ParamId],
) -> Result<Vec<(ParamId, Tensor<f32>)>, GraphError> {
    params
        .par_iter()
        .map(|&id| {
            let mut avg = Tensor::<f32>::scalar(0.0);
            for replica in replicas {
                avg = (&avg + replica.grad(id)?)?;
            }
            let n = replicas.len().max(1) as f32;
            Ok((id, avg.map_values(|v| v / n)))
        })
        .collect()
}
