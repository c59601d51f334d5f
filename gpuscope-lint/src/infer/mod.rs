//! Local, best-effort type inference: what each value in a function is.
//!
//! - `file_index.rs`: [`FileIndex`], what a file declares (imports, structs, aliases,
//!   return types, statics, consts) and the tensor libraries it uses;
//! - `types.rs`: [`Kind`] and [`Types`], what a declared type says about its values;
//! - `value.rs`: [`Value`] and [`Graph`], what is known of a value and how two join;
//! - `env.rs`: [`Env`], the bindings of a function (closures bound to a name with what
//!   their calls return) and the inference of an expression's value;
//! - `names.rs`: what identifiers say (loss names), the weakest evidence;
//! - `placement.rs`: whether a value is known to be on the CPU;
//! - `typed_backend.rs`: whether a function runs on burn's or dfdx's CPU backend, as the
//!   backend and device types it names show.

mod env;
mod file_index;
mod names;
mod placement;
mod releases;
mod typed_backend;
mod types;
mod value;

pub(crate) use env::Env;
pub(crate) use file_index::FileIndex;
pub(crate) use placement::MOVES;
pub(crate) use types::{Kind, Types};
pub(crate) use value::{Graph, Value};
