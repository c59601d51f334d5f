//! What `gpuscope replay` does with a file's bytes once read: gzip decompression, the
//! kind of input, and the trace or PyTorch snapshot parsed from it, on arbitrary bytes:
//! a trace or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = gpuscope_cli::fuzzing::replay_input(data);
});
