//! Unit tests of the argument parser (with the crate's lint levels).

use super::*;
use crate::lint::LintArgs;
use quote::quote;

fn err(tokens: TokenStream) -> String {
    match ScopeArgs::<LintArgs>::parse(tokens) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn parses_everything() {
    let args = ScopeArgs::<LintArgs>::parse(quote!(
        name = "step",
        leaks = "deny",
        sync,
        device = &self.device
    ))
    .unwrap();
    assert_eq!(args.name.unwrap().value(), "step");
    assert_eq!(args.leaks, Some(Leaks::Deny));
    assert!(args.sync);
    assert!(args.device.is_some());
    let args = ScopeArgs::<LintArgs>::parse(quote!(sync = false,)).unwrap();
    assert!(!args.sync);
    let args = ScopeArgs::<LintArgs>::parse(TokenStream::new()).unwrap();
    assert!(args.name.is_none() && args.leaks.is_none() && !args.sync && args.device.is_none());
}

#[test]
fn errors() {
    assert_eq!(
        err(quote!(leak = "warn")),
        "unknown argument `leak` for #[gpu_scope]: expected `name`, `leaks`, `sync`, `device`, `allow`, `warn` or `deny`; did you mean `leaks`?"
    );
    assert!(err(quote!(nme = "x")).ends_with("did you mean `name`?"));
    assert!(err(quote!(name = "a", name = "b")).contains("more than once"));
    assert!(err(quote!(name = 3)).contains("string literal"));
    assert!(err(quote!(name = "")).contains("empty"));
    assert_eq!(
        err(quote!(leaks = "maybe")),
        "unknown leak policy `maybe`: expected \"warn\", \"deny\" or \"allow\""
    );
    assert!(err(quote!(leaks = "Deny")).ends_with("did you mean `deny`?"));
    assert!(err(quote!(leaks = deny)).contains("leaks = \"deny\""));
    assert!(err(quote!(sync = 1)).contains("is a flag"));
    assert!(err(quote!(sync(true))).contains("is a flag"));
    assert!(err(quote!(device)).contains("needs a value"));
    assert!(err(quote!(name("x"))).contains("takes a value with `=`"));
    assert!(parse_no_grad::<LintArgs>(quote!(foo)).is_err());
    assert!(parse_no_grad::<LintArgs>(TokenStream::new()).is_ok());
    let lints =
        parse_no_grad::<LintArgs>(quote!(allow(forget_tensor), deny(graph_accumulation))).unwrap();
    assert_eq!(lints.overrides.len(), 2);
    assert!(
        parse_no_grad::<LintArgs>(quote!(allow(forget_tensr)))
            .unwrap_err()
            .to_string()
            .contains("did you mean `forget_tensor`?")
    );
    assert!(parse_no_grad::<LintArgs>(quote!(allow)).is_err());
    assert!(parse_no_grad::<LintArgs>(quote!(allow())).is_err());
    let args =
        ScopeArgs::<LintArgs>::parse(quote!(__gpuscope_linted, name = "x", warn(static_escape)))
            .unwrap();
    assert!(args.lints.linted);
    assert_eq!(
        args.lints.overrides,
        vec![("static_escape".to_string(), gpuscope_lint::Level::Warn)]
    );
}

/// The parser on its own, with levels that take nothing (as a fuzz target may use it).
#[test]
fn without_lint_levels() {
    #[derive(Default)]
    struct NoLevels;
    impl LevelArgs for NoLevels {
        fn parse_meta(&mut self, _: &ParseNestedMeta<'_>, _: &str) -> syn::Result<bool> {
            Ok(false)
        }
    }
    let args = ScopeArgs::<NoLevels>::parse(quote!(name = "a", sync)).unwrap();
    assert_eq!(args.name.unwrap().value(), "a");
    // Not handled by the levels: an unknown argument, with the full list.
    let e = ScopeArgs::<NoLevels>::parse(quote!(allow(forget_tensor)))
        .err()
        .unwrap();
    assert!(
        e.to_string()
            .starts_with("unknown argument `allow` for #[gpu_scope]")
    );
    assert!(parse_no_grad::<NoLevels>(quote!(deny(x))).is_err());
    assert!(parse_no_grad::<NoLevels>(TokenStream::new()).is_ok());
}

/// Hostile input gives an error, never a panic.
#[test]
fn malformed() {
    for tokens in [
        quote!(name =),
        quote!(= "x"),
        quote!(name "x"),
        quote!(,,),
        quote!(a::b = 1),
        quote!(name = "a" "b"),
        quote!(leaks = 3),
        quote!(leaks),
        quote!(device(self.device)),
        quote!(sync = "yes"),
        quote!(allow(a::b)),
        quote!(allow(forget_tensor = 1)),
        quote!(warn()),
        quote!(1),
    ] {
        assert!(
            ScopeArgs::<LintArgs>::parse(tokens.clone()).is_err(),
            "accepted: {tokens}"
        );
    }
}

/// What is not an argument is named, with what was expected.
#[test]
fn not_arguments() {
    let expected = "expected an argument of #[gpu_scope] (`name`, `leaks`, `sync`, `device`, `allow`, `warn` or `deny`)";
    assert_eq!(err(quote!("step")), format!("{expected}, found `\"step\"`"));
    assert_eq!(err(quote!(,)), format!("{expected}, found `,`"));
    assert_eq!(
        err(quote!(sync,, name = "a")),
        format!("{expected}, found `,`")
    );
    assert_eq!(err(quote!(sync, 3)), format!("{expected}, found `3`"));
    assert_eq!(
        err(quote!(name = "a" sync)),
        "expected `,` between arguments, found `sync`"
    );
    assert_eq!(
        err(quote!(name = , sync)),
        "`name` needs a value after `=`: `name = \"train_step\"`"
    );
    assert_eq!(
        err(quote!(device =)),
        "`device` needs a value after `=`: `device = &self.device`"
    );
    assert!(err(quote!(sync =)).contains("is a flag"));
    assert_eq!(
        err(quote!(a::b = 1)),
        "expected an argument name such as `name`"
    );
    assert!(
        parse_no_grad::<LintArgs>(quote!("x"))
            .err()
            .unwrap()
            .to_string()
            .starts_with(
                "expected a lint level of #[no_grad] (`allow(..)`, `warn(..)` or `deny(..)`), found"
            )
    );
    // Trailing commas are fine.
    assert!(ScopeArgs::<LintArgs>::parse(quote!(sync, name = "a",)).is_ok());
}
