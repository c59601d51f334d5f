//! The crates of a package and the module of each of its files, from the files' paths
//! relative to the package's root and their `mod name;` declarations, as Cargo and rustc
//! lay them out: `src/lib.rs` and `src/main.rs` are the package's crate (one module tree
//! here), `src/bin/x.rs`, `src/bin/x/main.rs`, `tests/x.rs`, `examples/x.rs`,
//! `benches/x.rs` (or `x/main.rs` there) each a crate of its own; a `mod name;` in a crate
//! root or a `mod.rs` is `name.rs` or `name/mod.rs` beside it, in another file `a.rs` it is
//! under `a/`, and `#[path = ".."]` names the file from the declaring file's directory.
//! A file that no root reaches through `mod` declarations is in no crate.

use rustc_hash::{FxHashMap, FxHashSet};

use super::{FileCalls, ModDecl};

/// Where a file is: its crate (an index into [`Modules::units`]) and its module path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Place {
    pub(super) unit: usize,
    pub(super) module: Vec<String>,
}

/// The crates of a package and the modules of its files.
#[derive(Debug, Default)]
pub(super) struct Modules {
    /// Each crate's name: `src` for the library and `src/main.rs`, `bin/x`, `tests/x`, ...
    pub(super) units: Vec<String>,
    /// Each file's place, by its index.
    pub(super) places: Vec<Option<Place>>,
    /// The crate that the others reach by the package's name (`src`).
    pub(super) lib: Option<usize>,
    /// Every module of every crate: files' and the inline modules they declare.
    modules: FxHashSet<(usize, Vec<String>)>,
}

impl Modules {
    /// The crates and modules of the files at `paths` (relative to the package's root,
    /// one component each) that declare what `calls` holds.
    pub(super) fn of(paths: &[Vec<String>], calls: &[&FileCalls]) -> Modules {
        let by_path: FxHashMap<String, usize> = paths
            .iter()
            .enumerate()
            .map(|(i, p)| (p.join("/"), i))
            .collect();
        let mut found = Modules {
            places: vec![None; paths.len()],
            ..Modules::default()
        };
        let mut roots: Vec<(usize, String)> = paths
            .iter()
            .enumerate()
            .filter_map(|(i, p)| Some((i, root_unit(p)?)))
            .collect();
        // `src` first, so that a file both roots reach is the library's.
        roots.sort_by_key(|(i, unit)| (unit != "src", *i));
        for (file, unit) in roots {
            let id = match found.units.iter().position(|u| *u == unit) {
                Some(id) => id,
                None => {
                    found.units.push(unit.clone());
                    found.units.len() - 1
                }
            };
            if unit == "src" {
                found.lib = Some(id);
            }
            found.reach(file, id, Vec::new(), true, paths, calls, &by_path);
        }
        found
    }

    /// Places `file` at `module` of crate `unit`, then the files its `mod` declarations
    /// name.
    #[allow(clippy::too_many_arguments)]
    fn reach(
        &mut self,
        file: usize,
        unit: usize,
        module: Vec<String>,
        root: bool,
        paths: &[Vec<String>],
        calls: &[&FileCalls],
        by_path: &FxHashMap<String, usize>,
    ) {
        if self.places[file].is_some() {
            return;
        }
        let inline = calls[file]
            .fns
            .iter()
            .map(|f| &f.module)
            .chain(calls[file].uses.iter().map(|u| &u.module))
            .chain(calls[file].adts.iter().map(|a| &a.module))
            .chain(calls[file].mods.iter().map(|m| &m.module));
        for inner in inline {
            for n in 1..=inner.len() {
                let mut m = module.clone();
                m.extend_from_slice(&inner[..n]);
                self.modules.insert((unit, m));
            }
        }
        self.modules.insert((unit, module.clone()));
        self.places[file] = Some(Place {
            unit,
            module: module.clone(),
        });
        let path = &paths[file];
        let Some((name, dir)) = path.split_last() else {
            return;
        };
        // Modules of a crate root or a `mod.rs` are beside it; of `a.rs`, under `a/`.
        let mut base = dir.to_vec();
        if !(root || name == "mod.rs") {
            base.push(name.trim_end_matches(".rs").to_owned());
        }
        for decl in &calls[file].mods {
            let Some(child) = child_file(dir, &base, decl, by_path) else {
                continue;
            };
            let mut child_module = module.clone();
            child_module.extend(decl.module.iter().cloned());
            child_module.push(decl.name.clone());
            self.reach(child, unit, child_module, false, paths, calls, by_path);
        }
    }

