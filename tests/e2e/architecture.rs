//! The crates' dependencies point one way (ARCHITECTURE.md): checked on the
//! workspace's own manifests, so that a new arrow back up fails here. And
//! inside every crate, no file imports itself through others (no import
//! circle), read from the code's own `crate::`, `super::` and `self::` paths.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Each crate's layer: a crate may depend on crates of lower layers only.
/// A crate missing here fails the test until it is given its place.
const LAYERS: &[(&str, u8)] = &[
    // The contract, and what needs nothing of progscore.
    ("progscore-sandbox", 0),
    ("progscore-oci-image", 0),
    ("progscore-comparator-host", 0),
    // Tests' and benchmarks' shared lookups (a dev-dependency).
    ("progscore-test-kit", 0),
    // Behaviour tracing, which the containers' window reads the tracer's
    // time from.
    ("progscore-trace", 1),
    ("progscore-container", 2),
    ("progscore-evidence", 1),
    ("progscore-wasi", 1),
    ("progscore-docker", 3),
    ("progscore-oci", 3),
    ("progscore-scoring", 2),
    ("progscore-report", 3),
    // The library under every face.
    ("progscore-runtime", 4),
    // The faces' libraries: none imports another.
    ("progscore-python", 5),
    ("progscore-server", 5),
    // The binary: the CLI, and the launcher of `progscore serve`.
    ("progscore", 6),
    // Tests of everything.
    ("progscore-e2e", 7),
];

/// What a sandbox backend may depend on (ARCHITECTURE.md: "a backend
/// depends on plugins/sandbox, and the shared plugins/container,
/// plugins/oci-image, and plugins/trace, only").
const BACKENDS: &[&str] = &["progscore-docker", "progscore-oci", "progscore-wasi"];
/// The faces over the runtime: the CLI binary, the Python package, the server.
const FACES: &[&str] = &["progscore", "progscore-python", "progscore-server"];
const BACKEND_MAY_USE: &[&str] = &[
    "progscore-sandbox",
    "progscore-container",
    "progscore-trace",
    "progscore-oci-image",
];

/// The workspace's own packages, as `cargo metadata` describes them.
fn workspace_metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata's JSON")
}

/// Workspace crate -> its workspace dependencies (normal and build ones; dev
/// dependencies are tests').
fn workspace_dependencies() -> BTreeMap<String, Vec<String>> {
    let metadata = workspace_metadata();
    let packages = metadata["packages"].as_array().expect("packages");
    let names: Vec<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().expect("a package name"))
        .collect();
    packages
        .iter()
        .map(|package| {
            let dependencies = package["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .filter_map(|d| d["name"].as_str())
                .filter(|name| names.contains(name))
                .map(String::from)
                .collect();
            (package["name"].as_str().unwrap().to_string(), dependencies)
        })
        .collect()
}

#[test]
fn crate_dependencies_point_one_way_and_backends_use_only_the_contract() {
    let layer = |name: &str| {
        LAYERS
            .iter()
            .find(|(crate_name, _)| *crate_name == name)
            .map(|(_, layer)| *layer)
            .unwrap_or_else(|| {
                panic!("crate `{name}` has no layer: give it one in tests/e2e/architecture.rs")
            })
    };
    let crates = workspace_dependencies();
    assert!(crates.contains_key("progscore-runtime"), "{crates:?}");
    let mut wrong = Vec::new();
    for (name, dependencies) in &crates {
        for dependency in dependencies {
            if layer(dependency) >= layer(name) {
                wrong.push(format!("{name} -> {dependency}"));
            }
            if BACKENDS.contains(&name.as_str()) && !BACKEND_MAY_USE.contains(&dependency.as_str())
            {
                wrong.push(format!("backend {name} -> {dependency}"));
            }
        }
    }
    assert_eq!(wrong, Vec::<String>::new(), "arrows back up or across");
    // The faces share the runtime rather than each other, and reach the
    // backends only through it.
    for face in FACES {
        let backends: Vec<&String> = crates[*face]
            .iter()
            .filter(|d| BACKENDS.contains(&d.as_str()))
            .collect();
        assert!(
            backends.is_empty(),
            "face {face} depends on backends {backends:?}: reach them through progscore-runtime"
        );
    }
    for face in FACES {
        assert!(
            crates[*face].iter().any(|d| d == "progscore-runtime"),
            "{face} does not use progscore-runtime: {:?}",
            crates[*face]
        );
    }
}

/// A crate target's modules: module path -> its file, found from the root
/// file by its `mod name;` declarations.
fn module_files(root: &Path) -> BTreeMap<Vec<String>, std::path::PathBuf> {
    let mut found = BTreeMap::new();
    let mut pending = vec![(Vec::<String>::new(), root.to_path_buf())];
    while let Some((path, file)) = pending.pop() {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        // Where this file's child modules live: beside a root or a mod.rs,
        // in a folder of the file's own name otherwise.
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let folder = file.parent().expect("a file has a folder");
        let children = if path.is_empty() || stem == "mod" {
            folder.to_path_buf()
        } else {
            folder.join(stem)
        };
        for name in declared_modules(&text) {
            let candidates = [
                children.join(format!("{name}.rs")),
                children.join(&name).join("mod.rs"),
            ];
            if let Some(child) = candidates.iter().find(|c| c.is_file()) {
                let mut child_path = path.clone();
                child_path.push(name);
                pending.push((child_path, child.clone()));
            }
        }
        found.insert(path, file);
    }
    found
}

