//! Embedding lookup with autograd: the backward step scatter-adds into the table's
//! gradient.

use std::panic::Location;

use crate::autograd::{record_saving, should_record};
use crate::tensor::compute::Site;
use crate::tensor::compute::nn::{Lookup, embedding_backward_raw, embedding_raw};
use crate::tensor::{Tensor, TensorError};

fn embedding_at(table: &Tensor, idx: &Tensor, site: Site) -> Result<Tensor, TensorError> {
    let (out, lookup) = embedding_raw(table, idx, site)?;
    if !should_record(&[table]) {
        return Ok(out);
    }
    let shape = table.shape().to_vec();
    // On CUDA the indices stay on the device until the backward step.
    let listed = match &lookup {
        Lookup::Device(t) => Some(t.clone()),
        Lookup::Host(_) => None,
    };
    Ok(record_saving(
        out,
        "embedding",
        &[table],
        listed,
        site,
        move |g, _, site| {
            Ok(vec![Some(embedding_backward_raw(
                g, &lookup, &shape, site,
            )?)])
        },
    ))
}

impl Tensor {
    /// Rows of this table picked by `indices` (PyTorch's `F.embedding(indices, table)`):
    /// for a `[rows, dim]` table and indices of any shape `s` (`i64` or `i32`), the
    /// rows, shape `s + [dim]`. The backward step adds each row's gradient into the
    /// table's gradient at the row it came from (a scatter-add; rows picked several
    /// times sum), so a table also used elsewhere, such as a tied output head
    /// (`x.matmul_t(&table, false, true)`), gets both gradients summed.
    ///
    /// An index outside `0..rows` is an [`InvalidArgument`](TensorError::InvalidArgument)
    /// error: on the host from this call; on CUDA the row is NaN and the next read-back
    /// from the device returns the error (as for a loss target out of range).
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let table = Tensor::from_slice(&[0.0f32, 1.0, 10.0, 11.0, 20.0, 21.0], &[3, 2], &dev)
    ///     .unwrap()
    ///     .set_requires_grad(true);
    /// let idx = Tensor::from_slice(&[2i64, 0, 2], &[3], &dev).unwrap();
    /// let rows = table.embedding(&idx).unwrap();
    /// assert_eq!(rows.to_vec::<f32>().unwrap(), vec![20.0, 21.0, 0.0, 1.0, 20.0, 21.0]);
    /// rows.sum().unwrap().backward().unwrap();
    /// assert_eq!(table.grad().unwrap().to_vec::<f32>().unwrap(), vec![1.0, 1.0, 0.0, 0.0, 2.0, 2.0]);
    /// let bad = Tensor::from_slice(&[3i64], &[1], &dev).unwrap();
    /// assert!(table.embedding(&bad).unwrap_err().to_string().contains("out of range"));
    /// ```
    #[track_caller]
    pub fn embedding(&self, indices: &Tensor) -> Result<Tensor, TensorError> {
        embedding_at(self, indices, Location::caller())
    }
}
