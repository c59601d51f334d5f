//! Interners: strings and shapes kept once for the life of the process, so that the
//! tracking records can point at them with plain `&'static` references. A leaf module:
//! it imports nothing else of the crate.
//!
//! Both hold few distinct values (a device label per device; shapes of more than six
//! dimensions), so a locked list searched linearly is enough.

use std::sync::{Mutex, MutexGuard};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Interns a device label (`cuda:0 (NVIDIA H100 80GB HBM3)`): one copy per distinct
/// label, never freed.
///
/// ```
/// use gpuscope_runtime::intern::label;
/// let a = label("host:0 (host)".to_string());
/// let b = label("host:0 (host)".to_string());
/// assert!(std::ptr::eq(a, b));
/// ```
pub fn label(label: String) -> &'static str {
    static LABELS: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut all = lock(&LABELS);
    if let Some(s) = all.iter().find(|s| **s == label) {
        return s;
    }
    let s: &'static str = Box::leak(label.into_boxed_str());
    all.push(s);
    s
}

/// Interns a shape (the tracking records do it for shapes longer than they store
/// inline): one copy per distinct shape, never freed.
///
/// ```
/// use gpuscope_runtime::intern::shape;
/// let a = shape(&[1, 2, 3, 4, 5, 6, 7]);
/// assert!(std::ptr::eq(a, shape(&[1, 2, 3, 4, 5, 6, 7])));
/// ```
pub fn shape(shape: &[usize]) -> &'static [usize] {
    static SHAPES: Mutex<Vec<&'static [usize]>> = Mutex::new(Vec::new());
    let mut all = lock(&SHAPES);
    if let Some(s) = all.iter().find(|s| **s == shape) {
        return s;
    }
    let s: &'static [usize] = Box::leak(shape.to_vec().into_boxed_slice());
    all.push(s);
    s
}
