//! What the rules know about each tensor library, as data: one [`Framework`] table per
//! supported library (one file each), and which of them a file uses ([`Used`]).
//!
//! A table says which types own device memory, whether `backward()` accumulates into
//! gradients that must be cleared or returns them as a value, which calls clear them,
//! which calls do backward and step (and clearing) in one, which methods read a value back
//! to the host (and which of those wait for the device) or detach it from the graph, and
//! how gradients are turned off.
//!
//! A file uses a library when it names one of the library's crates (`use candle_core::..`,
//! `tch::Tensor`, `extern crate burn`). Code that names none (a module that imports
//! through `super::*` or a prelude of its own) gets the union of every table where that
//! is the quieter choice and [`gpuscope`]'s otherwise: the lint is gpuscope's.

mod burn;
mod candle;
mod cubecl;
mod cudarc;
mod dfdx;
mod gpuscope;
mod neuronika;
mod tch;
mod tract;

use syn::visit::Visit;

/// How a library's `backward()` hands gradients over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gradients {
    /// Added into each parameter's `.grad`, which must be cleared between steps
    /// (PyTorch's semantics: gpuscope, tch, neuronika).
    Accumulate,
    /// Returned as a value (`GradStore`, `Gradients`) that the optimizer step consumes:
    /// nothing accumulates between steps (candle, burn, dfdx).
    Returned,
    /// The library has no autograd (cudarc, tract): no gradient rules apply.
    None,
}

/// One tensor library, as the rules see it.
#[derive(Debug)]
pub(crate) struct Framework {
    /// The library's name, for messages and tests.
    pub(crate) name: &'static str,
    /// The crate names that mark a file as using it (`candle_core`, `candle_nn`, ...).
    pub(crate) crates: &'static [&'static str],
    /// Types whose values own (or are views that keep alive) device memory.
    pub(crate) device_types: &'static [&'static str],
    /// Types of the library that hold host memory only (a tract `Tensor`).
    pub(crate) host_types: &'static [&'static str],
    /// How `backward()` hands gradients over.
    pub(crate) gradients: Gradients,
    /// Method or function names that clear gradients (`zero_grad`, `zero_grads`).
    pub(crate) clear_grads: &'static [&'static str],
    /// Method or function names that run backward and the step together, leaving no
    /// gradients behind (`backward_step`).
    pub(crate) backward_and_step: &'static [&'static str],
    /// Method names of optimizer steps (`step`, `update`).
    pub(crate) steps: &'static [&'static str],
    /// Methods whose result is a host value: no device memory, no graph (`item`, `to_vec1`).
    pub(crate) to_host: &'static [&'static str],
    /// Methods that copy device values to the host and so wait for the device to finish
    /// the work queued before them (`item`, `to_scalar`, `double_value`); metadata reads
    /// (`dims`, `numel`) are not among them.
    pub(crate) device_reads: &'static [&'static str],
    /// Conversions of its tensors into host values read them too (tch's
    /// `f64::try_from(&t)`, `Vec::<f32>::try_from(&t)`, `f32::from(&t)`).
    pub(crate) conversions_read: bool,
    /// Methods whose result is a tensor cut from the graph (`detach`).
    pub(crate) detach: &'static [&'static str],
    /// Calls that return a guard turning gradients off until it drops, as the last path
    /// segments (`["no_grad_guard"]`, `["GradModeGuard", "no_grad"]`).
    pub(crate) no_grad_guards: &'static [&'static [&'static str]],
    /// Functions running a closure with gradients off (`no_grad(|| ..)`).
    pub(crate) no_grad_closures: &'static [&'static str],
    /// Its type names are common words (CubeCL's `Handle`): they count only in files that
    /// name the library, not in the union that applies where no library is named.
    pub(crate) generic_type_names: bool,
    /// Its tensors have in-place arithmetic (`add_`, `sub_`): an out-of-place update has an
    /// in-place alternative to suggest.
    pub(crate) in_place_ops: bool,
}

/// Every supported library, gpuscope's first.
pub(crate) static ALL: &[&Framework] = &[
    &gpuscope::TABLE,
    &candle::TABLE,
    &burn::TABLE,
    &tch::TABLE,
    &dfdx::TABLE,
    &cudarc::TABLE,
    &cubecl::TABLE,
    &neuronika::TABLE,
    &tract::TABLE,
];

/// The library whose crates include `krate`.
pub(crate) fn by_crate(krate: &str) -> Option<&'static Framework> {
    ALL.iter()
        .copied()
        .find(|framework| framework.crates.contains(&krate))
}

/// The libraries a file (or a function body) uses.
#[derive(Clone, Debug, Default)]
pub(crate) struct Used {
    frameworks: Vec<&'static Framework>,
}

