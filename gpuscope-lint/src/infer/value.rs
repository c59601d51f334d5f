//! What is known of a value ([`Value`]): whether it holds device memory ([`Kind`]),
//! whether it carries a loss's autograd graph ([`Graph`]), whether this function made it
//! (`fresh`), whether it is a borrow, whether it is on the CPU (`on_cpu`).
//! [`Env`](super::Env) infers it for expressions.

use super::types::{Kind, TypeInfo};

/// Whether a value carries a loss's autograd graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Graph {
    /// A plain number, a detached tensor, gradients: no graph.
    Detached,
    /// A tensor that carries a loss's autograd graph.
    Loss,
    /// Cannot tell.
    Unknown,
}

impl Graph {
    pub(super) fn join(self, other: Graph) -> Graph {
        match (self, other) {
            (Graph::Loss, _) | (_, Graph::Loss) => Graph::Loss,
            (Graph::Detached, Graph::Detached) => Graph::Detached,
            _ => Graph::Unknown,
        }
    }
}

/// What is known of a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Value {
    pub(crate) kind: Kind,
    pub(crate) graph: Graph,
    /// Made in this function (a constructor or an op), not a parameter or a field read.
    pub(crate) fresh: bool,
    /// A reference to something owned elsewhere.
    pub(crate) borrowed: bool,
    /// `&mut` reference.
    pub(crate) mutable: bool,
    /// The name of its type, when declared (for typing field accesses on the file's structs).
    pub(crate) name: Option<String>,
    /// An empty container or a default value (`Vec::new()`, `Default::default`, `None`):
    /// storing it stores nothing.
    pub(crate) empty: bool,
    /// Known to be on the CPU: a tensor made there (`Tensor::new(.., &Device::Cpu)`) or
    /// computed from such tensors, or (a host value) the CPU device itself. Reading it
    /// waits for no device. See `placement.rs`.
    pub(crate) on_cpu: bool,
}

impl Value {
    pub(crate) const UNKNOWN: Value = Value {
        kind: Kind::Unknown,
        graph: Graph::Unknown,
        fresh: false,
        borrowed: false,
        mutable: false,
        name: None,
        empty: false,
        on_cpu: false,
    };

    /// A host value: a number, a string, a `Vec<f32>`.
    pub(crate) const HOST: Value = Value {
        kind: Kind::Host,
        graph: Graph::Detached,
        ..Value::UNKNOWN
    };

    /// A tensor this function made.
    pub(crate) const FRESH_TENSOR: Value = Value {
        kind: Kind::Device,
        fresh: true,
        ..Value::UNKNOWN
    };

    /// The value of a declared type.
    pub(crate) fn of_type(info: TypeInfo) -> Value {
        Value {
            kind: info.kind,
            graph: if info.kind == Kind::Host {
                Graph::Detached
            } else {
                Graph::Unknown
            },
            fresh: false,
            borrowed: info.borrowed,
            mutable: info.mutable,
            name: info.name,
            empty: false,
            on_cpu: false,
        }
    }

    /// A loss computed here: a fresh tensor carrying a graph.
    pub(super) fn loss() -> Value {
        Value {
            graph: Graph::Loss,
            ..Value::FRESH_TENSOR
        }
    }

    /// Whether the value holds device memory that it owns (not a borrow).
    pub(crate) fn owns_device_memory(&self) -> bool {
        self.kind == Kind::Device && !self.borrowed
    }

    pub(super) fn owned(mut self) -> Value {
        self.borrowed = false;
        self.mutable = false;
        self
    }

    pub(super) fn join(&self, other: &Value) -> Value {
        Value {
            kind: self.kind.join(other.kind),
            graph: self.graph.join(other.graph),
            fresh: self.fresh || other.fresh,
            borrowed: self.borrowed && other.borrowed,
            mutable: false,
            name: if self.name == other.name {
                self.name.clone()
            } else {
                None
            },
            empty: self.empty && other.empty,
            on_cpu: self.on_cpu && other.on_cpu,
        }
    }
}
