//! NCCL, loaded at run time: [`ffi`] (the C functions and types), [`comm`] (one
//! communicator per GPU, with time-outs and abort).

pub mod comm;
pub mod ffi;
