//! [`FileIndex`]: what a file declares that type inference needs: its imports (which
//! crate each imported name comes from), the libraries it uses, its structs and enums with
//! their field types, type aliases (and which of them are burn backends), the return types
//! of its functions, its `static`s (including `thread_local!` and `lazy_static!` ones) and
//! `const`s.

use rustc_hash::{FxHashMap, FxHashSet};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};
use syn::{Block, Type};

use super::releases::Releases;
use super::typed_backend::TypedBackends;
use crate::frameworks::Used;

/// Whether a path segment of `ty` (at any depth of its generic arguments) is one of `names`.
fn names_any(ty: &Type, names: &FxHashSet<String>) -> bool {
    struct Finder<'n> {
        names: &'n FxHashSet<String>,
        found: bool,
    }
    impl<'ast> Visit<'ast> for Finder<'_> {
        fn visit_path_segment(&mut self, seg: &'ast syn::PathSegment) {
            self.found |= self.names.contains(&seg.ident.to_string());
            visit::visit_path_segment(self, seg);
        }
    }
    if names.is_empty() {
        return false;
    }
    let mut finder = Finder {
        names,
        found: false,
    };
    finder.visit_type(ty);
    finder.found
}

/// A struct or enum declared in the file: the types of its fields (every variant's, for an
/// enum), by field name where there is one.
#[derive(Debug, Default)]
pub(crate) struct Adt {
    pub(crate) fields: Vec<(Option<String>, Type)>,
}

/// What a file (or, for the macros, a function body) declares.
#[derive(Debug, Default)]
pub(crate) struct FileIndex {
    /// The tensor libraries the file names.
    pub(crate) used: Used,
    /// Imported names: the name in scope -> (crate, name in that crate).
    pub(crate) imports: FxHashMap<String, (String, String)>,
    /// Names imported from the crate's own modules (`use crate::tensor::Tensor`,
    /// `use super::Tensor`), as they are named there.
    pub(crate) local_imports: FxHashSet<String>,
    /// Structs and enums by name.
    pub(crate) adts: FxHashMap<String, Adt>,
    /// Type aliases by name.
    pub(crate) aliases: FxHashMap<String, Type>,
    /// Return types of the file's functions and methods by name (`None`: returns `()`).
    /// A name declared twice with different return types is left out.
    pub(crate) returns: FxHashMap<String, Option<Type>>,
    /// Names declared twice with different return types.
    ambiguous_returns: FxHashSet<String>,
    /// `static` names with their declared types (`None` where a macro's could not be read).
    pub(crate) statics: FxHashMap<String, Option<Type>>,
    /// Statics whose contents the file also releases (`clear`, `truncate`, `pop`, `remove`,
    /// `take`, `drain`, or assigns anew): a scoped stack or a bounded cache, not a store
    /// that grows until the process exits.
    pub(crate) released_statics: FxHashSet<String>,
    /// `const` names: SCREAMING_CASE like statics, but a fresh value at every use.
    pub(crate) consts: FxHashSet<String>,
    /// Whether the file has `use std::mem::forget` (or `core::mem::forget`), making a bare
    /// `forget(x)` mean `mem::forget`.
    pub(crate) forget_imported: bool,
    /// (type, field) pairs whose `impl Drop` in the file releases the field itself
    /// (`ManuallyDrop::take(&mut self.f)`, `ManuallyDrop::drop(..)`, `ManuallyDrop::into_inner(..)`):
    /// a `ManuallyDrop` stored in that field is the type's destructor's to release.
    pub(crate) drop_released: FxHashSet<(String, String)>,
    /// Functions whose body is the CPU device (`fn device() -> Device { Device::Cpu }`).
    pub(crate) cpu_device_fns: FxHashSet<String>,
    /// Free functions of the file whose every definition has an empty body (`fn
    /// empty_cache() {}`, a mock), and names defined with a body.
    empty_fns: FxHashSet<String>,
    bodied_fns: FxHashSet<String>,
    /// Types that release what their fields hold in their own methods (a pool whose
    /// `clear` or `pop_front` empties `self.pools`), or that have a field of such a type:
    /// caches that bound themselves.
    released_types: FxHashSet<String>,
    /// Its aliases of burn's and dfdx's backends, and whether it names a CPU one.
    backends: TypedBackends,
}

