//! False-alarm shape: `mem::forget` of a host `Vec` after taking its pointer, to rebuild it
//! as bytes without a copy (candle and mistral.rs convert tensor data this way).

use candle_core::WithDType;

pub fn into_bytes<T: WithDType>(mut values: Vec<T>) -> Vec<u8> {
    let elem = T::DTYPE.size_in_bytes();
    let len = values.len() * elem;
    let cap = values.capacity() * elem;
    let ptr = values.as_mut_ptr() as *mut u8;
    std::mem::forget(values);
    unsafe { Vec::from_raw_parts(ptr, len, cap) }
}

pub fn leak_names(names: Vec<String>) -> &'static [&'static str] {
    let names: Vec<&'static str> = names
        .into_iter()
        .map(|n| &*Box::leak(n.into_boxed_str()))
        .collect();
    Box::leak(names.into_boxed_slice())
}
