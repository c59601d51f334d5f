//! Runtime behaviour of `#[gpu_scope]`, `#[no_grad]` and `#[derive(ScopeValue)]` on the
//! host device: what escapes, what is reported (read back from `tracing` through a test
//! layer), nesting, threads, panics, async functions and grad mode.
//!
//! Where things live: `support` (capturing `tracing` events, finding columns, a tiny
//! executor), then one file per subject: `escape`, `leaks`, `nesting` (with threads and
//! panics), `async_fns`, `arguments` (with the documented limits), `grad_mode`.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

use gpuscope::scope::{current_scope, scope_depth, set_tracking};
use gpuscope::{
    Device, ScopeValue, Tensor, TensorError, gpu_scope, is_grad_enabled, keep, no_grad,
};
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context as LayerContext, SubscriberExt};

mod arguments;
mod async_fns;
mod escape;
mod grad_mode;
mod leaks;
mod nesting;
mod support;
