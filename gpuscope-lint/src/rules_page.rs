//! [`rules_page`]: every rule's documentation as one Markdown page, the rules page the README
//! links (`docs/lints.md`, kept equal to this by a test of the `gpuscope` command).

use std::fmt::Write as _;

use crate::RULES;

/// The rules page: an index of the rules with their default levels, how to change levels
/// and allow findings, then each rule's docs (what `gpuscope lint --explain RULE` prints).
///
/// ```
/// let page = gpuscope_lint::rules_page();
/// assert!(page.starts_with("# gpuscope lint rules"));
/// for rule in gpuscope_lint::RULES {
///     assert!(page.contains(rule.docs));
/// }
/// ```
pub fn rules_page() -> String {
    let mut page = String::from(
        "# gpuscope lint rules\n\n\
         <!-- Generated from the rules' docs in `gpuscope-lint/src/rules/`: edit those, then\n\
         `UPDATE_EXPECT=1 cargo test -p gpuscope-cli --test lint_cli rules_page`. -->\n\n\
         The rules `gpuscope lint` and the `#[gpu_scope]` / `#[no_grad]` macros apply.\n\
         `gpuscope lint --explain RULE` prints one of these sections.\n\n\
         | rule | default | catches |\n|---|---|---|\n",
    );
    for rule in RULES {
        let _ = writeln!(
            page,
            "| [`{0}`](#{0}) | {1} | {2} |",
            rule.name,
            rule.default,
            rule.summary.replace('|', "\\|")
        );
    }
    page.push_str(LEVELS);
    for rule in RULES {
        page.push('\n');
        page.push_str(rule.docs);
    }
    page
}

const LEVELS: &str = r#"
## Levels and allowing findings

A rule's level is `allow` (off), `warn` (reported; `gpuscope lint` exits 0) or `deny`
(an error: a compile error in the macros, exit code 1 from `gpuscope lint`). From the
loosest scope to the tightest, later ones winning:

1. the defaults above;
2. `gpuscope.toml` (next to the first path linted, or in the current directory):
   ```toml
   [lints]
   graph_accumulation = "deny"

   # Per path: globs relative to the file's directory, matched against each linted file.
   [paths."examples/**"]
   missing_zero_grad = "allow"
   ```
3. the command line: `-A RULE`, `-W RULE`, `-D RULE`;
4. attributes, as with clippy, on any item (function, `impl`, trait, module) and, inside a
   function carrying `#[gpu_scope]`, `#[no_grad]` or `#[gpuscope::lints::allow]`, on a statement:
   ```rust
   #[gpuscope::lints::allow(static_escape)] // a cache kept on purpose
   fn warm_up(dev: &Device) { /* .. */ }

   #[gpu_scope(allow(graph_accumulation), deny(out_of_place_update))]
   fn step(/* .. */) { /* .. */ }
   ```
   `#[gpuscope::lints::allow(..)]` is an attribute macro of the `gpuscope` crate (in a module:
   a macro named `allow` at the crate root would make `#[allow(..)]` ambiguous after
   `use gpuscope::*;`). Why not clippy's spelling: rustc rejects `#[allow(gpuscope::rule)]`
   on stable Rust (unknown tool `gpuscope`, E0710), and attribute macros are not allowed on
   statements on stable (E0658), which is why statement-level allows need an enclosing
   gpuscope attribute to take them off before rustc sees them. `gpuscope lint` reads the
   same attributes, so the macros and the command agree.

An unknown rule name anywhere (attribute, `gpuscope.toml`, command line) is an error that
lists the known rules.
"#;
