//! Calls resolved within one file, by name: `name(..)` to the file's one function of that
//! name (no other function or method of the file has it), `Self::name(..)` and
//! `Type::name(..)` to the one method of that name in the file's impls of the type, and
//! `x.name(..)` the same way where `x`'s type shows (a parameter, a local, a field of a
//! struct of the file, a tuple variant's field bound by a pattern) or `x` is named as the
//! type is (`training_step` for `TrainingStep`). [`called_in_file`]: the loops of the
//! file's callers that repeat each of its functions.

use rustc_hash::FxHashMap;

use super::propagate::{Edge, called_in, propagate};
use super::{AdtDef, CalledIn, Callee, FileCalls, TypeOf};

/// The [`CalledIn`] of each function of the file (by its index in `calls.fns`) that its
/// callers in the file repeat.
pub(crate) fn called_in_file(calls: &FileCalls) -> Vec<Option<CalledIn>> {
    let table = FileTable::new(calls);
    let edges: Vec<Edge<'_>> = calls
        .sites
        .iter()
        .filter_map(|site| {
            let callee = table.resolve(site.caller, &site.callee)?;
            (callee != site.caller && site.repeats(&calls.fns[callee])).then_some(Edge {
                caller: site.caller,
                callee,
                around: site.around,
                call: &site.call,
                line: site.line,
                file: None,
            })
        })
        .collect();
    let names: Vec<&str> = calls.fns.iter().map(|f| f.name.as_str()).collect();
    propagate(calls.fns.len(), &edges)
        .iter()
        .map(|best| best.as_ref().map(|b| called_in(b, &edges, &names)))
        .collect()
}

/// The functions and types of one file, by name.
pub(super) struct FileTable<'f> {
    pub(super) calls: &'f FileCalls,
    by_name: FxHashMap<&'f str, Vec<usize>>,
    /// Structs and enums by name (the last of a name, as the file index keeps them).
    adts: FxHashMap<&'f str, &'f AdtDef>,
    /// Each function's owner's name made plain ([`plain`]), made the first time a
    /// receiver's name is looked up.
    plain_owners: std::cell::OnceCell<Vec<Option<String>>>,
}

impl<'f> FileTable<'f> {
    pub(super) fn new(calls: &'f FileCalls) -> Self {
        let mut by_name: FxHashMap<&str, Vec<usize>> = FxHashMap::default();
        for (i, f) in calls.fns.iter().enumerate() {
            by_name.entry(f.name.as_str()).or_default().push(i);
        }
        let adts = calls.adts.iter().map(|a| (a.name.as_str(), a)).collect();
        FileTable {
            calls,
            by_name,
            adts,
            plain_owners: std::cell::OnceCell::new(),
        }
    }

    /// The function of the file that `callee`, called in function `caller`, is.
    pub(super) fn resolve(&self, caller: usize, callee: &'f Callee) -> Option<usize> {
        match callee {
            Callee::Path(segments) => match segments.as_slice() {
                [name] => self.free(name),
                [ty, name] if ty == "Self" => {
                    self.method_of(self.calls.fns[caller].owner.as_deref()?, name)
                }
                [ty, name] => self.method_of(ty, name),
                _ => None,
            },
            Callee::Method { name, ty, receiver } => {
                match ty.as_ref().and_then(|ty| self.type_of(caller, ty)) {
                    Some(ty) => self.method_of(ty, name),
                    None => self.method_named_like(receiver.as_deref()?, name),
                }
            }
        }
    }

    /// The name of the type `ty` is, in function `caller`, where the file shows it.
    pub(super) fn type_of(&self, caller: usize, ty: &'f TypeOf) -> Option<&'f str> {
        match ty {
            TypeOf::SelfType => self.calls.fns[caller].owner.as_deref(),
            TypeOf::Named(path) => path.last().map(String::as_str),
            TypeOf::Field(base, field) => {
                let base = self.type_of(caller, base)?;
                let (_, ty) = self
                    .adts
                    .get(base)?
                    .fields
                    .iter()
                    .find(|(f, _)| f == field)?;
                ty.as_ref()?.last().map(String::as_str)
            }
            TypeOf::Variant(ty, variant, index) => {
                let ty = match ty.as_str() {
                    "Self" => self.calls.fns[caller].owner.as_deref()?,
                    ty => ty,
                };
                let (_, fields) = self
                    .adts
                    .get(ty)?
                    .variants
                    .iter()
                    .find(|(v, _)| v == variant)?;
                fields.get(*index)?.as_ref()?.last().map(String::as_str)
            }
        }
    }

    /// The function a call `name(..)` makes: the file's only function of that name.
    fn free(&self, name: &str) -> Option<usize> {
        match self.by_name.get(name)?.as_slice() {
            &[i] if !self.calls.fns[i].method && self.calls.fns[i].body => Some(i),
            _ => None,
        }
    }

    /// The one method `name` of the impls of `owner`.
    fn method_of(&self, owner: &str, name: &str) -> Option<usize> {
        self.one(name, |o| o == owner)
    }

    /// The one method `name` of the impls of a type named as `receiver` is (`Trainer` for
    /// `trainer`, `TrainingStep` for `training_step`).
    fn method_named_like(&self, receiver: &str, name: &str) -> Option<usize> {
        let candidates = self.by_name.get(name)?;
        let receiver = plain(receiver);
        let owners = self.plain_owners.get_or_init(|| {
            let owner = |f: &super::FnDef| f.owner.as_deref().map(plain);
            self.calls.fns.iter().map(owner).collect()
        });
        one(candidates, |i| {
            owners[i].as_ref() == Some(&receiver) && self.calls.fns[i].body
        })
    }

    fn one(&self, name: &str, owner: impl Fn(&str) -> bool) -> Option<usize> {
        let fns = &self.calls.fns;
        one(self.by_name.get(name)?, |i| {
            fns[i].owner.as_deref().is_some_and(&owner) && fns[i].body
        })
    }
}

/// The one of `candidates` that `accept`s.
fn one(candidates: &[usize], accept: impl Fn(usize) -> bool) -> Option<usize> {
    let mut found = candidates.iter().copied().filter(|&i| accept(i));
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// A name lower-cased without underscores: `TrainingStep` and `training_step` are alike.
pub(super) fn plain(name: &str) -> String {
    name.replace('_', "").to_ascii_lowercase()
}
