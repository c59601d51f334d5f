//! The packages the files to lint belong to, so that a read in one file that a loop of
//! another file of its crate repeats is found (`gpuscope_lint::package_findings`). A
//! package's root is a directory `D` whose `D/src/lib.rs`, `D/src/main.rs` or a
//! `D/src/bin/` file is among the files linted; each file belongs to the nearest root above
//! it. Its library's name is read from `D/Cargo.toml` where there is one. Only packages of
//! two files or more, in which some file is linted at levels where the callers' loops
//! count ([`gpuscope_lint::follows_callers`]), are linted together.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use super::files::Input;
use super::settings::Settings;

/// A package whose files are linted together.
#[derive(Debug)]
pub struct Package {
    pub root: PathBuf,
    /// Its files, by their index among the inputs.
    pub files: Vec<usize>,
    /// Its library's name, from its `Cargo.toml`.
    pub lib_name: Option<String>,
}

/// The packages of `inputs` linted together, and each input's (an index into them).
#[derive(Debug, Default)]
pub struct Packages {
    pub list: Vec<Package>,
    pub of: Vec<Option<usize>>,
}

/// Groups `inputs` into packages, at the levels of `settings`.
pub fn group(inputs: &[Input], settings: &Settings) -> Packages {
    let files: Vec<Option<&Path>> = inputs
        .iter()
        .map(|input| match input {
            Input::File(path) => Some(path.as_path()),
            Input::Problem { .. } => None,
        })
        .collect();
    let roots: BTreeSet<&Path> = files.iter().flatten().filter_map(|p| root_of(p)).collect();
    let mut by_root: HashMap<&Path, Vec<usize>> = HashMap::new();
    for (i, path) in files.iter().enumerate() {
        let Some(path) = path else { continue };
        if let Some(root) = path.ancestors().skip(1).find(|a| roots.contains(a)) {
            by_root.entry(root).or_default().push(i);
        }
    }
    let mut packages = Packages {
        list: Vec::new(),
        of: vec![None; inputs.len()],
    };
    let mut roots: Vec<(&Path, Vec<usize>)> = by_root.into_iter().collect();
    roots.sort();
    for (root, members) in roots {
        let follows = members.iter().any(|&i| {
            files[i].is_some_and(|p| gpuscope_lint::follows_callers(&settings.levels_for(p)))
        });
        if members.len() < 2 || !follows {
            continue;
        }
        let id = packages.list.len();
        for &i in &members {
            packages.of[i] = Some(id);
        }
        let lib_name = std::fs::read_to_string(root.join("Cargo.toml"))
            .ok()
            .and_then(|manifest| gpuscope_lint::config::library_name(&manifest));
        packages.list.push(Package {
            root: root.to_owned(),
            files: members,
            lib_name,
        });
    }
    packages
}

/// The package root that the file at `path` shows: `D` of `D/src/lib.rs`, `D/src/main.rs`,
/// `D/src/bin/x.rs` or `D/src/bin/x/main.rs`.
fn root_of(path: &Path) -> Option<&Path> {
    let named = |p: &Path, name: &str| p.file_name().is_some_and(|n| n == name);
    let name = path.file_name()?.to_str()?;
    let dir = path.parent()?;
    let src = if named(dir, "src") && (name == "lib.rs" || name == "main.rs") {
        dir
    } else if named(dir, "bin") && name.ends_with(".rs") {
        dir.parent()?
    } else if name == "main.rs" && dir.parent().is_some_and(|d| named(d, "bin")) {
        dir.parent()?.parent()?
    } else {
        return None;
    };
    if named(src, "src") {
        src.parent()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_the_directories_above_src() {
        let root = |p: &str| root_of(Path::new(p)).map(|r| r.to_string_lossy().into_owned());
        assert_eq!(root("./repo/src/lib.rs").as_deref(), Some("./repo"));
        assert_eq!(root("crates/mz/src/main.rs").as_deref(), Some("crates/mz"));
        assert_eq!(
            root("crates/mz/src/bin/train.rs").as_deref(),
            Some("crates/mz")
        );
        assert_eq!(
            root("crates/mz/src/bin/play/main.rs").as_deref(),
            Some("crates/mz")
        );
        assert_eq!(root("src/lib.rs").as_deref(), Some(""));
        assert_eq!(root("crates/mz/src/train.rs"), None);
        assert_eq!(root("crates/mz/tests/smoke.rs"), None);
        assert_eq!(root("lib.rs"), None);
    }
}