/// tch's `(Kind, Device)` constants on the CPU (`tch::kind`: `FLOAT_CPU`, ..).
const TCH_CPU_CONSTANTS: &[&str] = &["FLOAT_CPU", "DOUBLE_CPU", "INT64_CPU"];

impl Used {
    /// The libraries named in `file`'s `use` items, `extern crate`s and paths.
    pub(crate) fn of_file(file: &syn::File) -> Self {
        let mut scan = CrateScan::default();
        scan.visit_file(file);
        scan.used
    }

    /// The libraries named in a function body.
    pub(crate) fn of_block(block: &syn::Block) -> Self {
        let mut scan = CrateScan::default();
        scan.visit_block(block);
        scan.used
    }

    fn add(&mut self, krate: &str) {
        if let Some(framework) = by_crate(krate) {
            self.add_framework(framework);
        }
    }

    fn add_framework(&mut self, framework: &'static Framework) {
        if !self.frameworks.iter().any(|f| f.name == framework.name) {
            self.frameworks.push(framework);
        }
    }

    /// The libraries found, in the order of [`ALL`].
    pub(crate) fn iter(&self) -> impl Iterator<Item = &'static Framework> + '_ {
        ALL.iter()
            .copied()
            .filter(|f| self.frameworks.iter().any(|g| g.name == f.name))
    }

    /// Whether no supported library is named.
    pub(crate) fn is_empty(&self) -> bool {
        self.frameworks.is_empty()
    }

    /// Whether `path` names the CPU device of a library the file uses (any, where it names
    /// none): candle's and tch's `Device::Cpu`, however qualified, or one of tch's
    /// `(Kind, Device::Cpu)` constants ([`TCH_CPU_CONSTANTS`]). Asked of every path the
    /// lint infers a value for, so it compares identifiers and allocates nothing.
    pub(crate) fn names_cpu_device(&self, path: &syn::Path) -> bool {
        let uses = |lib: &str| self.is_empty() || self.iter().any(|f| f.name == lib);
        if crate::syntax::path_ends_with(path, &["Device", "Cpu"]) {
            return uses("candle") || uses("tch");
        }
        TCH_CPU_CONSTANTS
            .iter()
            .any(|c| crate::syntax::path_ends_with(path, &[c]))
            && uses("tch")
    }

    /// Where a backend or device type named `name` computes, in a file using burn or dfdx
    /// (whose tensors carry it in their type, `Tensor<NdArray, 2>`, `Tensor<Rank1<4>, f32,
    /// Cpu>`): `Some(true)` for a CPU one (burn's `NdArray`, `NdArrayDevice`; dfdx's
    /// `Cpu`), `Some(false)` for one that may be a GPU (`Wgpu`, `Cuda`, `LibTorch`, ..),
    /// `None` for any other name or where the file names neither library.
    pub(crate) fn typed_backend(&self, name: &str) -> Option<bool> {
        let tables: [(&str, &[&str], &[&str]); 2] = [
            ("burn", burn::CPU_BACKENDS, burn::OTHER_BACKENDS),
            ("dfdx", dfdx::CPU_DEVICES, dfdx::OTHER_DEVICES),
        ];
        tables
            .into_iter()
            .filter(|(lib, _, _)| self.iter().any(|f| f.name == *lib))
            .find_map(|(_, cpu, other)| {
                if cpu.contains(&name) {
                    Some(true)
                } else if other.contains(&name) {
                    Some(false)
                } else {
                    None
                }
            })
    }

    /// Whether `name` is a trait that a type parameter standing for burn's backend or
    /// dfdx's device is bounded by (`Backend`, `AutodiffBackend`, `Device`).
    pub(crate) fn is_backend_trait(name: &str) -> bool {
        burn::BACKEND_TRAITS.contains(&name) || dfdx::DEVICE_TRAITS.contains(&name)
    }

    /// Whether `name` is one of the reads to the host of a library whose tensors carry
    /// their backend in their type (burn's `into_scalar`, `into_data`, ..; dfdx's `array`,
    /// `as_vec`).
    pub(crate) fn is_typed_backend_read(name: &str) -> bool {
        burn::TABLE.device_reads.contains(&name) || dfdx::TABLE.device_reads.contains(&name)
    }

    /// The tables that apply: the libraries used, or every library when none is named.
    fn tables(&self) -> Box<dyn Iterator<Item = &'static Framework> + '_> {
        if self.is_empty() {
            Box::new(ALL.iter().copied())
        } else {
            Box::new(self.iter())
        }
    }

