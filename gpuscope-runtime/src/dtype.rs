//! Element types, as plain data: [`DType`] (what the tracking records, snapshots and
//! tensors all name). A leaf module: it imports nothing else of the crate, so that the
//! record layer and the scopes can name a dtype without depending on tensors.
//! (The Rust element types, [`Element`](crate::tensor::Element), live with the tensors.)

/// A tensor's element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "lowercase")
)]
pub enum DType {
    /// 32-bit float.
    F32,
    /// 64-bit float (host-side gradient checks, reductions).
    F64,
    /// IEEE half.
    F16,
    /// bfloat16.
    BF16,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// Byte.
    U8,
}

impl DType {
    /// Every dtype, in declaration order (`DType::ALL[d as usize] == d`).
    ///
    /// ```
    /// use gpuscope_runtime::dtype::DType;
    /// assert!(DType::ALL.iter().enumerate().all(|(i, d)| *d as usize == i));
    /// ```
    pub const ALL: [DType; 7] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::U8,
    ];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::U8 => 1,
        }
    }

    /// Whether it is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
        })
    }
}
