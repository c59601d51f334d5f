//! Code generation for `#[gpu_scope]` and `#[no_grad]`.
//!
//! The user's tokens are never re-spanned: statements and expressions are moved into the
//! output as they are, so type errors in the body keep pointing at the user's code. The
//! locals the expansion adds (`__gpuscope_scope`, `__gpuscope_ret`, ...) are spanned with
//! [`Span::mixed_site`], so the body can neither see nor shadow them.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::visit_mut::VisitMut;
use syn::{Expr, ExprAsync, ReturnType, Stmt, Type};

use crate::args::{Leaks, ScopeArgs, parse_no_grad};
use crate::diagnostics::error_with_item;
use crate::item::{FnItem, Target};
use crate::lint::{self, Attr};

/// `#[gpu_scope(...)]`.
pub(crate) fn gpu_scope(args: TokenStream, item: TokenStream) -> TokenStream {
    let parsed = function(&item, Attr::GpuScope).and_then(|f| Ok((f, ScopeArgs::parse(args)?)));
    let (mut f, args) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => return error_with_item(e, item),
    };
    let lints = lint::lint(&mut f, Attr::GpuScope, &args.lints);
    lints.around(f, |f| expand_scope(f, &args))
}

/// `#[no_grad]`.
pub(crate) fn no_grad(args: TokenStream, item: TokenStream) -> TokenStream {
    let parsed = function(&item, Attr::NoGrad).and_then(|f| Ok((f, parse_no_grad(args)?)));
    let (mut f, lint_args) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => return error_with_item(e, item),
    };
    let lints = lint::lint(&mut f, Attr::NoGrad, &lint_args);
    lints.around(f, expand_no_grad)
}