impl FileIndex {
    /// What the whole file declares.
    pub(crate) fn of_file(file: &syn::File) -> Self {
        let mut index = FileIndex {
            used: Used::of_file(file),
            ..FileIndex::default()
        };
        index.visit_file(file);
        let mut releases = Releases::default();
        releases.visit_file(file);
        index.with_releases(releases)
    }

    /// What a function body declares (items nested in it), for the macros.
    pub(crate) fn of_block(block: &Block) -> Self {
        let mut index = FileIndex {
            used: Used::of_block(block),
            ..FileIndex::default()
        };
        index.visit_block(block);
        let mut releases = Releases::default();
        releases.visit_block(block);
        index.with_releases(releases)
    }

    /// Whether the function of `sig` and `body` runs on burn's or dfdx's CPU backend, so
    /// that its tensors are in host memory (see `typed_backend.rs`); `generic_outer`: the
    /// impl or trait around it has type parameters.
    pub(crate) fn runs_on_a_cpu_backend(
        &self,
        sig: &syn::Signature,
        body: &Block,
        generic_outer: bool,
    ) -> bool {
        self.backends
            .runs_on_cpu(&self.used, sig, body, generic_outer)
    }

    fn add_static(&mut self, name: String, ty: Option<Type>) {
        self.statics.insert(name, ty);
    }

    /// Reads `static [ref] [mut] NAME: Type = ..;` declarations out of a `thread_local!` or
    /// `lazy_static!` body.
    fn add_macro_statics(&mut self, tokens: TokenStream) {
        let mut tokens = tokens.into_iter().peekable();
        while let Some(token) = tokens.next() {
            let TokenTree::Ident(ident) = &token else {
                continue;
            };
            if ident != "static" {
                continue;
            }
            let mut name = None;
            for token in tokens.by_ref() {
                match token {
                    TokenTree::Ident(i) if i == "ref" || i == "mut" => {}
                    TokenTree::Ident(i) => {
                        name = Some(i.to_string());
                        break;
                    }
                    _ => break,
                }
            }
            let Some(name) = name else { continue };
            if !matches!(tokens.next(), Some(TokenTree::Punct(p)) if p.as_char() == ':') {
                continue;
            }
            let mut ty = TokenStream::new();
            while let Some(token) = tokens.peek() {
                if matches!(token, TokenTree::Punct(p) if p.as_char() == '=' || p.as_char() == ';')
                {
                    break;
                }
                ty.extend(tokens.next());
            }
            self.add_static(name, syn::parse2::<Type>(ty).ok());
        }
    }

    fn add_return(&mut self, name: String, output: &syn::ReturnType) {
        if self.ambiguous_returns.contains(&name) {
            return;
        }
        let ty = match output {
            syn::ReturnType::Default => None,
            syn::ReturnType::Type(_, ty) => Some((**ty).clone()),
        };
        match self.returns.get(&name) {
            Some(existing) if *existing != ty => {
                self.returns.remove(&name);
                self.ambiguous_returns.insert(name);
            }
            Some(_) => {}
            None => {
                self.returns.insert(name, ty);
            }
        }
    }

    /// Takes what `releases` found: the statics whose contents the code releases, the types
    /// whose methods release what their fields hold and, over and over, the file's types with
    /// a field of a noted type.
    fn with_releases(mut self, releases: Releases) -> Self {
        self.released_statics = releases.statics;
        self.released_types = releases.types;
        // Most files have no such type: nothing to look for in their fields.
        while !self.released_types.is_empty() {
            let more: Vec<String> = self
                .adts
                .iter()
                .filter(|(name, adt)| {
                    !self.released_types.contains(*name)
                        && adt
                            .fields
                            .iter()
                            .any(|(_, ty)| names_any(ty, &self.released_types))
                })
                .map(|(name, _)| name.clone())
                .collect();
            if more.is_empty() {
                break;
            }
            self.released_types.extend(more);
        }
        self
    }

    /// Whether `ty` names a type that releases what its fields hold (`OnceLock<MemoryPool>`
    /// where `MemoryPool::clear` empties its pools).
    pub(crate) fn is_self_releasing(&self, ty: &Type) -> bool {
        names_any(ty, &self.released_types)
    }

    /// Whether every free function of the file named `name` has an empty body (and there
    /// is one): a call of it does nothing.
    pub(crate) fn is_empty_fn(&self, name: &str) -> bool {
        self.empty_fns.contains(name) && !self.bodied_fns.contains(name)
    }

