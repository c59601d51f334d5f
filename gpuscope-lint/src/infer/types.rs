//! What a declared type says about its values: [`Kind`] (device memory, host data, or
//! unknown), whether it is a borrow, and which of the file's structs it is.
//!
//! Device types come from the [framework tables](crate::frameworks) (resolved through
//! the file's imports); the standard library's scalars, strings, paths and durations are
//! host data; the standard containers, locks, cells and pointers hold what their type
//! arguments hold; a struct or enum declared in the file holds what its fields hold. Type
//! parameters, trait objects and types declared elsewhere are unknown.

use rustc_hash::{FxHashMap, FxHashSet};
use std::cell::RefCell;

use syn::{GenericArgument, PathArguments, Type};

use super::file_index::FileIndex;

/// Whether a value holds device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// It is, or holds, a tensor or a device buffer.
    Device,
    /// It is plain host data (numbers, strings, paths, containers of those).
    Host,
    /// Cannot tell.
    Unknown,
}

impl Kind {
    /// The kind of something holding values of kinds `a` and `b`: device if either is,
    /// host if both are.
    pub(crate) fn join(self, other: Kind) -> Kind {
        match (self, other) {
            (Kind::Device, _) | (_, Kind::Device) => Kind::Device,
            (Kind::Host, Kind::Host) => Kind::Host,
            _ => Kind::Unknown,
        }
    }

    /// The kind of a value holding all of `kinds` (host when there are none).
    pub(crate) fn all(kinds: impl IntoIterator<Item = Kind>) -> Kind {
        kinds.into_iter().fold(Kind::Host, Kind::join)
    }
}

/// What a declared type says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TypeInfo {
    pub(crate) kind: Kind,
    /// A reference (`&T`, `&mut T`): forgetting it frees nothing, storing it stores a borrow.
    pub(crate) borrowed: bool,
    /// `&mut T`.
    pub(crate) mutable: bool,
    /// The name of the type (its last path segment, through references and `Box`, `Rc`,
    /// `Arc`), so that field accesses on the file's structs can be typed.
    pub(crate) name: Option<String>,
}

impl TypeInfo {
    pub(crate) const UNKNOWN: TypeInfo = TypeInfo {
        kind: Kind::Unknown,
        borrowed: false,
        mutable: false,
        name: None,
    };

    fn of(kind: Kind) -> TypeInfo {
        TypeInfo {
            kind,
            ..TypeInfo::UNKNOWN
        }
    }
}

/// Primitive number types (`f32::from(x)` converts to one).
pub(crate) const SCALARS: &[&str] = &[
    "f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32",
    "u64", "u128", "usize",
];

/// Types that hold no device memory, besides [`SCALARS`].
const HOST: &[&str] = &[
    "bool",
    "char",
    "str",
    "String",
    "Path",
    "PathBuf",
    "OsString",
    "OsStr",
    "CString",
    "CStr",
    "Duration",
    "Instant",
    "SystemTime",
    "File",
    "Ordering",
    "NonZeroUsize",
    "TypeId",
    "Layout",
    "Regex",
    "Error",
    "DType",
    "Shape",
    "Dim",
    "Kind",
    "Device",
    "Cpu",
];

/// Generic standard types that hold what their type arguments hold.
pub(crate) const CONTAINERS: &[&str] = &[
    "Vec",
    "VecDeque",
    "Option",
    "Result",
    "Box",
    "Rc",
    "Arc",
    "Weak",
    "Cell",
    "RefCell",
    "UnsafeCell",
    "Mutex",
    "RwLock",
    "OnceLock",
    "OnceCell",
    "LazyLock",
    "LazyCell",
    "Lazy",
    "HashMap",
    "BTreeMap",
    "IndexMap",
    "HashSet",
    "BTreeSet",
    "IndexSet",
    "BinaryHeap",
    "Cow",
    "ManuallyDrop",
    "MaybeUninit",
    "Pin",
    "ThreadLocal",
    "SmallVec",
];

/// Classifies declared types against one file's index, remembering its structs' kinds.
pub(crate) struct Types<'i> {
    index: &'i FileIndex,
    /// The type `Self` stands for, when inside an `impl`.
    self_ty: Option<Type>,
    /// Structs whose kind is being computed (a recursive type is unknown).
    visiting: RefCell<FxHashSet<String>>,
    /// The kinds of the file's structs computed so far from scratch (nothing being visited),
    /// for the current `Self`: a struct's kind is asked for at every use of its type.
    adt_kinds: RefCell<FxHashMap<String, Kind>>,
}

impl<'i> Types<'i> {
    pub(crate) fn new(index: &'i FileIndex, self_ty: Option<Type>) -> Self {
        Types {
            index,
            self_ty,
            visiting: RefCell::new(FxHashSet::default()),
            adt_kinds: RefCell::new(FxHashMap::default()),
        }
    }

