//! The PyTorch snapshot reader (pickle decoding and the snapshot's structure) on
//! arbitrary bytes: a snapshot or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = gpuscope_cli::fuzzing::pytorch_snapshot(data);
});