    /// Notes `name` as a function returning the CPU device when `block` is only that.
    fn add_cpu_device_fn(&mut self, name: &syn::Ident, block: &Block) {
        if let [syn::Stmt::Expr(syn::Expr::Path(p), None)] = block.stmts.as_slice() {
            if p.qself.is_none() && self.used.names_cpu_device(&p.path) {
                self.cpu_device_fns.insert(name.to_string());
            }
        }
    }

    fn add_adt<'a>(&mut self, name: String, fields: impl Iterator<Item = &'a syn::Field>) {
        let adt = Adt {
            fields: fields
                .map(|f| (f.ident.as_ref().map(ToString::to_string), f.ty.clone()))
                .collect(),
        };
        self.adts.insert(name, adt);
    }
}

impl<'ast> Visit<'ast> for FileIndex {
    fn visit_item_static(&mut self, item: &'ast syn::ItemStatic) {
        self.add_static(item.ident.to_string(), Some((*item.ty).clone()));
        visit::visit_item_static(self, item);
    }

    fn visit_item_const(&mut self, item: &'ast syn::ItemConst) {
        self.consts.insert(item.ident.to_string());
        visit::visit_item_const(self, item);
    }

    fn visit_item_struct(&mut self, item: &'ast syn::ItemStruct) {
        self.add_adt(item.ident.to_string(), item.fields.iter());
        visit::visit_item_struct(self, item);
    }

    fn visit_item_enum(&mut self, item: &'ast syn::ItemEnum) {
        let fields = item.variants.iter().flat_map(|v| v.fields.iter());
        self.add_adt(item.ident.to_string(), fields);
        visit::visit_item_enum(self, item);
    }

