//! Calls resolved across the files of a package: [`called_in_package`].
//!
//! A call resolves in its own file first ([`FileTable`], as the file alone does); one that
//! does not is looked for in the package, through the crates and modules that [`Modules`]
//! finds: `name(..)` through the caller's scope's `use` of that name or its glob imports
//! (`use crate::train::train;`, `use super::*;`), `a::b::name(..)` through the module path
//! (`crate::`, `self::`, `super::`, a `use`d name, a child module, the package's library by
//! its name), to a free function defined once there; `Type::name(..)` and `x.name(..)` to
//! the one method of that name of a type of that name in the caller's crate or the library,
//! where the type shows (as in the file, and through fields and tuple variants of structs
//! and enums of other files) and is the package's: defined in the caller's file, or
//! imported or named through a path that reaches a module of the package defining it
//! (a type named as an external crate's, `candle_nn::Linear`, is not followed).

use rustc_hash::{FxHashMap, FxHashSet};

use super::file_table::{FileTable, plain};
use super::modules::Modules;
use super::propagate::{Edge, MAX_CHAIN, called_in, propagate};
use super::{AdtDef, CalledIn, Callee, FileCalls, TypeOf, UseDef};

/// How many `use`s deep a path is followed.
const MAX_USES: usize = 4;

/// Crates a path may start with that are not the package's.
const STD: &[&str] = &["std", "core", "alloc", "proc_macro", "test"];

/// A file of a package.
pub(crate) struct PackageFile<'a> {
    /// Its path relative to the package's root, one component each (`["src", "lib.rs"]`).
    pub(crate) path: Vec<String>,
    /// Its path as notes show it.
    pub(crate) shown: &'a str,
    pub(crate) calls: &'a FileCalls,
}

