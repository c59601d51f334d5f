//! Element types: [`DType`] (defined in the leaf module [`crate::dtype`], re-exported
//! here) and [`Element`], the Rust types that are tensor elements.

use half::{bf16, f16};

pub use crate::dtype::DType;

/// A Rust type that is a tensor element.
pub trait Element: Copy + Send + Sync + 'static + std::fmt::Debug {
    /// Its dtype.
    const DTYPE: DType;
    /// From an `f64` (rounded as `as` does).
    fn from_f64(v: f64) -> Self;
    /// To an `f64`.
    fn to_f64(self) -> f64;
}

macro_rules! element {
    ($t:ty, $d:ident, $from:expr, $to:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline]
            fn from_f64(v: f64) -> Self {
                $from(v)
            }
            #[inline]
            fn to_f64(self) -> f64 {
                $to(self)
            }
        }
    };
}
element!(f32, F32, |v| v as f32, |x: f32| x as f64);
element!(f64, F64, |v| v, |x: f64| x);
element!(f16, F16, f16::from_f64, |x: f16| x.to_f64());
element!(bf16, BF16, bf16::from_f64, |x: bf16| x.to_f64());
element!(i32, I32, |v| v as i32, |x: i32| x as f64);
element!(i64, I64, |v| v as i64, |x: i64| x as f64);
element!(u8, U8, |v| v as u8, |x: u8| x as f64);

/// Writes `v` as `dtype` into `out` (little-endian, `dtype.size()` bytes).
pub(crate) fn write_scalar(dtype: DType, v: f64, out: &mut [u8]) {
    match dtype {
        DType::F32 => out.copy_from_slice(&(v as f32).to_le_bytes()),
        DType::F64 => out.copy_from_slice(&v.to_le_bytes()),
        DType::F16 => out.copy_from_slice(&f16::from_f64(v).to_le_bytes()),
        DType::BF16 => out.copy_from_slice(&bf16::from_f64(v).to_le_bytes()),
        DType::I32 => out.copy_from_slice(&(v as i32).to_le_bytes()),
        DType::I64 => out.copy_from_slice(&(v as i64).to_le_bytes()),
        DType::U8 => out[0] = v as u8,
    }
}

/// Reads one `dtype` value from `bytes`.
pub(crate) fn read_scalar(dtype: DType, b: &[u8]) -> f64 {
    match dtype {
        DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        DType::F64 => f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        DType::F16 => f16::from_le_bytes([b[0], b[1]]).to_f64(),
        DType::BF16 => bf16::from_le_bytes([b[0], b[1]]).to_f64(),
        DType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        DType::I64 => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f64,
        DType::U8 => b[0] as f64,
    }
}
