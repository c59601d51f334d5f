//! Which loops of their callers repeat functions, on plain data: what each file defines and
//! calls ([`FileCalls`], gathered from its syntax tree by `walk/calls/`), the resolution of
//! calls to functions (in one file: [`file_table`]; across the files of a crate:
//! [`crate_table`], with the crates' module trees from [`modules`]) and the loops added up
//! along chains of calls ([`propagate`]). Nothing here knows syntax trees.

mod crate_table;
mod file_table;
mod modules;
mod propagate;

use rustc_hash::FxHashMap;

pub(crate) use crate_table::{PackageFile, called_in_package};
pub(crate) use file_table::called_in_file;

/// How many loops of its callers repeat a function, and through which call: the call that
/// repeats it most (the first of those, in source order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CalledIn {
    /// Loops that repeat the function: those around the call plus those repeating the
    /// caller, through at most a few calls (counted up to 2).
    pub(crate) loops: usize,
    /// The loops around the call itself.
    pub(crate) around_call: usize,
    /// The loops repeating the caller, through its own callers (counted up to 2).
    pub(crate) caller_loops: usize,
    /// The call, shown short (`self.train_on_batch(..)`).
    pub(crate) call: String,
    /// The function making it.
    pub(crate) caller: String,
    /// Where the call starts (1-based line).
    pub(crate) line: usize,
    /// The file of the call, where it is not the function's own (found across a crate's
    /// files).
    pub(crate) file: Option<String>,
    /// Across a crate's files, where the loops repeating the caller are: the call that
    /// repeats the caller most, and where it is (`src/main.rs:198`, or `line 12` in the
    /// function's own file).
    pub(crate) by: Option<(String, String)>,
}

impl CalledIn {
    /// Where the call is: `line 31` in the function's own file, else `src/main.rs:31`.
    pub(crate) fn place(&self) -> String {
        match &self.file {
            Some(file) => format!("{file}:{}", self.line),
            None => format!("line {}", self.line),
        }
    }
}

/// A function (or method) of a file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FnDef {
    pub(crate) name: String,
    /// Whether it is in an impl or a trait.
    pub(crate) method: bool,
    /// The last segment of its impl's type (`Trainer` of `impl<B> Trainer<B>`).
    pub(crate) owner: Option<String>,
    /// The inline modules around it in its file (`["tests"]`); empty for a function nested
    /// in a body, which no path names.
    pub(crate) module: Vec<String>,
    /// Whether it is nested in another function's body (no path reaches it).
    pub(crate) nested: bool,
    /// Its parameters whose type shows (`t: &mut Trainer`): name and type.
    pub(crate) params: FxHashMap<String, TypePath>,
    /// Whether it has a body (a trait's required method has none).
    pub(crate) body: bool,
    /// Whether it is generic over burn's backend or dfdx's device (a type parameter of its
    /// own or of the impl or trait around it bounded by `Backend`, `AutodiffBackend`,
    /// `Device`): where it runs is its caller's choice.
    pub(crate) backend_generic: bool,
}

/// A type's path as written, without generics, references and the pointers a method call
/// sees through (`cuda::CudaNetwork` of `Box<cuda::CudaNetwork>`).
pub(crate) type TypePath = Vec<String>;

/// A struct or enum of a file: its named fields' types (all variants' for an enum) and its
/// tuple variants' fields' types.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AdtDef {
    pub(crate) name: String,
    /// The inline modules around it in its file.
    pub(crate) module: Vec<String>,
    pub(crate) fields: Vec<(String, Option<TypePath>)>,
    pub(crate) variants: Vec<(String, Vec<Option<TypePath>>)>,
}

/// A `use` item: `use a::b::c as d;` is `alias: Some("d")`, `path: [a, b, c]`; a glob
/// `use a::b::*;` has no alias.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UseDef {
    /// The inline modules around it in its file.
    pub(crate) module: Vec<String>,
    pub(crate) alias: Option<String>,
    pub(crate) path: Vec<String>,
}

/// A `mod name;` declaration (its contents in another file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ModDecl {
    /// The inline modules around it in its file.
    pub(crate) module: Vec<String>,
    pub(crate) name: String,
    /// Its `#[path = ".."]`, if any.
    pub(crate) path: Option<String>,
}

/// The type of a value a method is called on, as far as the code shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TypeOf {
    /// `self`: the caller's impl type.
    SelfType,
    /// A type named in a declaration or a constructor (`t: &Trainer`, `Trainer::new(..)`).
    Named(TypePath),
    /// A field of a value of the type.
    Field(Box<TypeOf>, String),
    /// The `index`th field of a tuple variant, bound by a pattern
    /// (`NetworkInner::Gpu(net)`): enum (`Self` for the impl's type), variant, index.
    Variant(String, String, usize),
}

/// What a call names, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Callee {
    /// `name(..)`, `Type::name(..)`, `module::name(..)`: the path's segments.
    Path(Vec<String>),
    /// `receiver.name(..)`: the method, the receiver's type where it shows, and the
    /// receiver's last name (`trainer` of `self.trainer`).
    Method {
        name: String,
        ty: Option<TypeOf>,
        receiver: Option<String>,
    },
}

/// A call in a function of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Site {
    /// The calling function (an index into [`FileCalls::fns`]).
    pub(crate) caller: usize,
    pub(crate) callee: Callee,
    /// Loops around the call that repeat it.
    pub(crate) around: usize,
    /// The call, shown short.
    pub(crate) call: String,
    /// Where the call starts (1-based line).
    pub(crate) line: usize,
    /// Whether the calling function runs on burn's or dfdx's CPU backend (it names that one
    /// and no other, and is generic over none: `infer/typed_backend.rs`).
    pub(crate) on_cpu: bool,
}

impl Site {
    /// Whether the call repeats `callee` where its reads wait for a device: not where a
    /// function on a CPU backend calls one generic over the backend, which the call
    /// instantiates with the caller's CPU backend (a `QNet<Autodiff<NdArray>>`'s
    /// `sample_action` in `impl<B: Backend> QNet<B>`); neither its loops nor its callers'
    /// repeat a read that waits for a GPU through it.
    pub(crate) fn repeats(&self, callee: &FnDef) -> bool {
        !(self.on_cpu && callee.backend_generic)
    }
}

/// What a file defines and calls: the plain data the callers' passes resolve.
#[derive(Clone, Debug, Default)]
pub(crate) struct FileCalls {
    pub(crate) fns: Vec<FnDef>,
    /// Structs and enums, in source order.
    pub(crate) adts: Vec<AdtDef>,
    pub(crate) uses: Vec<UseDef>,
    pub(crate) mods: Vec<ModDecl>,
    pub(crate) sites: Vec<Site>,
}