/// The [`CalledIn`] of the functions `wanted` (file, index in its `FileCalls`) that callers
/// in the package repeat, by file and function. `lib_name` is the name the package's library
/// is reached by, where known (else any name that is no other module, `use` or standard crate
/// is tried there).
///
/// Only the calls that may reach a wanted function are resolved: those naming a wanted
/// function, then those naming a caller found, for [`MAX_CHAIN`] rounds (the chains
/// `propagate` follows), so the cost is that of the reads' callers, not of the package.
pub(crate) fn called_in_package(
    files: &[PackageFile<'_>],
    lib_name: Option<&str>,
    wanted: &[(usize, usize)],
) -> Vec<Vec<Option<CalledIn>>> {
    let package = Package::new(files, lib_name);
    let name_of = |g: usize| {
        let (file, i) = package.fns[g];
        files[file].calls.fns[i].name.as_str()
    };
    // Every call, by the name it calls (a path's last segment, a method's name).
    let mut by_name: FxHashMap<&str, Vec<(usize, usize)>> = FxHashMap::default();
    for (file, f) in files.iter().enumerate() {
        for (s, site) in f.calls.sites.iter().enumerate() {
            let name = match &site.callee {
                Callee::Path(segments) => segments.last().map(String::as_str),
                Callee::Method { name, .. } => Some(name.as_str()),
            };
            if let Some(name) = name {
                by_name.entry(name).or_default().push((file, s));
            }
        }
    }
    let mut reached: FxHashSet<usize> = wanted
        .iter()
        .map(|&(file, i)| package.offsets[file] + i)
        .collect();
    let mut names: Vec<&str> = reached.iter().map(|&g| name_of(g)).collect();
    let mut asked: FxHashSet<&str> = FxHashSet::default();
    // Each call asked about, with the function it makes (callee, caller).
    let mut calls: Vec<((usize, usize), usize, usize)> = Vec::new();
    for _ in 0..MAX_CHAIN {
        for name in std::mem::take(&mut names) {
            if !asked.insert(name) {
                continue;
            }
            for &(file, s) in by_name.get(name).into_iter().flatten() {
                let site = &files[file].calls.sites[s];
                let caller = package.offsets[file] + site.caller;
                let callee = match package.tables[file].resolve(site.caller, &site.callee) {
                    Some(local) => Some(package.offsets[file] + local),
                    None => package.resolve(file, site.caller, &site.callee),
                };
                let repeats = |g: usize| {
                    let (f, i) = package.fns[g];
                    site.repeats(&files[f].calls.fns[i])
                };
                if let Some(callee) = callee.filter(|&c| c != caller && repeats(c)) {
                    calls.push(((file, s), callee, caller));
                }
            }
        }
        for &(_, callee, caller) in &calls {
            if reached.contains(&callee) && reached.insert(caller) {
                names.push(name_of(caller));
            }
        }
        if names.is_empty() {
            break;
        }
    }
    // The calls into functions reached, in source order (the first of equals wins).
    calls.retain(|&(_, callee, _)| reached.contains(&callee));
    calls.sort_unstable_by_key(|&(at, _, _)| at);
    let edges: Vec<Edge<'_>> = calls
        .iter()
        .map(|&((file, s), callee, caller)| {
            let site = &files[file].calls.sites[s];
            Edge {
                caller,
                callee,
                around: site.around,
                call: &site.call,
                line: site.line,
                file: (package.fns[callee].0 != file).then_some(files[file].shown),
            }
        })
        .collect();
    let names: Vec<&str> = (0..package.fns.len()).map(name_of).collect();
    let best = propagate(names.len(), &edges);
    let mut out: Vec<Vec<Option<CalledIn>>> = files
        .iter()
        .map(|f| vec![None; f.calls.fns.len()])
        .collect();
    for &(file, i) in wanted {
        let g = package.offsets[file] + i;
        let Some(b) = &best[g] else { continue };
        let mut called = called_in(b, &edges, &names);
        if b.caller_loops > 0 {
            if let Some(outer) = &best[edges[b.edge].caller] {
                let edge = &edges[outer.edge];
                let home = package.fns[edge.caller].0;
                let place = if home == file {
                    format!("line {}", edge.line)
                } else {
                    format!("{}:{}", files[home].shown, edge.line)
                };
                called.by = Some((edge.call.to_owned(), place));
            }
        }
        out[file][i] = Some(called);
    }
    out
}

/// Where a call is looked up from: its file, crate and module, and the inline modules
/// around it in the file (whose `use`s are in scope).
struct Scope<'s> {
    file: usize,
    unit: usize,
    module: Vec<String>,
    inline: &'s [String],
}

/// Module key: crate, module path, name.
type Key<'a> = (usize, Vec<String>, &'a str);

/// The package's functions and types.
struct Package<'a> {
    files: &'a [PackageFile<'a>],
    tables: Vec<FileTable<'a>>,
    modules: Modules,
    lib_name: Option<&'a str>,
    /// Each file's first function's index among all of them.
    offsets: Vec<usize>,
    /// Every function: file and index in it.
    fns: Vec<(usize, usize)>,
    /// Free functions (not nested, with a body) by module and name.
    free: FxHashMap<Key<'a>, Vec<usize>>,
    /// Methods with a body by name, with their owner's name made plain (see `plain`).
    methods: FxHashMap<&'a str, Vec<(usize, String)>>,
    /// Structs and enums by module and name, and by name.
    types: FxHashMap<Key<'a>, usize>,
    types_named: FxHashMap<&'a str, Vec<(usize, &'a AdtDef)>>,
}

