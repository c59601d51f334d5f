//! The collectives of a [`ProcessGroup`]: what each checks of its tensors (one per local
//! device, of one data type, on the group's devices; outputs sized by the collective's
//! rule) and the NCCL call it makes on each comm stream, through [`ProcessGroup::run`].

use super::{ProcessGroup, Work};
use crate::dist::DistError;
use crate::dist::nccl::ffi::{self, DataType};
use crate::tensor::{DType, Tensor};

/// How values are combined.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
    /// Mean over ranks (NCCL 2.10+).
    Avg,
}

impl ReduceOp {
    fn raw(self) -> i32 {
        match self {
            ReduceOp::Sum => 0,
            ReduceOp::Prod => 1,
            ReduceOp::Max => 2,
            ReduceOp::Min => 3,
            ReduceOp::Avg => 4,
        }
    }
}

fn nccl_type(dtype: DType) -> DataType {
    match dtype {
        DType::F32 => DataType::Float32,
        DType::F64 => DataType::Float64,
        DType::F16 => DataType::Float16,
        DType::BF16 => DataType::Bfloat16,
        DType::I32 => DataType::Int32,
        DType::I64 => DataType::Int64,
        DType::U8 => DataType::Uint8,
    }
}

impl ProcessGroup {
    /// Reduces each tensor across ranks in place (one tensor per local device).
    pub fn all_reduce(&self, tensors: &[&Tensor], op: ReduceOp) -> Result<Work, DistError> {
        const OP: &str = "all_reduce";
        let dtype = self.check(OP, tensors, "tensors")?;
        let ty = nccl_type(dtype) as i32;
        self.run(OP, tensors, tensors, |i, nccl, comm, stream| {
            let t = tensors[i];
            // SAFETY: contiguous storage of `numel` elements on this comm's device.
            unsafe {
                (nccl.all_reduce)(
                    t.addr().0 as *const _,
                    t.addr().0 as *mut _,
                    t.numel(),
                    ty,
                    op.raw(),
                    comm,
                    stream,
                )
            }
        })
    }

    /// Copies rank `root`'s tensor into every rank's (one tensor per local device).
    pub fn broadcast(&self, tensors: &[&Tensor], root: usize) -> Result<Work, DistError> {
        const OP: &str = "broadcast";
        let dtype = self.check(OP, tensors, "tensors")?;
        if root >= self.world_size() {
            return Err(arg(
                OP,
                format!("root {root} is not a rank (0..{})", self.world_size()),
            ));
        }
        let ty = nccl_type(dtype) as i32;
        self.run(OP, tensors, tensors, |i, nccl, comm, stream| {
            let t = tensors[i];
            // SAFETY: as for all_reduce.
            unsafe {
                (nccl.broadcast)(
                    t.addr().0 as *const _,
                    t.addr().0 as *mut _,
                    t.numel(),
                    ty,
                    root as i32,
                    comm,
                    stream,
                )
            }
        })
    }

