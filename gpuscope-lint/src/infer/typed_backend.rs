//! Where burn and dfdx compute, as the type names show ([`TypedBackends`]).
//!
//! burn's tensors carry their backend in their type (`Tensor<NdArray, 2>`, `Tensor<B, 2>`
//! with `type B = Autodiff<NdArray>;`), and dfdx's their device (`Tensor<Rank1<4>, f32,
//! Cpu>`, `type Device = Cpu;`), not in a device value as candle's and tch's do. A
//! function that names a CPU backend (burn's `NdArray`, its device `NdArrayDevice`, dfdx's
//! `Cpu`, or an alias of the file for one of them) and no other backend, and is not generic
//! over one, has all its tensors on the CPU: the test of a model on `NdArray`, an example
//! that trains on dfdx's `Cpu`. Reading those waits for no device.

use rustc_hash::FxHashSet;

use syn::visit::{self, Visit};
use syn::{Block, Signature, Type};

use crate::frameworks::Used;

/// The file's type aliases of burn backends, by where the backend computes.
#[derive(Debug, Default)]
pub(crate) struct TypedBackends {
    /// Aliases of a CPU backend only (`type B = NdArray<f32>;`, `type AB = Autodiff<NdArray>;`,
    /// `type Device = Cpu;`).
    cpu: FxHashSet<String>,
    /// Aliases that name a backend that may be a GPU (or declared twice, once so).
    other: FxHashSet<String>,
    /// The file imports a CPU backend or declares an alias of one: without that, no
    /// function is looked at.
    cpu_named: bool,
}

impl TypedBackends {
    /// Notes `type name = ty;`.
    pub(super) fn add_alias(&mut self, used: &Used, name: &str, ty: &Type) {
        let mut names = BackendNames::new(self, used);
        names.visit_type(ty);
        let verdict = names.verdict();
        self.note_alias(name, verdict);
    }

    /// Files `name` as an alias of the CPU backend (`Some(true)`) or of another one.
    fn note_alias(&mut self, name: &str, backend: Option<bool>) {
        match backend {
            Some(true) if !self.other.contains(name) => {
                self.cpu.insert(name.to_owned());
                self.cpu_named = true;
            }
            Some(false) => {
                self.cpu.remove(name);
                self.other.insert(name.to_owned());
            }
            _ => {}
        }
    }

    /// Notes an imported name (`use burn::backend::NdArray;`, `use dfdx::tensor::Cpu;`).
    pub(super) fn add_import(&mut self, used: &Used, name: &str) {
        self.cpu_named |= used.typed_backend(name) == Some(true);
    }

    /// Notes a renamed import (`use burn::backend::NdArray as Cpu;`), an alias.
    pub(super) fn add_renamed_import(&mut self, used: &Used, rename: &str, name: &str) {
        self.note_alias(rename, used.typed_backend(name));
    }

    /// Whether the function of `sig` and `body` runs on a CPU backend: it names one or an
    /// alias of one, names no other backend (nor an alias of one), and has no
    /// type parameters (`generic_outer`: neither has the impl or trait around it) that
    /// could stand for another.
    pub(super) fn runs_on_cpu(
        &self,
        used: &Used,
        sig: &Signature,
        body: &Block,
        generic_outer: bool,
    ) -> bool {
        if !self.cpu_named || generic_outer || sig.generics.type_params().next().is_some() {
            return false;
        }
        let mut names = BackendNames::new(self, used);
        names.visit_signature(sig);
        names.visit_block(body);
        names.verdict() == Some(true)
    }
}

/// The backends named in the code visited.
struct BackendNames<'a> {
    aliases: &'a TypedBackends,
    used: &'a Used,
    cpu: bool,
    other: bool,
}

impl<'a> BackendNames<'a> {
    fn new(aliases: &'a TypedBackends, used: &'a Used) -> Self {
        BackendNames {
            aliases,
            used,
            cpu: false,
            other: false,
        }
    }

    /// `Some(true)`: only the CPU backend is named; `Some(false)`: another one is; `None`: none.
    fn verdict(&self) -> Option<bool> {
        match (self.cpu, self.other) {
            (_, true) => Some(false),
            (true, false) => Some(true),
            (false, false) => None,
        }
    }
}

impl<'ast> Visit<'ast> for BackendNames<'_> {
    fn visit_ident(&mut self, ident: &'ast syn::Ident) {
        if self.other {
            return;
        }
        let name = ident.to_string();
        if self.aliases.other.contains(&name) {
            self.other = true;
        } else if self.aliases.cpu.contains(&name) {
            self.cpu = true;
        } else {
            match self.used.typed_backend(&name) {
                Some(true) => self.cpu = true,
                Some(false) => self.other = true,
                None => {}
            }
        }
    }

    fn visit_block(&mut self, block: &'ast Block) {
        if !self.other {
            visit::visit_block(self, block);
        }
    }
}