impl<'a> Package<'a> {
    fn new(files: &'a [PackageFile<'a>], lib_name: Option<&'a str>) -> Self {
        let paths: Vec<Vec<String>> = files.iter().map(|f| f.path.clone()).collect();
        let calls: Vec<&FileCalls> = files.iter().map(|f| f.calls).collect();
        let modules = Modules::of(&paths, &calls);
        let mut package = Package {
            files,
            tables: files.iter().map(|f| FileTable::new(f.calls)).collect(),
            modules,
            lib_name,
            offsets: Vec::with_capacity(files.len()),
            fns: Vec::new(),
            free: FxHashMap::default(),
            methods: FxHashMap::default(),
            types: FxHashMap::default(),
            types_named: FxHashMap::default(),
        };
        for (file, f) in files.iter().enumerate() {
            package.offsets.push(package.fns.len());
            let place = package.modules.places[file].clone();
            for (i, def) in f.calls.fns.iter().enumerate() {
                let g = package.fns.len();
                package.fns.push((file, i));
                let Some(place) = &place else { continue };
                if !def.body {
                    continue;
                }
                if def.method {
                    let owner = def.owner.as_deref().map(plain).unwrap_or_default();
                    package
                        .methods
                        .entry(&def.name)
                        .or_default()
                        .push((g, owner));
                } else if !def.nested {
                    let module = [place.module.as_slice(), &def.module].concat();
                    let key = (place.unit, module, def.name.as_str());
                    package.free.entry(key).or_default().push(g);
                }
            }
            let Some(place) = &place else { continue };
            for adt in &f.calls.adts {
                let module = [place.module.as_slice(), &adt.module].concat();
                *package
                    .types
                    .entry((place.unit, module, &adt.name))
                    .or_default() += 1;
                package
                    .types_named
                    .entry(&adt.name)
                    .or_default()
                    .push((file, adt));
            }
        }
        package
    }

    /// Whether code at `scope` can name the package's library by the package's name: code
    /// of another crate of the package, or `src/main.rs` (the library's own modules cannot).
    fn reaches_library(&self, scope: &Scope<'_>) -> bool {
        Some(scope.unit) != self.modules.lib || self.files[scope.file].path == ["src", "main.rs"]
    }

    /// Whether functions of `file` can be called from crate `unit`: its own or the library.
    fn visible(&self, unit: usize, file: usize) -> bool {
        self.modules.places[file]
            .as_ref()
            .is_some_and(|p| p.unit == unit || Some(p.unit) == self.modules.lib)
    }

    fn scope(&self, file: usize, caller: usize) -> Option<Scope<'a>> {
        let place = self.modules.places[file].as_ref()?;
        let inline = &self.files[file].calls.fns[caller].module;
        Some(Scope {
            file,
            unit: place.unit,
            module: [place.module.as_slice(), inline].concat(),
            inline,
        })
    }

    /// The function of the package that `callee`, called in function `caller` of `file`
    /// and not resolved in the file, is.
    fn resolve(&self, file: usize, caller: usize, callee: &Callee) -> Option<usize> {
        let scope = self.scope(file, caller)?;
        let owner = self.files[file].calls.fns[caller].owner.as_deref();
        match callee {
            Callee::Path(segments) => {
                if let Some(g) = self.free_fn(&scope, segments) {
                    return Some(g);
                }
                let (name, ty) = segments.split_last()?;
                match ty {
                    [] => None,
                    [.., last] if last == "Self" => self.method_of(&scope, owner?, name),
                    _ if self.type_visible(&scope, ty, 0) => {
                        self.method_of(&scope, ty.last()?, name)
                    }
                    _ => None,
                }
            }
            Callee::Method { name, ty, receiver } => {
                match ty.as_ref().and_then(|ty| self.type_of(&scope, owner, ty)) {
                    Some(ty) => self.method_of(&scope, ty?, name),
                    None => self.named_like(&scope, receiver.as_deref()?, name),
                }
            }
        }
    }

    /// The `use`s in scope: those of the caller's module in its file.
    fn uses<'s>(&'s self, scope: &'s Scope<'_>) -> impl Iterator<Item = &'a UseDef> + 's {
        self.files[scope.file]
            .calls
            .uses
            .iter()
            .filter(|u| u.module == scope.inline)
    }

    /// The one free function that the path `segments` names from `scope`.
    fn free_fn(&self, scope: &Scope<'_>, segments: &[String]) -> Option<usize> {
        let (name, module) = segments.split_last()?;
        if !module.is_empty() {
            let (unit, module) = self.module_of(scope, module, 0)?;
            return self.one_free(&(unit, module, name.as_str()));
        }
        // The caller's own module first, as rustc looks.
        let own = (scope.unit, scope.module.clone(), name.as_str());
        if self.free.contains_key(&own) {
            return self.one_free(&own);
        }
        if let Some(used) = self.uses(scope).find(|u| u.alias.as_ref() == Some(name)) {
            let (name, module) = used.path.split_last()?;
            let (unit, module) = self.module_of(scope, module, 1)?;
            return self.one_free(&(unit, module, name.as_str()));
        }
        let mut found = self
            .uses(scope)
            .filter(|u| u.alias.is_none())
            .filter_map(|glob| {
                let (unit, module) = self.module_of(scope, &glob.path, 1)?;
                self.one_free(&(unit, module, name.as_str()))
            });
        let first = found.next()?;
        found.next().is_none().then_some(first)
    }

    fn one_free(&self, key: &Key<'_>) -> Option<usize> {
        match self.free.get(key)?.as_slice() {
            &[g] => Some(g),
            _ => None,
        }
    }

    /// The crate and module that the module path `segments` names from `scope`.
    fn module_of(
        &self,
        scope: &Scope<'_>,
        segments: &[String],
        depth: usize,
    ) -> Option<(usize, Vec<String>)> {
        let Some((first, rest)) = segments.split_first() else {
            return Some((scope.unit, scope.module.clone()));
        };
        let child = [scope.module.as_slice(), std::slice::from_ref(first)].concat();
        let (unit, mut at) = match first.as_str() {
            "crate" => (scope.unit, Vec::new()),
            "self" => (scope.unit, scope.module.clone()),
            "super" => {
                let mut at = scope.module.clone();
                at.pop()?;
                (scope.unit, at)
            }
            _ if depth < MAX_USES && self.uses(scope).any(|u| u.alias.as_ref() == Some(first)) => {
                let used = self.uses(scope).find(|u| u.alias.as_ref() == Some(first))?;
                self.module_of(scope, &used.path, depth + 1)?
            }
            _ if self.modules.exists(scope.unit, &child) => (scope.unit, child),
            _ if self.modules.exists(scope.unit, std::slice::from_ref(first)) => {
                (scope.unit, vec![first.clone()])
            }
            name if STD.contains(&name) || !self.reaches_library(scope) => return None,
            name if self.lib_name.is_none_or(|lib| lib == name) => (self.modules.lib?, Vec::new()),
            _ => return None,
        };
        for segment in rest {
            if segment == "super" {
                at.pop()?;
                continue;
            }
            at.push(segment.clone());
            if !self.modules.exists(unit, &at) {
                return None;
            }
        }
        Some((unit, at))
    }

    /// Whether the type `path`, named from `scope`, is one of the package's: defined in the
    /// file, or imported or named through a path reaching a module of the package that
    /// defines it.
    fn type_visible(&self, scope: &Scope<'_>, path: &[String], depth: usize) -> bool {
        let Some((name, module)) = path.split_last() else {
            return false;
        };
        let defines = |unit: usize, module: Vec<String>| {
            self.types.contains_key(&(unit, module, name.as_str()))
        };
        if !module.is_empty() {
            return self
                .module_of(scope, module, depth)
                .is_some_and(|(unit, module)| defines(unit, module));
        }
        if self.files[scope.file]
            .calls
            .adts
            .iter()
            .any(|a| a.name == *name)
        {
            return true;
        }
        if let Some(used) = self.uses(scope).find(|u| u.alias.as_ref() == Some(name)) {
            return depth < MAX_USES && self.type_visible(scope, &used.path, depth + 1);
        }
        self.uses(scope).filter(|u| u.alias.is_none()).any(|glob| {
            self.module_of(scope, &glob.path, depth + 1)
                .is_some_and(|(unit, module)| defines(unit, module))
        })
    }

    /// The name of the type `ty` is, in a function of `owner`'s impl at `scope`:
    /// `Some(Some(name))` for a type of the package, `Some(None)` for a type shown not to be
    /// one, `None` where it does not show.
    fn type_of(
        &self,
        scope: &Scope<'_>,
        owner: Option<&'a str>,
        ty: &'a TypeOf,
    ) -> Option<Option<&'a str>> {
        match ty {
            TypeOf::SelfType => owner.map(Some),
            TypeOf::Named(path) => Some(self.package_type(scope, path)),
            TypeOf::Field(base, field) => {
                let base = self.type_of(scope, owner, base)??;
                let (file, adt) = self.adt(scope.unit, base)?;
                let (_, ty) = adt.fields.iter().find(|(f, _)| f == field)?;
                self.seen_from(file, adt, ty.as_deref()?)
            }
            TypeOf::Variant(ty, variant, index) => {
                let ty = if ty == "Self" { owner? } else { ty.as_str() };
                let (file, adt) = self.adt(scope.unit, ty)?;
                let (_, fields) = adt.variants.iter().find(|(v, _)| v == variant)?;
                self.seen_from(file, adt, fields.get(*index)?.as_deref()?)
            }
        }
    }

    /// The type `path` of a field of `adt`, in `file`, as [`type_of`](Package::type_of)
    /// gives it.
    fn seen_from(
        &self,
        file: usize,
        adt: &'a AdtDef,
        path: &'a [String],
    ) -> Option<Option<&'a str>> {
        let place = self.modules.places[file].as_ref()?;
        let scope = Scope {
            file,
            unit: place.unit,
            module: [place.module.as_slice(), &adt.module].concat(),
            inline: &adt.module,
        };
        Some(self.package_type(&scope, path))
    }

    /// The name of the type `path` where it is the package's, seen from `scope`.
    fn package_type(&self, scope: &Scope<'_>, path: &'a [String]) -> Option<&'a str> {
        if self.type_visible(scope, path, 0) {
            path.last().map(String::as_str)
        } else {
            None
        }
    }

    /// The one struct or enum named `name` that crate `unit` sees, with its file.
    fn adt(&self, unit: usize, name: &str) -> Option<(usize, &'a AdtDef)> {
        let mut found = self
            .types_named
            .get(name)?
            .iter()
            .filter(|(file, _)| self.visible(unit, *file));
        let first = *found.next()?;
        found.next().is_none().then_some(first)
    }

    /// The one method `name` of a type named `owner` that `scope`'s crate sees.
    fn method_of(&self, scope: &Scope<'_>, owner: &str, name: &str) -> Option<usize> {
        self.one_method(scope, name, |g, _| {
            let (file, i) = self.fns[g];
            self.files[file].calls.fns[i].owner.as_deref() == Some(owner)
        })
    }

    /// The one method `name` of a type named as `receiver` is, where `scope` sees the type
    /// as the package's.
    fn named_like(&self, scope: &Scope<'_>, receiver: &str, name: &str) -> Option<usize> {
        let receiver = plain(receiver);
        let g = self.one_method(scope, name, |_, owner| *owner == receiver)?;
        let (file, i) = self.fns[g];
        let owner = self.files[file].calls.fns[i].owner.clone()?;
        self.type_visible(scope, &[owner], 0).then_some(g)
    }

    /// The one method `name` that `scope`'s crate sees and `owner` accepts (given the
    /// method and its owner's plain name).
    fn one_method(
        &self,
        scope: &Scope<'_>,
        name: &str,
        owner: impl Fn(usize, &String) -> bool,
    ) -> Option<usize> {
        let mut found = self.methods.get(name)?.iter().filter(|(g, plain)| {
            !plain.is_empty() && self.visible(scope.unit, self.fns[*g].0) && owner(*g, plain)
        });
        let first = found.next()?.0;
        found.next().is_none().then_some(first)
    }
}
