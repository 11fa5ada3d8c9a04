//! The crates' dependencies point one way (ARCHITECTURE.md): checked on the
//! workspace's own manifests, so that a new arrow back up fails here.

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
    ("progscore-container", 1),
    ("progscore-evidence", 1),
    ("progscore-wasi", 1),
    ("progscore-docker", 2),
    ("progscore-oci", 2),
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
/// plugins/oci-image, only").
const BACKENDS: &[&str] = &["progscore-docker", "progscore-oci", "progscore-wasi"];
const BACKEND_MAY_USE: &[&str] = &[
    "progscore-sandbox",
    "progscore-container",
    "progscore-oci-image",
];

/// Workspace crate -> its workspace dependencies (normal and build ones; dev
/// dependencies are tests').
fn workspace_dependencies() -> BTreeMap<String, Vec<String>> {
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
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata's JSON");
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
    // The faces share the runtime rather than each other.
    for face in ["progscore", "progscore-python", "progscore-server"] {
        assert!(
            crates[face].iter().any(|d| d == "progscore-runtime"),
            "{face} does not use progscore-runtime: {:?}",
            crates[face]
        );
    }
}
