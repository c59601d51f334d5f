//! Several GPUs and several processes: the launch environment, a rendezvous store,
//! NCCL collectives on tensors.
//!
//! Where things live:
//! - [`env`](mod@env): [`LaunchEnv`], the variables `torchrun` sets (`RANK`, `WORLD_SIZE`,
//!   `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`);
//! - [`store`]: a key-value store speaking PyTorch's `TCPStore` protocol ([`StoreServer`],
//!   [`StoreClient`]), so a gpuscope job can meet at `torchrun`'s agent store or at its
//!   own;
//! - [`launch`]: [`launch_local`](launch::launch_local), `torchrun --nproc_per_node=N`
//!   for a program's own `--devices N` flag;
//! - [`rendezvous`]: [`Rendezvous`], ranks meeting at the store, with time-outs that
//!   name the missing ranks;
//! - `nccl` (feature `cuda`): NCCL loaded at run time, communicators that never hang;
//! - `ddp` (feature `cuda`): [`DistributedDataParallel`]: gradients bucketed and
//!   averaged across ranks while backward runs;
//! - `group` (feature `cuda`): [`ProcessGroup`], all-reduce, broadcast, all-gather and
//!   reduce-scatter on tensors, with the allocator told which streams use which memory.
//!
//! Two ways to run on several GPUs:
//! - one process per GPU: launch N copies with `torchrun --nproc_per_node=N --no-python
//!   ./program` (or set the variables yourself, on one machine or several) and call
//!   `ProcessGroup::from_env()` in each;
//! - one process driving N GPUs: `ProcessGroup::local(&[Device::cuda(0)?, Device::cuda(1)?], timeout)`,
//!   and pass one tensor per device to each collective.

pub mod env;
mod error;
pub mod launch;
pub mod rendezvous;
pub mod store;

#[cfg(feature = "cuda")]
pub mod ddp;
#[cfg(feature = "cuda")]
pub mod group;
#[cfg(feature = "cuda")]
pub mod nccl;

pub use env::LaunchEnv;
pub use error::DistError;
pub use rendezvous::Rendezvous;
pub use store::{StoreClient, StoreServer};

#[cfg(feature = "cuda")]
pub use ddp::DistributedDataParallel;
#[cfg(feature = "cuda")]
pub use group::{ProcessGroup, ReduceOp, Registration, Work};
