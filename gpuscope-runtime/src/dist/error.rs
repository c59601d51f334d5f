//! [`DistError`]: what can go wrong between processes and GPUs.

use std::time::Duration;

/// An error of the distributed layer: the launch environment, the rendezvous store,
/// NCCL, or a collective's arguments. Each says what failed, where, and what to do
/// (`Debug` prints the same message, for a `main` that returns it).
#[derive(thiserror::Error)]
pub enum DistError {
    /// A launch variable (`RANK`, `WORLD_SIZE`, ...) is missing or malformed.
    #[error("{var}={value:?}: {problem}")]
    Env {
        /// The variable.
        var: &'static str,
        /// Its value (empty when unset).
        value: String,
        /// What is wrong, and what to do.
        problem: String,
    },
    /// The rendezvous store could not be reached in time.
    #[error(
        "could not connect to the rendezvous store at {addr} within {waited:?}: {source} (is rank 0 running, and MASTER_ADDR/MASTER_PORT the same on every rank?)"
    )]
    Connect {
        /// `host:port`.
        addr: String,
        /// How long connecting was retried.
        waited: Duration,
        /// The last connection error.
        #[source]
        source: std::io::Error,
    },
    /// The rendezvous store could not listen on its port.
    #[error(
        "the rendezvous store could not listen on {addr}: {source} (another program holds the port? choose another MASTER_PORT)"
    )]
    Bind {
        /// `host:port`.
        addr: String,
        /// The error from `bind`.
        #[source]
        source: std::io::Error,
    },
    /// Something did not happen in time: a rank did not join, a key was never set, a
    /// collective did not complete.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was waited for (with which ranks are missing, where known).
        what: String,
        /// How long.
        after: Duration,
    },
    /// The peer does not speak the store protocol, or sent something malformed.
    #[error("rendezvous store at {addr}: {detail}")]
    Protocol {
        /// `host:port`.
        addr: String,
        /// What was wrong.
        detail: String,
    },
    /// The connection to the store failed mid-conversation.
    #[error("rendezvous store at {addr}: {source}")]
    Io {
        /// `host:port`.
        addr: String,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// NCCL could not be loaded, or a call failed.
    #[error("{call}: {message}")]
    Nccl {
        /// The NCCL function (or `loading libnccl`).
        call: &'static str,
        /// NCCL's own description, and what to do where known.
        message: String,
    },
    /// A collective's arguments do not fit (dtypes, sizes, devices).
    #[error("{op}: {problem}")]
    Argument {
        /// The operation (`all_reduce`, ...).
        op: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// A device, tensor or allocator call failed.
    #[error(transparent)]
    Tensor(#[from] crate::tensor::TensorError),
    /// A backend call (streams, events) failed.
    #[error(transparent)]
    Backend(#[from] crate::backend::BackendError),
    /// Opening a device failed.
    #[error(transparent)]
    Device(#[from] crate::device::DeviceError),
}

crate::error_fmt::debug_as_display!(DistError);
