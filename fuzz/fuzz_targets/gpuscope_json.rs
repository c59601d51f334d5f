//! The gpuscope snapshot JSON reader (what `gpuscope view` reads) on arbitrary bytes: a
//! snapshot or an error naming the file, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = gpuscope_runtime::memory::read_json(data, "fuzz.json");
});