    fn visit_item_type(&mut self, item: &'ast syn::ItemType) {
        let name = item.ident.to_string();
        self.backends.add_alias(&self.used, &name, &item.ty);
        self.aliases.insert(name, (*item.ty).clone());
        visit::visit_item_type(self, item);
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        let name = item.sig.ident.to_string();
        self.add_return(name.clone(), &item.sig.output);
        self.add_cpu_device_fn(&item.sig.ident, &item.block);
        if item.block.stmts.is_empty() {
            self.empty_fns.insert(name);
        } else {
            self.bodied_fns.insert(name);
        }
        visit::visit_item_fn(self, item);
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        self.add_return(item.sig.ident.to_string(), &item.sig.output);
        self.add_cpu_device_fn(&item.sig.ident, &item.block);
        visit::visit_impl_item_fn(self, item);
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        let is_drop = item
            .trait_
            .as_ref()
            .and_then(|(path, _)| path.segments.last())
            .is_some_and(|s| s.ident == "Drop");
        let ty = match &*item.self_ty {
            Type::Path(p) if p.qself.is_none() => p.path.segments.last().map(|s| &s.ident),
            _ => None,
        };
        if let (true, Some(ty)) = (is_drop, ty) {
            let mut released = SelfFieldsReleased::default();
            released.visit_item_impl(item);
            let ty = ty.to_string();
            for field in released.fields {
                self.drop_released.insert((ty.clone(), field));
            }
        }
        visit::visit_item_impl(self, item);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let is = |name: &str| mac.path.segments.last().is_some_and(|s| s.ident == name);
        if is("thread_local") || is("lazy_static") {
            self.add_macro_statics(mac.tokens.clone());
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        /// `krate`: the crate the path started from (`None` at the start, or for a path
        /// from `crate`, `self` or `super`, which `local` marks).
        fn walk(
            tree: &syn::UseTree,
            krate: Option<&str>,
            local: bool,
            after_mem: bool,
            index: &mut FileIndex,
        ) {
            match tree {
                syn::UseTree::Path(p) => {
                    let name = p.ident.to_string();
                    let first = krate.is_none() && !local;
                    let is_local = first && matches!(name.as_str(), "crate" | "self" | "super");
                    let krate = match krate {
                        Some(k) => Some(k.to_owned()),
                        None if first && !is_local => Some(name.clone()),
                        None => None,
                    };
                    walk(
                        &p.tree,
                        krate.as_deref(),
                        local || is_local,
                        p.ident == "mem",
                        index,
                    );
                }
                syn::UseTree::Name(n) => {
                    if after_mem && n.ident == "forget" {
                        index.forget_imported = true;
                    }
                    if let Some(k) = krate {
                        let name = n.ident.to_string();
                        index.backends.add_import(&index.used, &name);
                        index.imports.insert(name.clone(), (k.to_owned(), name));
                    } else if local {
                        index.local_imports.insert(n.ident.to_string());
                    }
                }
                syn::UseTree::Rename(r) => {
                    if let Some(k) = krate {
                        let (rename, name) = (r.rename.to_string(), r.ident.to_string());
                        index
                            .backends
                            .add_renamed_import(&index.used, &rename, &name);
                        index.imports.insert(rename, (k.to_owned(), name));
                    } else if local {
                        index.local_imports.insert(r.ident.to_string());
                    }
                }
                syn::UseTree::Group(g) => {
                    for t in &g.items {
                        walk(t, krate, local, after_mem, index);
                    }
                }
                syn::UseTree::Glob(_) => {
                    if after_mem {
                        index.forget_imported = true;
                    }
                }
            }
        }
        walk(&item.tree, None, false, false, self);
    }
}

/// The fields of `self` a body releases through `ManuallyDrop::take`, `ManuallyDrop::drop`
/// or `ManuallyDrop::into_inner` (maybe of a `ptr::read` of the field).
#[derive(Default)]
struct SelfFieldsReleased {
    fields: Vec<String>,
}

impl<'ast> Visit<'ast> for SelfFieldsReleased {
    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        if let Some(arg) = crate::syntax::manually_drop_release(call) {
            if let Some((base, Some(field))) = crate::syntax::place_and_field(arg) {
                if base == "self" {
                    self.fields.push(field);
                }
            }
        }
        visit::visit_expr_call(self, call);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_imports_types_returns_and_statics() {
        let src = r#"
use candle_core::{Tensor, Device as Dev};
use std::mem::{self, forget};
use crate::model::Net;
use super::{ops::Graph as G, *};
struct Model { w: Tensor, name: String }
enum State { Idle, Busy(Vec<Tensor>) }
type Batch = Vec<Tensor>;
fn make() -> Tensor { todo!() }
fn noop() {}
impl Model { fn make() -> String { todo!() } }
static CACHE: Mutex<Vec<Tensor>> = Mutex::new(Vec::new());
const LIMIT: usize = 3;
thread_local! { static LAST: RefCell<Option<Tensor>> = RefCell::new(None); }
"#;
        let index = FileIndex::of_file(&syn::parse_file(src).unwrap());
        assert_eq!(
            index.imports.get("Dev"),
            Some(&("candle_core".to_owned(), "Device".to_owned()))
        );
        assert_eq!(
            index.imports.get("Tensor").map(|i| i.0.as_str()),
            Some("candle_core")
        );
        assert!(!index.imports.contains_key("Net"), "crate-local");
        let mut local: Vec<_> = index.local_imports.iter().cloned().collect();
        local.sort();
        assert_eq!(local, ["Graph", "Net"]);
        assert!(index.forget_imported);
        assert_eq!(index.adts["Model"].fields.len(), 2);
        assert_eq!(index.adts["State"].fields.len(), 1);
        assert!(index.aliases.contains_key("Batch"));
        assert!(
            !index.returns.contains_key("make"),
            "two different return types"
        );
        assert_eq!(index.returns.get("noop"), Some(&None));
        assert!(index.statics["CACHE"].is_some() && index.statics["LAST"].is_some());
        assert!(index.consts.contains("LIMIT"));
        assert_eq!(
            index.used.iter().map(|f| f.name).collect::<Vec<_>>(),
            ["candle"]
        );
    }

    #[test]
    fn indexes_the_fields_a_drop_impl_releases() {
        let src = r#"
struct Res<T> { slice: ManuallyDrop<CudaSlice<T>>, keep: ManuallyDrop<CudaSlice<T>>, ptr: u64 }
impl<T> Drop for Res<T> {
    fn drop(&mut self) {
        let slice = unsafe { std::mem::ManuallyDrop::take(&mut self.slice) };
        let _ = slice.leak();
        unsafe { cuda_free(self.ptr) };
    }
}
struct Pair(ManuallyDrop<Tensor>);
impl Drop for Pair {
    fn drop(&mut self) { unsafe { ManuallyDrop::drop(&mut self.0) } }
}
impl Res<u8> {
    fn other(&mut self) { unsafe { ManuallyDrop::drop(&mut self.keep) } }
}
"#;
        let index = FileIndex::of_file(&syn::parse_file(src).unwrap());
        let mut released: Vec<_> = index.drop_released.iter().cloned().collect();
        released.sort();
        assert_eq!(
            released,
            [
                ("Pair".to_owned(), "0".to_owned()),
                ("Res".to_owned(), "slice".to_owned())
            ]
        );
    }
}