    /// Whether crate `unit` has the module `module`.
    pub(super) fn exists(&self, unit: usize, module: &[String]) -> bool {
        self.modules.contains(&(unit, module.to_vec()))
    }
}

/// The crate that the file at `path` is the root of, if it is one.
fn root_unit(path: &[String]) -> Option<String> {
    let strs: Vec<&str> = path.iter().map(String::as_str).collect();
    match strs.as_slice() {
        ["src", "lib.rs" | "main.rs"] => Some("src".to_owned()),
        ["src", "bin", file] => Some(format!("bin/{}", file.strip_suffix(".rs")?)),
        ["src", "bin", dir, "main.rs"] => Some(format!("bin/{dir}")),
        [kind @ ("tests" | "examples" | "benches"), file] => {
            Some(format!("{kind}/{}", file.strip_suffix(".rs")?))
        }
        [kind @ ("tests" | "examples" | "benches"), dir, "main.rs"] => {
            Some(format!("{kind}/{dir}"))
        }
        _ => None,
    }
}

/// The file that `decl`, in a file in directory `dir` whose modules are under `base`, names.
fn child_file(
    dir: &[String],
    base: &[String],
    decl: &ModDecl,
    by_path: &FxHashMap<String, usize>,
) -> Option<usize> {
    if let Some(path) = &decl.path {
        let mut at: Vec<&str> = dir.iter().map(String::as_str).collect();
        at.extend(decl.module.iter().map(String::as_str));
        for part in path.split(['/', '\\']) {
            match part {
                "" | "." => {}
                ".." => {
                    at.pop()?;
                }
                part => at.push(part),
            }
        }
        return by_path.get(&at.join("/")).copied();
    }
    let mut at: Vec<&str> = base.iter().map(String::as_str).collect();
    at.extend(decl.module.iter().map(String::as_str));
    at.push(&decl.name);
    let flat = format!("{}.rs", at.join("/"));
    let nested = format!("{}/mod.rs", at.join("/"));
    by_path.get(&flat).or_else(|| by_path.get(&nested)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(mods: &[&str]) -> FileCalls {
        FileCalls {
            mods: mods
                .iter()
                .map(|m| ModDecl {
                    module: Vec::new(),
                    name: (*m).to_owned(),
                    path: None,
                })
                .collect(),
            ..FileCalls::default()
        }
    }

    #[test]
    fn files_are_placed_through_mod_declarations_as_rustc_finds_them() {
        let paths: Vec<Vec<String>> = [
            "src/lib.rs",
            "src/training/mod.rs",
            "src/training/trainer.rs",
            "src/cuda.rs",
            "src/cuda/kernels.rs",
            "src/bin/train.rs",
            "src/orphan.rs",
            "tests/data/sample.rs",
            "tests/smoke.rs",
        ]
        .iter()
        .map(|p| p.split('/').map(str::to_owned).collect())
        .collect();
        let decls = [
            file(&["training", "cuda"]),
            file(&["trainer"]),
            file(&[]),
            file(&["kernels"]),
            file(&[]),
            file(&[]),
            file(&[]),
            file(&[]),
            file(&[]),
        ];
        let calls: Vec<&FileCalls> = decls.iter().collect();
        let modules = Modules::of(&paths, &calls);
        let place = |i: usize| {
            modules.places[i]
                .as_ref()
                .map(|p| (modules.units[p.unit].as_str(), p.module.join("::")))
        };
        assert_eq!(place(0), Some(("src", String::new())));
        assert_eq!(place(2), Some(("src", "training::trainer".to_owned())));
        assert_eq!(place(4), Some(("src", "cuda::kernels".to_owned())));
        assert_eq!(place(5), Some(("bin/train", String::new())));
        assert_eq!(place(6), None);
        assert_eq!(place(7), None);
        assert_eq!(place(8), Some(("tests/smoke", String::new())));
        assert_eq!(modules.lib, Some(0));
        assert!(modules.exists(0, &["training".to_owned()]));
        assert!(!modules.exists(0, &["orphan".to_owned()]));
    }
}
