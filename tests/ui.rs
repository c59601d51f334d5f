//! Compile tests of the macros (trybuild): every supported shape compiles (and runs)
//! without warnings, and every misuse is one error at the right token. Regenerate the
//! expected `.stderr` files with `TRYBUILD=overwrite cargo test --test ui`, then read
//! each one.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