    /// What `ty` says about its values.
    pub(crate) fn info(&self, ty: &Type) -> TypeInfo {
        match ty {
            Type::Reference(r) => TypeInfo {
                borrowed: true,
                mutable: r.mutability.is_some(),
                ..self.info(&r.elem)
            },
            Type::Ptr(_) | Type::FnPtr(_) | Type::Never(_) => TypeInfo::of(Kind::Host),
            Type::Paren(p) => self.info(&p.elem),
            Type::Group(g) => self.info(&g.elem),
            Type::Array(a) => TypeInfo::of(self.kind(&a.elem)),
            Type::Slice(s) => TypeInfo::of(self.kind(&s.elem)),
            Type::Tuple(t) => TypeInfo::of(Kind::all(t.elems.iter().map(|e| self.kind(e)))),
            Type::Path(p) if p.qself.is_none() => self.path_info(&p.path),
            _ => TypeInfo::UNKNOWN,
        }
    }

    /// The kind of values of `ty`.
    pub(crate) fn kind(&self, ty: &Type) -> Kind {
        self.info(ty).kind
    }

    fn path_info(&self, path: &syn::Path) -> TypeInfo {
        let Some(last) = path.segments.last() else {
            return TypeInfo::UNKNOWN;
        };
        let name = last.ident.to_string();
        if path.segments.len() == 1 && name == "Self" {
            return match &self.self_ty {
                Some(ty) if !matches!(ty, Type::Path(p) if p.path.is_ident("Self")) => {
                    self.info(ty)
                }
                _ => TypeInfo::UNKNOWN,
            };
        }
        let type_args = || match &last.arguments {
            PathArguments::AngleBracketed(args) => args
                .args
                .iter()
                .filter_map(|arg| match arg {
                    GenericArgument::Type(t) => Some(t),
                    _ => None,
                })
                .collect::<Vec<_>>(),
            _ => Vec::new(),
        };
        if SCALARS.contains(&name.as_str())
            || HOST.contains(&name.as_str())
            || (name.starts_with("Atomic") && name.len() > 6)
        {
            // `Device`, `Kind`, ... only when not a library's device type.
            if self.framework_kind(path, &name) != Some(true) {
                return TypeInfo::of(Kind::Host);
            }
        }
        if CONTAINERS.contains(&name.as_str()) {
            let args = type_args();
            if args.is_empty() {
                return TypeInfo::UNKNOWN;
            }
            // `Box<Model>` is typed as `Model` for field accesses.
            let inner_name = match args.as_slice() {
                [only]
                    if matches!(name.as_str(), "Box" | "Rc" | "Arc" | "Pin" | "ManuallyDrop") =>
                {
                    self.info(only).name
                }
                _ => None,
            };
            let kind = match name.as_str() {
                // `Result<T, E>`: the error rarely holds a tensor.
                "Result" => self.kind(args[0]),
                _ => Kind::all(args.iter().map(|t| self.kind(t))),
            };
            return TypeInfo {
                kind,
                name: inner_name,
                ..TypeInfo::UNKNOWN
            };
        }
        if let Some(device) = self.framework_kind(path, &name) {
            return TypeInfo {
                name: Some(name),
                ..TypeInfo::of(if device { Kind::Device } else { Kind::Host })
            };
        }
        if path.segments.len() == 1 {
            if let Some(alias) = self.index.aliases.get(&name) {
                if !self.visiting.borrow().contains(&name) {
                    self.visiting.borrow_mut().insert(name.clone());
                    let info = self.info(alias);
                    self.visiting.borrow_mut().remove(&name);
                    return info;
                }
                return TypeInfo::UNKNOWN;
            }
            if self.index.adts.contains_key(&name) {
                return TypeInfo {
                    kind: self.adt_kind(&name),
                    name: Some(name),
                    ..TypeInfo::UNKNOWN
                };
            }
        }
        TypeInfo {
            name: Some(name),
            ..TypeInfo::UNKNOWN
        }
    }

    /// What the framework tables say about the type `name` written as `path`.
    fn framework_kind(&self, path: &syn::Path, name: &str) -> Option<bool> {
        if path.segments.len() >= 2 {
            let krate = path.segments[0].ident.to_string();
            if crate::frameworks::by_crate(&krate).is_some() {
                return self.index.used.type_kind(Some(&krate), name);
            }
            if matches!(krate.as_str(), "std" | "core" | "alloc") {
                return None;
            }
            return self.index.used.type_kind(None, name);
        }
        match self.index.imports.get(name) {
            Some((krate, original)) if crate::frameworks::by_crate(krate).is_some() => {
                self.index.used.type_kind(Some(krate), original)
            }
            Some((krate, _)) if matches!(krate.as_str(), "std" | "core" | "alloc") => None,
            Some((_, original)) => self.index.used.type_kind(None, original),
            None if self.index.adts.contains_key(name) => None,
            None => self.index.used.type_kind(None, name),
        }
    }

