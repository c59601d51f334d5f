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

#[cfg(test)]
mod tests {
    use crate::alloc::{AllocConfig, AllocError};
    use crate::{DeviceError, TensorError};

    /// What `fn main() -> Result<(), E>` prints for a bad configuration: the message and
    /// its help line, not the error's fields.
    #[test]
    fn a_main_returning_an_error_prints_its_message() {
        let bad = "share_across_streams:yes"
            .parse::<AllocConfig>()
            .unwrap_err();
        let device = DeviceError::from(bad.clone());
        let tensor = TensorError::from(DeviceError::from(bad.clone()));
        let alloc = AllocError::from(bad);
        for (debug, display) in [
            (format!("{device:?}"), device.to_string()),
            (format!("{tensor:?}"), tensor.to_string()),
            (format!("{alloc:?}"), alloc.to_string()),
        ] {
            assert_eq!(debug, display);
            assert!(
                debug.contains("`share_across_streams` takes True or False, got `yes`"),
                "{debug}"
            );
            assert!(
                debug.contains("help: write `share_across_streams:True`"),
                "{debug}"
            );
            assert!(!debug.contains("ConfigError {"), "{debug}");
        }
    }
}
