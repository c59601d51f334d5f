//! Arrows run one way: in each crate, the graph of `crate::module` references between
//! top-level modules (comments and test modules left out) has no cycle. The same check
//! as `bench/module_cycles.py`, which also prints the graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs")
            && p.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(p);
        }
    }
}

/// Top-level module → the top-level modules it names.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" || top == "main" || top == "bin" {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let deps = g.entry(top.clone()).or_default();
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            let mut rest = line;
            while let Some(i) = rest.find("crate::") {
                rest = &rest[i + 7..];
                let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
                    let end = group.find('}').unwrap_or(group.len());
                    group[..end]
                        .split(',')
                        .map(|s| s.trim().split("::").next().unwrap_or(""))
                        .collect()
                } else {
                    vec![
                        rest.split(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                            .next()
                            .unwrap_or(""),
                    ]
                };
                for n in names {
                    if !n.is_empty() && n != top {
                        deps.insert(n.to_string());
                    }
                }
            }
        }
    }
    let known: BTreeSet<String> = g.keys().cloned().collect();
    for deps in g.values_mut() {
        deps.retain(|d| known.contains(d));
    }
    g
}

/// A cycle through `start`, if any (depth-first search).
fn cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn dfs(
        g: &BTreeMap<String, BTreeSet<String>>,
        v: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == v) {
            let mut c = path[i..].to_vec();
            c.push(v.to_string());
            return Some(c);
        }
        if done.contains(v) {
            return None;
        }
        path.push(v.to_string());
        for w in &g[v] {
            if let Some(c) = dfs(g, w, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(v.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys().find_map(|v| dfs(g, v, &mut Vec::new(), &mut done))
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for krate in [
        "gpuscope-runtime",
        "gpuscope-lint",
        "gpuscope-macros",
        "gpuscope-cli",
    ] {
        let g = graph(&root.join(krate).join("src"));
        assert!(g.len() > 3, "{krate}: read {} modules", g.len());
        if let Some(c) = cycle(&g) {
            panic!("{krate}: import cycle {}\n(graph: {g:#?})", c.join(" -> "));
        }
    }
}

#[test]
fn the_check_finds_a_cycle_when_there_is_one() {
    let dir = std::env::temp_dir().join(format!("gpuscope-arch-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("a/mod.rs"), "use crate::b::X;\n").unwrap();
    std::fs::write(
        dir.join("b.rs"),
        "// crate::c in a comment does not count\nfn f() { crate::a::g() }\n",
    )
    .unwrap();
    std::fs::write(dir.join("c.rs"), "use crate::{a, b};\n").unwrap();
    let g = graph(&dir);
    assert_eq!(g["c"], BTreeSet::from(["a".to_string(), "b".to_string()]));
    assert!(cycle(&g).is_some());
    std::fs::remove_dir_all(&dir).unwrap();
}