    /// How gradients behave: `Returned` when every library used returns them (nothing to
    /// clear), `Accumulate` when one of them accumulates or none is named.
    pub(crate) fn gradients(&self) -> Gradients {
        if self.is_empty() {
            return Gradients::Accumulate;
        }
        let mut all_none = true;
        for framework in self.iter() {
            match framework.gradients {
                Gradients::Accumulate => return Gradients::Accumulate,
                Gradients::Returned => all_none = false,
                Gradients::None => {}
            }
        }
        if all_none {
            Gradients::None
        } else {
            Gradients::Returned
        }
    }

    /// Whether the tensors in use have in-place arithmetic: some library used has it, or no
    /// library is named (gpuscope's semantics).
    pub(crate) fn in_place_ops(&self) -> bool {
        self.is_empty() || self.iter().any(|f| f.in_place_ops)
    }

    /// Whether a call named `name` clears gradients, in any table that applies.
    pub(crate) fn clears_grads(&self, name: &str) -> bool {
        name.starts_with("zero_grad")
            || self
                .tables()
                .any(|f| f.clear_grads.contains(&name) || f.backward_and_step.contains(&name))
    }

    /// Whether `name` is an optimizer step in a table that applies.
    pub(crate) fn is_step(&self, name: &str) -> bool {
        self.tables().any(|f| f.steps.contains(&name))
    }

    /// Whether method `name` reads its receiver back to the host (a number or a `Vec`),
    /// in any table: the result holds neither device memory nor a graph.
    pub(crate) fn is_to_host(&self, name: &str) -> bool {
        ALL.iter().any(|f| f.to_host.contains(&name))
    }

    /// Whether method `name` copies device values to the host and waits, in a table that
    /// applies.
    pub(crate) fn is_device_read(&self, name: &str) -> bool {
        self.tables().any(|f| f.device_reads.contains(&name))
    }

    /// Whether converting a tensor into a number or a `Vec` (`f64::try_from(&t)`) reads it
    /// to the host, in a table that applies.
    pub(crate) fn conversions_read(&self) -> bool {
        self.tables().any(|f| f.conversions_read)
    }

    /// Whether method `name` detaches its receiver from the graph, in any table.
    pub(crate) fn is_detach(&self, name: &str) -> bool {
        ALL.iter().any(|f| f.detach.contains(&name))
    }

    /// Whether a call whose path ends with `segments` returns a no-grad guard.
    pub(crate) fn is_no_grad_guard(&self, segments: &[String]) -> bool {
        ALL.iter().any(|f| {
            f.no_grad_guards
                .iter()
                .any(|guard| ends_with(segments, guard))
        })
    }

    /// Whether a function named `name` runs its closure argument with gradients off.
    pub(crate) fn is_no_grad_closure(&self, name: &str) -> bool {
        ALL.iter().any(|f| f.no_grad_closures.contains(&name))
    }

    /// What the type named `name` (its last path segment), written with the crate path
    /// `krate` when there is one, is: a device type, a host type, or neither (`None`).
    pub(crate) fn type_kind(&self, krate: Option<&str>, name: &str) -> Option<bool> {
        let tables: Vec<&'static Framework> = match krate.and_then(by_crate) {
            Some(framework) => vec![framework],
            None if self.is_empty() => ALL
                .iter()
                .copied()
                .filter(|f| !f.generic_type_names)
                .collect(),
            None => self.iter().collect(),
        };
        let device = tables.iter().any(|f| f.device_types.contains(&name));
        let host = tables.iter().any(|f| f.host_types.contains(&name));
        // Where libraries disagree (a file naming none, or tract and candle both), the
        // name is taken for device memory.
        match (device, host) {
            (true, _) => Some(true),
            (false, true) => Some(false),
            (false, false) => None,
        }
    }
}

fn ends_with(segments: &[String], suffix: &[&str]) -> bool {
    segments.len() >= suffix.len()
        && segments[segments.len() - suffix.len()..]
            .iter()
            .zip(suffix)
            .all(|(a, b)| a == b)
}

/// Finds the crate names a syntax tree mentions.
#[derive(Default)]
struct CrateScan {
    used: Used,
}