    /// Gathers every rank's `inputs[i]` into `outputs[i]` (world size times as many
    /// elements, rank order).
    pub fn all_gather(&self, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<Work, DistError> {
        self.run_in_out(
            "all_gather",
            inputs,
            outputs,
            |i, o| o == i * self.world_size(),
            "world size times the input's",
            |input, output, ty, nccl, comm, stream| {
                // SAFETY: input and output storages sized as checked by `run_in_out`.
                unsafe {
                    (nccl.all_gather)(
                        input.addr().0 as *const _,
                        output.addr().0 as *mut _,
                        input.numel(),
                        ty,
                        comm,
                        stream,
                    )
                }
            },
        )
    }

    /// Reduces `inputs[i]` across ranks and leaves rank r's share (chunk r of world
    /// size equal chunks) in `outputs[i]`.
    pub fn reduce_scatter(
        &self,
        inputs: &[&Tensor],
        outputs: &[&Tensor],
        op: ReduceOp,
    ) -> Result<Work, DistError> {
        self.run_in_out(
            "reduce_scatter",
            inputs,
            outputs,
            |i, o| i == o * self.world_size(),
            "the input's divided by the world size",
            |input, output, ty, nccl, comm, stream| {
                // SAFETY: input and output storages sized as checked by `run_in_out`.
                unsafe {
                    (nccl.reduce_scatter)(
                        input.addr().0 as *const _,
                        output.addr().0 as *mut _,
                        output.numel(),
                        ty,
                        op.raw(),
                        comm,
                        stream,
                    )
                }
            },
        )
    }

    /// Checks one tensor per local device, contiguous, one dtype; returns the dtype.
    pub(super) fn check(
        &self,
        op: &'static str,
        tensors: &[&Tensor],
        what: &str,
    ) -> Result<DType, DistError> {
        let comms = &self.inner.comms;
        if tensors.len() != comms.len() {
            return Err(arg(
                op,
                format!(
                    "{} {what} given; this process holds {} rank(s): one tensor per local device",
                    tensors.len(),
                    comms.len()
                ),
            ));
        }
        let dtype = tensors[0].dtype();
        for (i, (t, c)) in tensors.iter().zip(comms).enumerate() {
            if t.device() != c.device() {
                return Err(arg(
                    op,
                    format!(
                        "{what}[{i}] is on {}, but local rank {i} drives {}",
                        t.device().description(),
                        c.device().description()
                    ),
                ));
            }
            if !t.is_contiguous() {
                return Err(arg(
                    op,
                    format!("{what}[{i}] is a non-contiguous view: call .contiguous() first"),
                ));
            }
            if t.dtype() != dtype {
                return Err(arg(
                    op,
                    format!("{what}[{i}] is {:?} but {what}[0] is {dtype:?}", t.dtype()),
                ));
            }
        }
        if tensors.iter().any(|t| t.numel() != tensors[0].numel()) {
            return Err(arg(op, format!("the {what} differ in size")));
        }
        Ok(dtype)
    }

    fn check_pair(
        &self,
        op: &'static str,
        inputs: &[&Tensor],
        outputs: &[&Tensor],
        dtype: DType,
        fits: impl Fn(usize, usize) -> bool,
        rule: &str,
    ) -> Result<(), DistError> {
        let out_dtype = self.check(op, outputs, "outputs")?;
        if out_dtype != dtype {
            return Err(arg(
                op,
                format!("outputs are {out_dtype:?} but inputs are {dtype:?}"),
            ));
        }
        let (i, o) = (inputs[0].numel(), outputs[0].numel());
        if !fits(i, o) {
            return Err(arg(
                op,
                format!(
                    "outputs have {o} elements and inputs {i}: an output's size must be {rule} (world size {})",
                    self.world_size()
                ),
            ));
        }
        Ok(())
    }

    /// A collective from `inputs` into separate `outputs` (one each per local device):
    /// checks both lists ([`check`](Self::check)) and that each output's size `fits` the
    /// input's (`fits(input elements, output elements)`, `rule` saying how in the error),
    /// then [`run`](Self::run)s `call(input, output, NCCL data type, ...)` for every local
    /// rank, with the inputs and the outputs as the tensors touched.
    fn run_in_out(
        &self,
        op: &'static str,
        inputs: &[&Tensor],
        outputs: &[&Tensor],
        fits: impl Fn(usize, usize) -> bool,
        rule: &str,
        call: impl Fn(&Tensor, &Tensor, i32, &ffi::Nccl, ffi::Comm, ffi::Stream) -> ffi::NcclResult,
    ) -> Result<Work, DistError> {
        let dtype = self.check(op, inputs, "inputs")?;
        self.check_pair(op, inputs, outputs, dtype, fits, rule)?;
        let ty = nccl_type(dtype) as i32;
        let touched: Vec<&Tensor> = inputs.iter().chain(outputs).copied().collect();
        self.run(op, &touched, outputs, |i, nccl, comm, stream| {
            call(inputs[i], outputs[i], ty, nccl, comm, stream)
        })
    }
}

fn arg(op: &'static str, problem: String) -> DistError {
    DistError::Argument { op, problem }
}