/// The names of `mod name;` declarations (modules in files of their own).
fn declared_modules(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub(crate) mod ")
                .or_else(|| line.strip_prefix("pub(super) mod "))
                .or_else(|| line.strip_prefix("pub mod "))
                .or_else(|| line.strip_prefix("mod "))?;
            let name = rest.strip_suffix(';')?.trim();
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
                .then(|| name.to_string())
        })
        .collect()
}

/// The module paths a file names through `crate::`, `super::` and
/// `self::` (groups in braces included), as written.
fn named_paths(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut named = Vec::new();
    for anchor in ["crate::", "super::", "self::"] {
        let mut rest = text;
        while let Some(at) = rest.find(anchor) {
            let before = rest[..at].chars().next_back();
            rest = &rest[at + anchor.len()..];
            if before.is_some_and(|c| ident(c) || c == ':') {
                continue;
            }
            let mut base = match anchor {
                "crate::" => Vec::new(),
                _ => module.to_vec(),
            };
            let mut tail = rest;
            if anchor == "super::" && tail.starts_with('*') {
                // `use super::*;` is an inline test module taking its own file's names.
                continue;
            }
            if anchor == "super::" {
                // `super` of a module is its parent; `super::super::` climbs further.
                base.pop();
                while let Some(further) = tail.strip_prefix("super::") {
                    base.pop();
                    tail = further;
                }
            }
            let items: Vec<&str> = if let Some(group) = tail.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                group[..end].split(',').collect()
            } else {
                let end = tail
                    .find(|c: char| !(ident(c) || c == ':'))
                    .unwrap_or(tail.len());
                vec![&tail[..end]]
            };
            for item in items {
                let mut path = base.clone();
                path.extend(
                    item.split("::")
                        .map(|s| s.trim().trim_start_matches('{').to_string())
                        .take_while(|s| !s.is_empty() && s.chars().all(ident)),
                );
                named.push(path);
            }
        }
    }
    named
}

/// Files of one crate target that import each other in a loop.
fn file_circles(root: &Path) -> Vec<Vec<String>> {
    let modules = module_files(root);
    let files: Vec<&Vec<String>> = modules.keys().collect();
    let index = |path: &Vec<String>| files.iter().position(|p| *p == path);
    let mut arrows: Vec<Vec<usize>> = vec![Vec::new(); files.len()];
    for (from, (module, file)) in modules.iter().enumerate() {
        // Code only: a doc link to a module is no import.
        let text: String = std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .map(|line| line.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        for named in named_paths(&text, module) {
            // The longest prefix that is a module in a file of its own.
            let target = (0..=named.len())
                .rev()
                .find_map(|len| index(&named[..len].to_vec()));
            if let Some(to) = target
                && to != from
                && !arrows[from].contains(&to)
            {
                arrows[from].push(to);
            }
        }
    }
    // Files that reach each other both ways are in one circle.
    let reaches = |start: usize| {
        let mut seen = vec![false; files.len()];
        let mut stack = vec![start];
        while let Some(at) = stack.pop() {
            for &next in &arrows[at] {
                if !seen[next] {
                    seen[next] = true;
                    stack.push(next);
                }
            }
        }
        seen
    };
    let reach: Vec<Vec<bool>> = (0..files.len()).map(reaches).collect();
    let mut circles: Vec<Vec<String>> = Vec::new();
    let mut placed = vec![false; files.len()];
    for a in 0..files.len() {
        if placed[a] || !reach[a][a] {
            continue;
        }
        let circle: Vec<usize> = (0..files.len())
            .filter(|&b| reach[a][b] && reach[b][a])
            .collect();
        for &b in &circle {
            placed[b] = true;
        }
        circles.push(
            circle
                .iter()
                .map(|&b| modules[files[b]].display().to_string())
                .collect(),
        );
    }
    circles
}

#[test]
fn no_file_of_any_crate_imports_itself_through_others() {
    let metadata = workspace_metadata();
    let mut roots = Vec::new();
    for package in metadata["packages"].as_array().expect("packages") {
        for target in package["targets"].as_array().expect("targets") {
            let kinds = target["kind"].as_array().expect("kinds");
            if kinds
                .iter()
                .any(|k| k == "lib" || k == "bin" || k == "cdylib")
            {
                roots.push(std::path::PathBuf::from(
                    target["src_path"].as_str().expect("a source path"),
                ));
            }
        }
    }
    assert!(roots.len() > 10, "{roots:?}");
    let circles: Vec<Vec<String>> = roots.iter().flat_map(|r| file_circles(r)).collect();
    assert_eq!(circles, Vec::<Vec<String>>::new(), "import circles");
}
