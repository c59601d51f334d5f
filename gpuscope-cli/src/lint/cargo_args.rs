//! `cargo gpuscope lint ..` runs a binary named `cargo-gpuscope` with the arguments
//! `gpuscope lint ..`: cargo repeats the subcommand's name. `src/bin/cargo-gpuscope.rs` is
//! that binary (it calls the same `main` as `gpuscope`), and `main` parses the command line
//! through [`cargo_subcommand_args`], which drops the repeat.

use std::ffi::OsString;

/// The command line as a `cargo-gpuscope` binary receives it from `cargo gpuscope lint ..`
/// (`cargo-gpuscope gpuscope lint ..`), without the repeated `gpuscope`; any other command
/// line unchanged.
pub fn cargo_subcommand_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    if args.get(1).is_some_and(|a| a == "gpuscope") {
        args.remove(1);
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_args_drop_the_repeated_subcommand() {
        let args = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            cargo_subcommand_args(args(&["cargo-gpuscope", "gpuscope", "lint"])),
            args(&["cargo-gpuscope", "lint"])
        );
        assert_eq!(
            cargo_subcommand_args(args(&["gpuscope", "lint", "gpuscope"])),
            args(&["gpuscope", "lint", "gpuscope"])
        );
    }
}