impl<'ast> Visit<'ast> for CrateScan {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        fn first(tree: &syn::UseTree, used: &mut Used) {
            match tree {
                syn::UseTree::Path(p) => used.add(&p.ident.to_string()),
                syn::UseTree::Name(n) => used.add(&n.ident.to_string()),
                syn::UseTree::Rename(r) => used.add(&r.ident.to_string()),
                syn::UseTree::Group(g) => g.items.iter().for_each(|t| first(t, used)),
                syn::UseTree::Glob(_) => {}
            }
        }
        first(&item.tree, &mut self.used);
    }

    fn visit_item_extern_crate(&mut self, item: &'ast syn::ItemExternCrate) {
        self.used.add(&item.ident.to_string());
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.segments.len() >= 2 {
            let first = &path.segments[0].ident;
            if let Some(framework) = ALL
                .iter()
                .find(|f| crate::syntax::ident_in(first, f.crates))
            {
                self.used.add_framework(framework);
            }
        }
        syn::visit::visit_path(self, path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(src: &str) -> Used {
        Used::of_file(&syn::parse_file(src).unwrap())
    }

    fn names(used: &Used) -> Vec<&'static str> {
        used.iter().map(|f| f.name).collect()
    }

    #[test]
    fn every_table_is_well_formed() {
        for framework in ALL {
            assert!(!framework.crates.is_empty(), "{}", framework.name);
            for list in [
                framework.crates,
                framework.device_types,
                framework.host_types,
                framework.clear_grads,
                framework.backward_and_step,
                framework.steps,
                framework.to_host,
                framework.device_reads,
                framework.detach,
                framework.no_grad_closures,
            ] {
                for word in list {
                    assert!(
                        !word.is_empty() && word.chars().all(|c| c.is_alphanumeric() || c == '_'),
                        "{}: `{word}`",
                        framework.name
                    );
                }
            }
            if framework.gradients == Gradients::None {
                assert!(framework.clear_grads.is_empty() && framework.steps.is_empty());
            }
        }
        // One crate, one library.
        let mut crates: Vec<&str> = ALL.iter().flat_map(|f| f.crates.iter().copied()).collect();
        let n = crates.len();
        crates.sort_unstable();
        crates.dedup();
        assert_eq!(crates.len(), n);
    }

    #[test]
    fn libraries_are_found_from_uses_paths_and_extern_crates() {
        assert_eq!(
            names(&used("use candle_core::{Tensor, Device};")),
            ["candle"]
        );
        assert_eq!(
            names(&used(
                "fn f(t: tch::Tensor) { burn::tensor::Tensor::<B, 1>::zeros(); }"
            )),
            ["burn", "tch"]
        );
        assert_eq!(names(&used("extern crate dfdx;")), ["dfdx"]);
        assert!(used("use std::sync::Mutex; use crate::model::Tensor;").is_empty());
    }

    #[test]
    fn gradient_semantics_follow_the_libraries_used() {
        assert_eq!(
            used("use candle_nn::Optimizer;").gradients(),
            Gradients::Returned
        );
        assert_eq!(
            used("use burn::prelude::*;").gradients(),
            Gradients::Returned
        );
        assert_eq!(used("use tch::nn;").gradients(), Gradients::Accumulate);
        assert_eq!(
            used("use gpuscope::Tensor;").gradients(),
            Gradients::Accumulate
        );
        assert_eq!(
            used("use candle_core::Tensor; use tch::Tensor as T;").gradients(),
            Gradients::Accumulate
        );
        assert_eq!(
            used("use cudarc::driver::CudaSlice;").gradients(),
            Gradients::None
        );
        assert_eq!(used("").gradients(), Gradients::Accumulate);
    }

    #[test]
    fn type_kinds_depend_on_the_library() {
        let tract = used("use tract_core::prelude::*;");
        assert_eq!(tract.type_kind(None, "Tensor"), Some(false));
        assert_eq!(tract.type_kind(Some("tract_core"), "Tensor"), Some(false));
        let candle = used("use candle_core::Tensor;");
        assert_eq!(candle.type_kind(None, "Tensor"), Some(true));
        assert_eq!(candle.type_kind(None, "Var"), Some(true));
        let none = used("");
        assert_eq!(none.type_kind(None, "Tensor"), Some(true));
        assert_eq!(none.type_kind(None, "CudaSlice"), Some(true));
        assert_eq!(none.type_kind(None, "String"), None);
        // A library's own path decides, whatever the file uses.
        assert_eq!(tract.type_kind(Some("tch"), "Tensor"), Some(true));
    }

    #[test]
    fn clears_steps_and_guards_come_from_the_tables() {
        let tch = used("use tch::nn::OptimizerConfig;");
        assert!(tch.clears_grads("zero_grad") && tch.clears_grads("backward_step"));
        assert!(tch.is_step("step"));
        let dfdx = used("use dfdx::prelude::*;");
        assert!(dfdx.clears_grads("zero_grads") && dfdx.is_step("update"));
        assert!(!tch.is_step("update"));
        let segments = |s: &str| s.split("::").map(str::to_owned).collect::<Vec<_>>();
        assert!(tch.is_no_grad_guard(&segments("tch::no_grad_guard")));
        assert!(tch.is_no_grad_guard(&segments("GradModeGuard::no_grad")));
        assert!(!tch.is_no_grad_guard(&segments("guard")));
        assert!(tch.is_no_grad_closure("no_grad"));
        assert!(tch.is_to_host("item") && tch.is_to_host("to_vec1") && tch.is_detach("detach"));
    }
}
