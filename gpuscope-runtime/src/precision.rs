//! The precision of `f32` matrix products, as PyTorch's
//! `torch.set_float32_matmul_precision`: a process-wide permission for the CUDA backend
//! to compute products of `f32` tensors on tensor cores with fewer mantissa bits
//! internally, while the tensors themselves stay `f32` and sums are accumulated in `f32`.
//!
//! | setting | cuBLAS compute type | inputs rounded to | PyTorch's name |
//! |---|---|---|---|
//! | [`MatmulPrecision::Highest`] (the default) | `CUBLAS_COMPUTE_32F` | nothing (`f32`) | `"highest"` |
//! | [`MatmulPrecision::High`] | `CUBLAS_COMPUTE_32F_FAST_TF32` | TF32 (10-bit mantissa) | `"high"` |
//! | [`MatmulPrecision::Medium`] | `CUBLAS_COMPUTE_32F_FAST_TF32` | TF32 | `"medium"` |
//!
//! As in PyTorch, it is a permission, not a promise: `"medium"` allows bf16 inputs
//! where a fast bf16 algorithm takes `f32` matrices, and CUDA has none (its bf16
//! products read bf16 matrices, which would need a copy of each operand), so on CUDA
//! `"medium"` computes as `"high"`, as PyTorch does there; the host backend and `f64`
//! products always compute at full precision. What it covers: every `f32` product the
//! CUDA backend hands to cuBLAS (`matmul`, `linear`, the batched products of attention,
//! and their backward steps). It is not autocast: activations, gradients and optimizer
//! state keep their `f32` storage, so memory is what `f32` needs.
//!
//! ```
//! use gpuscope_runtime::precision::{MatmulPrecision, float32_matmul_precision, set_float32_matmul_precision};
//!
//! assert_eq!(float32_matmul_precision(), MatmulPrecision::Highest);
//! let medium: MatmulPrecision = "medium".parse().unwrap();
//! let before = set_float32_matmul_precision(medium);
//! assert_eq!(float32_matmul_precision(), MatmulPrecision::Medium);
//! set_float32_matmul_precision(before);
//! assert!("bf16".parse::<MatmulPrecision>().unwrap_err().to_string().contains("highest, high, medium"));
//! ```

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU8, Ordering};

/// How much precision `f32` matrix products may give up for speed on the GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MatmulPrecision {
    /// Full `f32` arithmetic (the default).
    #[default]
    Highest,
    /// Inputs rounded to TF32 on tensor cores, `f32` accumulation.
    High,
    /// Inputs may be rounded to bf16 where a fast algorithm does so from `f32`
    /// matrices; on CUDA, as [`High`](MatmulPrecision::High) (PyTorch's behaviour).
    Medium,
}

impl MatmulPrecision {
    /// PyTorch's name for it: `"highest"`, `"high"` or `"medium"`.
    pub fn name(self) -> &'static str {
        match self {
            MatmulPrecision::Highest => "highest",
            MatmulPrecision::High => "high",
            MatmulPrecision::Medium => "medium",
        }
    }

    fn from_code(code: u8) -> MatmulPrecision {
        match code {
            1 => MatmulPrecision::High,
            2 => MatmulPrecision::Medium,
            _ => MatmulPrecision::Highest,
        }
    }

    fn code(self) -> u8 {
        match self {
            MatmulPrecision::Highest => 0,
            MatmulPrecision::High => 1,
            MatmulPrecision::Medium => 2,
        }
    }
}

impl fmt::Display for MatmulPrecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A precision name that is not one of PyTorch's three.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown matmul precision `{given}`: expected one of highest, high, medium (as torch.set_float32_matmul_precision)"
)]
pub struct UnknownPrecision {
    /// What was given.
    pub given: String,
}

impl FromStr for MatmulPrecision {
    type Err = UnknownPrecision;

    fn from_str(s: &str) -> Result<MatmulPrecision, UnknownPrecision> {
        match s.trim().to_ascii_lowercase().as_str() {
            "highest" => Ok(MatmulPrecision::Highest),
            "high" => Ok(MatmulPrecision::High),
            "medium" => Ok(MatmulPrecision::Medium),
            _ => Err(UnknownPrecision {
                given: s.to_string(),
            }),
        }
    }
}

static PRECISION: AtomicU8 = AtomicU8::new(0);

/// The precision `f32` matrix products may use now.
#[inline]
pub fn float32_matmul_precision() -> MatmulPrecision {
    MatmulPrecision::from_code(PRECISION.load(Ordering::Relaxed))
}

/// Sets the precision of every later `f32` matrix product in the process (all threads,
/// all devices), returning the previous setting. Products already queued on a stream
/// keep theirs.
pub fn set_float32_matmul_precision(precision: MatmulPrecision) -> MatmulPrecision {
    MatmulPrecision::from_code(PRECISION.swap(precision.code(), Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_parse_loosely() {
        for p in [
            MatmulPrecision::Highest,
            MatmulPrecision::High,
            MatmulPrecision::Medium,
        ] {
            assert_eq!(p.name().parse::<MatmulPrecision>(), Ok(p));
            assert_eq!(MatmulPrecision::from_code(p.code()), p);
            assert_eq!(p.to_string(), p.name());
        }
        assert_eq!(" Medium ".parse(), Ok(MatmulPrecision::Medium));
        let e = "tf32".parse::<MatmulPrecision>().unwrap_err();
        assert_eq!(e.given, "tf32");
        assert!(e.to_string().contains("`tf32`"), "{e}");
    }
}