    /// The kind of a struct or enum of the file: what its fields hold. Type parameters
    /// count as unknown, so `Wrapper<T>` holding a `T` is unknown.
    pub(crate) fn adt_kind(&self, name: &str) -> Kind {
        let Some(adt) = self.index.adts.get(name) else {
            return Kind::Unknown;
        };
        if let Some(kind) = self.adt_kinds.borrow().get(name) {
            return *kind;
        }
        let from_scratch = self.visiting.borrow().is_empty();
        if !self.visiting.borrow_mut().insert(name.to_owned()) {
            return Kind::Unknown;
        }
        let kind = Kind::all(adt.fields.iter().map(|(_, ty)| self.kind(ty)));
        self.visiting.borrow_mut().remove(name);
        // A kind computed inside another struct's may have cut a cycle short: not kept.
        if from_scratch {
            self.adt_kinds.borrow_mut().insert(name.to_owned(), kind);
        }
        kind
    }

    /// The declared type of field `field` of the file's struct `adt`.
    pub(crate) fn field(&self, adt: &str, field: &str) -> Option<&'i Type> {
        self.index
            .adts
            .get(adt)?
            .fields
            .iter()
            .find(|(name, _)| name.as_deref() == Some(field))
            .map(|(_, ty)| ty)
    }

    /// Sets the type `Self` stands for (entering or leaving an `impl`); returns the old one.
    pub(crate) fn set_self_ty(&mut self, ty: Option<Type>) -> Option<Type> {
        // A field's type may say `Self`.
        self.adt_kinds.get_mut().clear();
        std::mem::replace(&mut self.self_ty, ty)
    }

    /// The type `Self` stands for here.
    pub(crate) fn self_ty(&self) -> Option<&Type> {
        self.self_ty.as_ref()
    }

    /// The index the types are read against.
    pub(crate) fn index(&self) -> &'i FileIndex {
        self.index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(file: &str, types: &[&str]) -> Vec<Kind> {
        let index = FileIndex::of_file(&syn::parse_file(file).unwrap());
        let t = Types::new(&index, None);
        types
            .iter()
            .map(|ty| t.kind(&syn::parse_str(ty).unwrap()))
            .collect()
    }

    #[test]
    fn device_host_and_unknown_types() {
        use Kind::*;
        let file = r#"
use candle_core::{Tensor, Var};
struct Model { w: Tensor, b: Option<Var> }
struct Config { name: String, sizes: Vec<usize> }
struct Wrapper<T> { inner: T }
struct List { next: Option<Box<List>> }
type Batch = Vec<Tensor>;
"#;
        assert_eq!(
            kinds(
                file,
                &[
                    "Tensor",
                    "candle_core::Tensor",
                    "Mutex<Vec<Tensor>>",
                    "Model",
                    "Batch",
                    "(usize, Tensor)",
                    "[Var; 2]",
                    "&Tensor",
                ]
            ),
            [Device; 8]
        );
        assert_eq!(
            kinds(
                file,
                &[
                    "String",
                    "Vec<u8>",
                    "Mutex<HashMap<String, usize>>",
                    "Config",
                    "&str",
                    "Box<[&'static str]>",
                    "AtomicU64",
                    "Option<PathBuf>",
                    "*mut u8",
                    "Result<f32, Error>",
                ]
            ),
            [Host; 10]
        );
        assert_eq!(
            kinds(
                file,
                &[
                    "T",
                    "Wrapper<f32>",
                    "List",
                    "Box<dyn Fn()>",
                    "impl Module",
                    "Vec",
                    "Other"
                ]
            ),
            [Unknown; 7]
        );
    }

    #[test]
    fn the_file_s_library_decides_what_tensor_means() {
        assert_eq!(
            kinds("use tract_core::prelude::*;", &["Tensor", "Arc<Tensor>"]),
            [Kind::Host, Kind::Host]
        );
        assert_eq!(
            kinds("", &["Tensor", "CudaSlice<f32>"]),
            [Kind::Device, Kind::Device]
        );
        assert_eq!(kinds("use my_crate::Tensor;", &["Tensor"]), [Kind::Device]);
    }

    #[test]
    fn borrows_and_structs_are_recorded() {
        let index = FileIndex::of_file(&syn::parse_file("struct Net { w: Tensor }").unwrap());
        let t = Types::new(&index, None);
        let info = t.info(&syn::parse_str("&mut Box<Net>").unwrap());
        assert!(info.borrowed && info.mutable);
        assert_eq!(info.name.as_deref(), Some("Net"));
        assert_eq!(info.kind, Kind::Device);
        assert!(t.field("Net", "w").is_some() && t.field("Net", "b").is_none());
        let self_ty: Type = syn::parse_str("Net").unwrap();
        let t = Types::new(&index, Some(self_ty));
        assert_eq!(
            t.info(&syn::parse_str("Self").unwrap()).name.as_deref(),
            Some("Net")
        );
    }
}
