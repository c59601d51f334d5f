// A new user's `#[gpu_scope]` function that writes its results into slots it reaches through
// small helpers: `slot_for` and `Ring::newest` return a `&mut` into the caller's memory, and
// `state_slot` (from another module) is assigned through `*`, so each store keeps a tensor
// made in the scope where the caller owns it (scope_escape). Not reported: a copy that
// `Ring::snapshot` returns, pushed into, and a local rebound to a new tensor.
use gpuscope::{Tensor, TensorError, gpu_scope};

use crate::layout::state_slot;

pub struct Ring {
    cells: Vec<Tensor>,
    head: usize,
}

impl Ring {
    fn newest(&mut self) -> Option<&mut Tensor> {
        self.cells.get_mut(self.head)
    }

    fn snapshot(&self) -> Vec<Tensor> {
        self.cells.clone()
    }
}

fn slot_for(ring: &mut Ring, step: usize) -> &mut Tensor {
    let n = ring.cells.len();
    &mut ring.cells[step % n]
}

#[gpu_scope]
pub fn advance(
    x: &Tensor,
    ring: &mut Ring,
    state: &mut Vec<Tensor>,
    step: usize,
) -> Result<(), TensorError> {
    let slot = slot_for(ring, step);
    *slot = x.relu()?;
    if let Some(cell) = ring.newest() {
        *cell = x.add(x)?;
    }
    let s = state_slot(state, step)?;
    *s = x.matmul(x)?;
    let mut copy = ring.snapshot();
    copy.push(x.sum()?);
    let mut h = x.relu()?;
    h = h.relu()?;
    Ok(())
}
