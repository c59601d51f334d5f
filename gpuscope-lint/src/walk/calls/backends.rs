//! Which functions are generic over burn's backend or dfdx's device, for the callers'
//! passes (`FnDef::backend_generic`): a call from a function on a CPU backend
//! (`infer/typed_backend.rs`) instantiates such a function with that backend, so the call
//! repeats no read that waits for a device (`Site::repeats`).

use syn::{GenericParam, Generics, TypeParamBound, WherePredicate};

use crate::frameworks::Used;

/// Whether a type parameter of `own` (a function's generics) or of `outer` (its impl's or
/// trait's) is bounded by a backend trait (`B: Backend`, `B: AutodiffBackend`,
/// `D: Device<f32>`), inline or in a `where` clause.
pub(super) fn generic_over_backend(own: &Generics, outer: Option<&Generics>) -> bool {
    std::iter::once(own).chain(outer).any(bounds_a_backend)
}

fn bounds_a_backend(generics: &Generics) -> bool {
    let params: Vec<&syn::Ident> = generics
        .params
        .iter()
        .filter_map(|p| match p {
            GenericParam::Type(t) => Some(&t.ident),
            _ => None,
        })
        .collect();
    if params.is_empty() {
        return false;
    }
    let inline = generics.params.iter().any(|p| match p {
        GenericParam::Type(t) => t.bounds.iter().any(is_backend_bound),
        _ => false,
    });
    let in_where = generics
        .where_clause
        .iter()
        .flat_map(|w| &w.predicates)
        .any(|p| {
            let WherePredicate::Type(pred) = p else {
                return false;
            };
            let syn::Type::Path(ty) = &pred.bounded_ty else {
                return false;
            };
            ty.qself.is_none()
                && ty.path.get_ident().is_some_and(|id| params.contains(&id))
                && pred.bounds.iter().any(is_backend_bound)
        });
    inline || in_where
}

fn is_backend_bound(bound: &TypeParamBound) -> bool {
    let TypeParamBound::Trait(t) = bound else {
        return false;
    };
    t.path
        .segments
        .last()
        .is_some_and(|s| crate::syntax::with_text(&s.ident, Used::is_backend_trait))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generic(item: &str) -> bool {
        let item: syn::ItemImpl = syn::parse_str(item).unwrap();
        let syn::ImplItem::Fn(f) = &item.items[0] else {
            panic!("a method")
        };
        generic_over_backend(&f.sig.generics, Some(&item.generics))
    }

    #[test]
    fn type_parameters_bounded_by_a_backend_trait_make_a_function_backend_generic() {
        assert!(generic("impl<B: Backend> Q<B> { fn f(&self) {} }"));
        assert!(generic(
            "impl<B> Q<B> where B: burn::tensor::backend::AutodiffBackend { fn f(&self) {} }"
        ));
        assert!(generic(
            "impl Q { fn f<D: Device<f32>>(&self, dev: &D) {} }"
        ));
        assert!(generic(
            "impl<T> Q<T> { fn f<B>(&self) where B: Backend {} }"
        ));
        // Generic over something else, or over nothing.
        assert!(!generic("impl<M: Module> Q<M> { fn f(&self) {} }"));
        assert!(!generic("impl Q<Wgpu> { fn f(&self) {} }"));
        assert!(!generic(
            "impl<T> Q<T> where T::Inner: Backend { fn f(&self) {} }"
        ));
    }
}
