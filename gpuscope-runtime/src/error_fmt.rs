//! `Debug` for the errors a program's `main` is likely to return.

/// Implements `Debug` as `Display` for error types, so that a `main` returning one (Rust
/// prints it with `Debug`) shows the message (what went wrong, where, and what to do)
/// rather than the fields it is made from.
macro_rules! debug_as_display {
    ($($t:ty),* $(,)?) => {
        $(
            impl ::std::fmt::Debug for $t {
                fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                    ::std::fmt::Display::fmt(self, f)
                }
            }
        )*
    };
}

pub(crate) use debug_as_display;
