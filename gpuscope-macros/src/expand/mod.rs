//! `#[gpu_scope]` and `#[no_grad]`: find the function, parse the arguments, lint the
//! body (`lint`), then generate the code:
//!
//! - `scope`: the code of `#[gpu_scope]`: the guard, `device = ..`, the escape of
//!   returned values, the async scope;
//! - `no_grad`: the code of `#[no_grad]`;
//! - `returns`: what a function returns ([`returns::ReturnKind`]) and the rewriter of
//!   its `return`s and tail;
//! - `future`: the async block an `async fn`'s body becomes, and the async block a
//!   function returns (`#[async_trait]`'s shape);
//! - `paths`: the runtime path every expansion calls into, and hygienic locals.
//!
//! The user's tokens are never re-spanned: statements and expressions are moved into the
//! output as they are, so type errors in the body keep pointing at the user's code. The
//! locals the expansion adds (`__gpuscope_scope`, `__gpuscope_ret`, ...) are spanned with
//! `Span::mixed_site`, so the body can neither see nor shadow them. Everything the
//! expansion runs is defined once in the runtime (`gpuscope::__private`); the expansion
//! holds calls only.

mod future;
mod no_grad;
mod paths;
mod returns;
mod scope;

use proc_macro2::TokenStream;
use syn::meta::ParseNestedMeta;

use crate::args::{LevelArgs, ScopeArgs, parse_no_grad};
use crate::diagnostics::error_with_item;
use crate::item::{FnItem, Target};
use crate::lint::{self, Attr, LintArgs};

/// `#[gpu_scope(...)]`.
pub(crate) fn gpu_scope(args: TokenStream, item: TokenStream) -> TokenStream {
    let parsed =
        function(&item, Attr::GpuScope).and_then(|f| Ok((f, ScopeArgs::<LintArgs>::parse(args)?)));
    let (mut f, args) = match parsed {
        Ok((Some(f), args)) => (f, args),
        Ok((None, _)) => return item,
        Err(e) => return error_with_item(e, item),
    };
    let lints = lint::lint(&mut f, Attr::GpuScope, &args.lints);
    lints.around(f, |f| scope::expand(f, &args))
}

/// `#[no_grad]`.
pub(crate) fn no_grad(args: TokenStream, item: TokenStream) -> TokenStream {
    let parsed =
        function(&item, Attr::NoGrad).and_then(|f| Ok((f, parse_no_grad::<LintArgs>(args)?)));
    let (mut f, lint_args) = match parsed {
        Ok((Some(f), lint_args)) => (f, lint_args),
        Ok((None, _)) => return item,
        Err(e) => return error_with_item(e, item),
    };
    let lints = lint::lint(&mut f, Attr::NoGrad, &lint_args);
    lints.around(f, no_grad::expand)
}

/// The lint levels of the attributes' arguments are the lint module's to parse.
impl LevelArgs for LintArgs {
    fn parse_meta(&mut self, meta: &ParseNestedMeta<'_>, key: &str) -> syn::Result<bool> {
        LintArgs::parse_meta(self, meta, key)
    }
}

/// The function the attribute is on, or the error saying why there is none. `None`
/// for a function whose body does not parse: it is emitted as written (its arguments
/// checked), so that rustc reports the mistake once. (`tracing-attributes` expands
/// such a body as tokens; but a body wrapped in new braces moves rustc's errors at the
/// closing brace, which then come twice.)
fn function(item: &TokenStream, attr: Attr) -> syn::Result<Option<FnItem>> {
    let name = attr.name();
    let f = match syn::parse2::<Target>(item.clone())? {
        Target::Fn(f) => *f,
        Target::Unparsed => return Ok(None),
        Target::Bodiless { semi } => {
            return Err(syn::Error::new(
                semi,
                format!(
                    "#[{name}] needs a function body: put it on the trait method's default body or on its implementations"
                ),
            ));
        }
        Target::Other { kind, span } => {
            return Err(syn::Error::new(
                span,
                format!(
                    "#[{name}] goes on a function, not on {}{}",
                    kind.description(),
                    kind.hint()
                ),
            ));
        }
    };
    if let Some(constness) = &f.sig.constness {
        let why = match attr {
            Attr::GpuScope => "a const fn cannot open a scope at run time",
            Attr::NoGrad => "grad mode is set at run time",
        };
        return Err(syn::Error::new(
            constness.span,
            format!("#[{name}] cannot go on a `const fn`: {why}"),
        ));
    }
    Ok(Some(f))
}