/// The function the attribute is on, or the error saying why there is none.
fn function(item: &TokenStream, attr: Attr) -> syn::Result<FnItem> {
    let name = attr.name();
    let f = match syn::parse2::<Target>(item.clone())? {
        Target::Fn(f) => *f,
        Target::Bodiless { semi } => {
            return Err(syn::Error::new(
                semi,
                format!(
                    "#[{name}] needs a function body: put it on the trait method's default body or on its implementations"
                ),
            ));
        }
        Target::Other { what, span } => {
            let hint = match what {
                "an impl block" | "a trait" => "; put it on the methods that should have it",
                _ => "",
            };
            return Err(syn::Error::new(
                span,
                format!("#[{name}] goes on a function, not on {what}{hint}"),
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
    Ok(f)
}

// ---------------------------------------------------------------------------------------
// Paths and locals of the expansion.

fn private() -> TokenStream {
    quote!(::gpuscope::__private)
}

fn local(name: &str) -> proc_macro2::Ident {
    proc_macro2::Ident::new(name, Span::mixed_site())
}

/// `ScopeOptions { name, file, line, column, leaks, sync }`, the site being the
/// function's name.
fn scope_options(f: &FnItem, args: &ScopeArgs) -> TokenStream {
    let p = private();
    let ident = &f.sig.ident;
    let name = scope_name(f, args);
    // `line!()` and `column!()` spanned at the function's name report its position.
    let line = quote_spanned!(ident.span()=> ::core::line!());
    let column = quote_spanned!(ident.span()=> ::core::column!());
    let file = quote_spanned!(ident.span()=> ::core::file!());
    let leaks = match args.leaks {
        None => quote!(::core::option::Option::None),
        Some(l) => {
            let variant = match l {
                Leaks::Warn => quote!(Warn),
                Leaks::Deny => quote!(Deny),
                Leaks::Allow => quote!(Allow),
            };
            quote!(::core::option::Option::Some(#p::LeakPolicy::#variant))
        }
    };
    let sync = args.sync;
    quote! {
        #p::ScopeOptions {
            name: #name,
            file: #file,
            line: #line,
            column: #column,
            leaks: #leaks,
            sync: #sync,
        }
    }
}

/// Marks the tensors in `value` as returned from the scope `guard`, through the
/// traits of [`escape_traits`].
fn escape(value: &proc_macro2::Ident, guard: &proc_macro2::Ident) -> TokenStream {
    let p = private();
    // `allow(unreachable_code)`: when the returned expression diverges (`todo!()`,
    // `loop { .. return x; }`), this is the first unreachable statement, and rustc
    // reports only the first one.
    quote! {
        #[allow(unreachable_code)]
        {
            #[allow(unused_imports)]
            use __gpuscope_escape::{All as _, None as _, Ok as _};
            (&&&#p::Escapee(&#value)).__gpuscope_escape(&#guard);
        }
    }
}

/// A module of three traits with one method name, for autoref dispatch on
/// `&&&Escapee(&value)`: method lookup tries the receiver `&&&Escapee` (then
/// `&&&&Escapee`), then `&&Escapee`, then `&Escapee`, so the first impl that applies
/// wins:
///
/// 1. `All` on `&&Escapee<T>` with `T: ScopeValue`: every tensor in the value escapes;
/// 2. `Ok` on `&Escapee<Result<T, E>>` with `T: ScopeValue` (and an `E` that is not,
///    such as `TensorError` or `Box<dyn Error>`): the `Ok` value escapes;
/// 3. `None` on `Escapee<T>`: any other type holds no tensor a scope could find.
///
/// (The runtime's `EscapeScopeValue`/`EscapeOther` pair has no room for the middle
/// rung.) The traits live in a module imported only where a value escapes, so that a
/// `#[gpu_scope]` function nested in another's body does not see two candidates.
fn escape_traits() -> TokenStream {
    let p = private();
    quote! {
        #[allow(dead_code, non_snake_case)]
        mod __gpuscope_escape {
            pub trait All {
                fn __gpuscope_escape(&self, guard: &#p::ScopeGuard);
            }
            impl<T: #p::ScopeValue + ?::core::marker::Sized> All for &&#p::Escapee<'_, T> {
                #[inline]
                fn __gpuscope_escape(&self, guard: &#p::ScopeGuard) {
                    guard.escape(self.0)
                }
            }
            pub trait Ok {
                fn __gpuscope_escape(&self, guard: &#p::ScopeGuard);
            }
            impl<T: #p::ScopeValue, E> Ok for &#p::Escapee<'_, ::core::result::Result<T, E>> {
                #[inline]
                fn __gpuscope_escape(&self, guard: &#p::ScopeGuard) {
                    if let ::core::result::Result::Ok(value) = self.0 {
                        guard.escape(value)
                    }
                }
            }
            pub trait None {
                fn __gpuscope_escape(&self, guard: &#p::ScopeGuard);
            }
            impl<T: ?::core::marker::Sized> None for #p::Escapee<'_, T> {
                #[inline]
                fn __gpuscope_escape(&self, _: &#p::ScopeGuard) {}
            }
        }
    }
}

/// The statements that evaluate `device = <expr>`: checked to be (or deref to) a
/// `Device`; with `sync`, a guard that waits for the whole device when dropped.
fn device_statements(args: &ScopeArgs, name: &syn::LitStr) -> TokenStream {
    let Some((key, expr)) = &args.device else {
        return TokenStream::new();
    };
    let p = private();
    // A wrong type is reported at the expression, "expected due to" `device`.
    let device_ref = quote_spanned!(expr.span()=> &(#expr));
    let device_type = quote_spanned!(*key=> &#p::Device);
    let device = local("__gpuscope_device");
    let check = quote! {
        let #device: #device_type = #device_ref;
    };
    if !args.sync {
        return check;
    }
    let guard = local("__gpuscope_sync_device");
    quote! {
        #check
        struct __GpuscopeSyncDevice(#p::Device, &'static str);
        impl ::core::ops::Drop for __GpuscopeSyncDevice {
            fn drop(&mut self) {
                if let ::core::result::Result::Err(e) = self.0.backend().synchronize_device() {
                    ::std::eprintln!(
                        "gpuscope: scope `{}`: could not synchronise {}: {}",
                        self.1,
                        self.0.description(),
                        e
                    );
                }
            }
        }
        let #guard = __GpuscopeSyncDevice(<#p::Device as ::core::clone::Clone>::clone(#device), #name);
    }
}

/// The scope's name: `name = "..."`, else the function's name.
fn scope_name(f: &FnItem, args: &ScopeArgs) -> syn::LitStr {
    match &args.name {
        Some(lit) => lit.clone(),
        None => {
            let ident = &f.sig.ident;
            let name = ident.to_string();
            let name = name.strip_prefix("r#").unwrap_or(&name);
            syn::LitStr::new(name, ident.span())
        }
    }
}

// ---------------------------------------------------------------------------------------
// #[gpu_scope]

fn expand_scope(f: &FnItem, args: &ScopeArgs) -> TokenStream {
    let options = scope_options(f, args);
    let name = scope_name(f, args);
    let device = device_statements(args, &name);
    let ret = ReturnKind::of(&f.sig.output);

    if f.sig.asyncness.is_some() {
        let future = async_body(f, &ret);
        let body = scoped_future_body(future, Some(Default::default()), &options, &device);
        return f.to_tokens_with_body(body);
    }

    if let Some((index, found)) = returned_future(&f.stmts) {
        // `fn f() -> Pin<Box<dyn Future<..>>> { Box::pin(async move { .. }) }` (what
        // `#[async_trait]` writes) or `fn f() -> impl Future { async move { .. } }`: the
        // scope goes around the future, not around making it.
        let mut stmts = f.stmts.clone();
        let capture = found.capture;
        let original = found.expr.to_token_stream();
        let body = scoped_future_body(original, capture, &options, &device);
        let wrapped: Expr = Expr::Verbatim(quote!(async #capture { #body }));
        replace_future(&mut stmts[index], wrapped);
        return f.to_tokens_with_body(quote!(#(#stmts)*));
    }

    let guard = local("__gpuscope_scope");
    let p = private();
    let mut stmts = f.stmts.clone();
    if ret.escapes() {
        let value = local("__gpuscope_ret");
        let escape = escape(&value, &guard);
        let annotation = ret.annotation();
        let wrap = |expr: TokenStream| -> Expr {
            Expr::Verbatim(quote! {
                {
                    // A diverging `todo!()` tail is no more a "diverging sub-expression"
                    // than it was before the rewrite.
                    #[allow(clippy::diverging_sub_expression)]
                    let #value #annotation = #expr;
                    #escape
                    #value
                }
            })
        };
        let mut rewriter = Returns { wrap: &wrap };
        for stmt in &mut stmts {
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
    let traits = if ret.escapes() {
        escape_traits()
    } else {
        TokenStream::new()
    };
    let body = quote! {
        let #guard = #p::ScopeGuard::enter(#options);
        #device
        #traits
        #(#stmts)*
    };
    f.to_tokens_with_body(body)
}

/// `async move { <body> }` for an `async fn`'s body, with its output type fixed to the
/// declared one: an async block's output type is inferred from its first `return` or
/// its tail, so a fake `return` of the declared type in front (the trick of
/// `tracing-attributes`) makes `?` infer and reports a mismatch at the user's
/// expression, with no code after the body.
fn async_body(f: &FnItem, ret: &ReturnKind<'_>) -> TokenStream {
    let stmts = &f.stmts;
    let fake_return = match (ret.annotation(), ret.span()) {
        (Some(annotation), Some(at)) => {
            // Located at the declared type: "return type inferred to be `T` here" points
            // at the signature.
            let fake = proc_macro2::Ident::new(
                "__gpuscope_fake_return",
                Span::mixed_site().located_at(at),
            );
            let fake_return = quote_spanned!(at=> return #fake;);
            quote! {
                #[allow(
                    unknown_lints,
                    unreachable_code,
                    clippy::diverging_sub_expression,
                    clippy::empty_loop,
                    clippy::needless_return,
                    clippy::unreachable
                )]
                if false {
                    let #fake #annotation = loop {};
                    #fake_return
                }
            }
        }
        _ => TokenStream::new(),
    };
    quote!(async move { #fake_return #(#stmts)* })
}

/// The body of an async scope around `future`:
///
/// ```ignore
/// struct __GpuscopeOut<T>(T); // implements ScopeValue, holding no tensors
/// ::gpuscope::__private::scoped(options, async move {
///     let __gpuscope_ret = <future>.await;
///     { /* escape __gpuscope_ret's tensors */ }
///     __GpuscopeOut(__gpuscope_ret)
/// }).await.0
/// ```
///
/// `scoped` needs an output implementing `ScopeValue`; the wrapper lets any output
/// through, its tensors having been escaped with the same autoref dispatch as a sync
/// function's return value (through a short-lived nested guard, whose frame is empty).
/// `capture` is the `move` of the blocks around `future` (that of the user's block, for
/// a returned async block).
fn scoped_future_body(
    future: TokenStream,
    capture: Option<syn::Token![move]>,
    options: &TokenStream,
    device: &TokenStream,
) -> TokenStream {
    let p = private();
    let value = local("__gpuscope_ret");
    let guard = local("__gpuscope_scope");
    let escape = escape(&value, &guard);
    let traits = escape_traits();
    quote! {
        #traits
        struct __GpuscopeOut<T>(T);
        impl<T> #p::ScopeValue for __GpuscopeOut<T> {
            #[inline]
            fn for_each_tensor(&self, _: &mut dyn ::core::ops::FnMut(&#p::Tensor)) {}
        }
        #p::scoped(#options, async #capture {
            #device
            let #value = #future.await;
            {
                let #guard = #p::ScopeGuard::enter(
                    #options.leaks(#p::LeakPolicy::Allow).sync(false)
                );
                #escape
            }
            __GpuscopeOut(#value)
        })
        .await
        .0
    }
}

/// What the function returns, for escaping.
enum ReturnKind<'a> {
    /// `()`, nothing, or `!`: nothing to escape.
    Nothing,
    /// A type that can annotate a `let`.
    Type(&'a Type),
    /// A type with `impl Trait` in it: the `let` is left unannotated.
    Opaque,
}

impl<'a> ReturnKind<'a> {
    fn of(output: &'a ReturnType) -> ReturnKind<'a> {
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

    fn escapes(&self) -> bool {
        !matches!(self, ReturnKind::Nothing)
    }

    /// Where the declared type is written.
    fn span(&self) -> Option<Span> {
        match self {
            ReturnKind::Type(ty) => Some(ty.span()),
            _ => None,
        }
    }

    /// `: Type`, or nothing.
    fn annotation(&self) -> Option<TokenStream> {
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

/// A future the function returns from its last statement.
struct ReturnedFuture<'a> {
    expr: &'a ExprAsync,
    capture: Option<syn::Token![move]>,
}

/// The index of the last statement and the async block it returns, when it is
/// `async [move] { .. }` or `Box::pin(async [move] { .. })`.
fn returned_future(stmts: &[Stmt]) -> Option<(usize, ReturnedFuture<'_>)> {
    let index = stmts.len().checked_sub(1)?;
    let Stmt::Expr(expr, None) = &stmts[index] else {
        return None;
    };
    let found = match expr {
        Expr::Async(a) => a,
        Expr::Call(call) => {
            let Expr::Path(path) = &*call.func else {
                return None;
            };
            let segments: Vec<String> = path
                .path
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect();
            if !segments.ends_with(&["Box".to_string(), "pin".to_string()]) || call.args.len() != 1
            {
                return None;
            }
            match &call.args[0] {
                Expr::Async(a) => a,
                _ => return None,
            }
        }
        _ => return None,
    };
    Some((
        index,
        ReturnedFuture {
            expr: found,
            capture: found.capture,
        },
    ))
}

/// Puts `wrapped` where the async block of [`returned_future`] was.
fn replace_future(stmt: &mut Stmt, wrapped: Expr) {
    if let Stmt::Expr(expr, None) = stmt {
        match expr {
            Expr::Async(_) => *expr = wrapped,
            Expr::Call(call) => {
                if let Some(arg) = call.args.first_mut() {
                    *arg = wrapped;
                }
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------
// #[no_grad]

fn expand_no_grad(f: &FnItem) -> TokenStream {
    let p = private();
    let guard = local("__gpuscope_no_grad");
    if f.sig.asyncness.is_some() {
        let body = per_poll_no_grad(async_body(f, &ReturnKind::of(&f.sig.output)));
        return f.to_tokens_with_body(body);
    }
    if let Some((index, found)) = returned_future(&f.stmts) {
        let mut stmts = f.stmts.clone();
        let capture = found.capture;
        let body = per_poll_no_grad(found.expr.to_token_stream());
        replace_future(
            &mut stmts[index],
            Expr::Verbatim(quote!(async #capture { #body })),
        );
        return f.to_tokens_with_body(quote!(#(#stmts)*));
    }
    let stmts = &f.stmts;
    f.to_tokens_with_body(quote! {
        let #guard = #p::GradModeGuard::no_grad();
        #(#stmts)*
    })
}

/// Awaits `future` with grad mode off during each of its polls (grad mode is per
/// thread, and a future may move between threads at each `.await`).
fn per_poll_no_grad(future: TokenStream) -> TokenStream {
    let p = private();
    let fut = local("__gpuscope_future");
    let cx = local("__gpuscope_cx");
    let guard = local("__gpuscope_no_grad");
    quote! {
        let mut #fut = ::core::pin::pin!(#future);
        ::core::future::poll_fn(|#cx| {
            let #guard = #p::GradModeGuard::no_grad();
            ::core::future::Future::poll(#fut.as_mut(), #cx)
        })
        .await
    }
}
