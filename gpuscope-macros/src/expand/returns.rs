//! What a function returns, and the rewriter that wraps each value it returns.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::visit_mut::VisitMut;
use syn::{Expr, ReturnType, Stmt, Type};

/// What the function returns, for escaping.
pub(super) enum ReturnKind<'a> {
    /// `()`, nothing, or `!`: nothing to escape.
    Nothing,
    /// A type that can annotate a `let`.
    Type(&'a Type),
    /// A type with `impl Trait` in it: the `let` is left unannotated.
    Opaque,
}

impl<'a> ReturnKind<'a> {
    pub(super) fn of(output: &'a ReturnType) -> ReturnKind<'a> {
        let ReturnType::Type(_, ty) = output else {
            return ReturnKind::Nothing;
        };
        match &**ty {
            Type::Never(_) => ReturnKind::Nothing,
            Type::Tuple(t) if t.elems.is_empty() => ReturnKind::Nothing,
            ty if contains_impl_trait(ty) => ReturnKind::Opaque,
            ty => ReturnKind::Type(ty),
        }
    }

    pub(super) fn escapes(&self) -> bool {
        !matches!(self, ReturnKind::Nothing)
    }

    /// Where the declared type is written.
    pub(super) fn span(&self) -> Option<Span> {
        match self {
            ReturnKind::Type(ty) => Some(ty.span()),
            _ => None,
        }
    }

    /// `: Type`, or nothing.
    pub(super) fn annotation(&self) -> Option<TokenStream> {
        match self {
            ReturnKind::Type(ty) => Some(quote!(: #ty)),
            _ => None,
        }
    }
}

fn contains_impl_trait(ty: &Type) -> bool {
    struct Finder(bool);
    impl<'ast> Visit<'ast> for Finder {
        fn visit_type_impl_trait(&mut self, _: &'ast syn::TypeImplTrait) {
            self.0 = true;
        }
    }
    let mut finder = Finder(false);
    finder.visit_type(ty);
    finder.0
}

/// Replaces every value the function returns in `stmts` (each `return <expr>` of the
/// function itself, and the tail expression) with `wrap(<expr>)`.
pub(super) fn rewrite_returns(stmts: &mut [Stmt], wrap: &dyn Fn(TokenStream) -> Expr) {
    let mut rewriter = Returns { wrap };
    for stmt in stmts.iter_mut() {
        rewriter.visit_stmt_mut(stmt);
    }
    if let Some(last) = stmts.last_mut() {
        match last {
            Stmt::Expr(e, None) => *e = wrap(e.to_token_stream()),
            Stmt::Macro(m) if m.semi_token.is_none() => {
                *last = Stmt::Expr(wrap(m.to_token_stream()), None)
            }
            _ => {}
        }
    }
}

/// Rewrites every `return <expr>` of the function itself (not of closures, async blocks
/// or nested items) with `wrap`.
struct Returns<'a> {
    wrap: &'a dyn Fn(TokenStream) -> Expr,
}

impl VisitMut for Returns<'_> {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        match e {
            // Their `return`s are their own.
            Expr::Closure(_) | Expr::Async(_) | Expr::Const(_) => {}
            Expr::Return(r) => {
                if let Some(value) = &mut r.expr {
                    self.visit_expr_mut(value);
                    **value = (self.wrap)(value.to_token_stream());
                }
            }
            _ => syn::visit_mut::visit_expr_mut(self, e),
        }
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(body: TokenStream) -> String {
        let block: syn::Block = syn::parse2(quote!({ #body })).unwrap();
        let mut stmts = block.stmts;
        rewrite_returns(&mut stmts, &|e| Expr::Verbatim(quote!(w(#e))));
        squash(quote!(#(#stmts)*))
    }

    /// The tokens as text without spaces (`| |` and `||` print alike).
    fn squash(tokens: TokenStream) -> String {
        tokens.to_string().split_whitespace().collect()
    }

    #[test]
    fn rewrites_the_function_returns_only() {
        assert_eq!(
            rewritten(quote!(if a { return x; } let f = || { return 1; }; y)),
            squash(quote!(if a { return w(x); } let f = || { return 1; }; w(y)))
        );
        assert_eq!(
            rewritten(quote!(let b = async { return 2; }; fn g() -> u8 { return 3 } vec![])),
            squash(quote!(let b = async { return 2; }; fn g() -> u8 { return 3 } w(vec![])))
        );
        // Nested returns inside a returned expression are rewritten too; `return;` is left.
        assert_eq!(
            rewritten(quote!(return match a { 0 => return b, _ => c };)),
            squash(quote!(return w(match a { 0 => return w(b), _ => c });))
        );
        assert_eq!(
            rewritten(quote!(f(); return;)),
            squash(quote!(f(); return;))
        );
    }

    #[test]
    fn kinds() {
        let kind = |ret: TokenStream| {
            let output: ReturnType = syn::parse2(ret).unwrap();
            match ReturnKind::of(&output) {
                ReturnKind::Nothing => "nothing",
                ReturnKind::Type(_) => "type",
                ReturnKind::Opaque => "opaque",
            }
        };
        assert_eq!(kind(quote!()), "nothing");
        assert_eq!(kind(quote!(-> ())), "nothing");
        assert_eq!(kind(quote!(-> !)), "nothing");
        assert_eq!(kind(quote!(-> Tensor)), "type");
        assert_eq!(kind(quote!(-> Vec<impl Fn()>)), "opaque");
    }
}
