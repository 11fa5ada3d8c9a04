//! What the tests and benchmarks of every crate share: where the
//! configuration `scripts/setup.sh` generated is, and its profiles as the
//! setup wrote them. One place, so that a test and a benchmark never
//! disagree on which configuration they read.
//!
//! A dev-dependency only: nothing of progscore is used here (a profile is
//! returned as whatever type the caller deserializes it into).

pub mod leftovers;
pub mod served;

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// The generated configuration: `PROGSCORE_CONFIG`, or `progscore.toml` at
/// the workspace's root.
pub fn generated_config_path() -> PathBuf {
    std::env::var_os("PROGSCORE_CONFIG")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("progscore.toml"))
}

/// The workspace's root folder.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/kit is two folders below the workspace's root")
        .to_path_buf()
}

/// The generated configuration's text; panics with what to run when it
/// is missing.
pub fn generated_config_text() -> String {
    let path = generated_config_path();
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {} ({e}); run `bash scripts/setup.sh`, which writes it",
            path.display()
        )
    })
}

/// The generated configuration, parsed.
pub fn generated_config() -> toml::Table {
    let path = generated_config_path();
    toml::from_str(&generated_config_text())
        .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()))
}

/// `[profiles.NAME]` of the generated configuration, as `T`.
pub fn generated_profile<T: DeserializeOwned>(name: &str) -> T {
    let path = generated_config_path();
    let profile = generated_config()
        .get("profiles")
        .and_then(|profiles| profiles.get(name))
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "profile {name} missing from {}; run `bash scripts/setup.sh` (with the \
                 languages that need it)",
                path.display()
            )
        });
    profile
        .try_into()
        .unwrap_or_else(|e| panic!("[profiles.{name}] in {}: {e}", path.display()))
}

/// The image `[profiles.NAME]` pins.
pub fn generated_image(name: &str) -> String {
    let profile: toml::Table = generated_profile(name);
    profile
        .get("image")
        .and_then(toml::Value::as_str)
        .unwrap_or_else(|| panic!("[profiles.{name}] has no image"))
        .to_owned()
}

/// `text` with `from` replaced by `to`; panics naming `from` when `text`
/// does not hold it, so that a test whose config edit stopped matching
/// (the generated config changed) fails loudly instead of silently testing
/// something else.
pub fn replace_required(text: &str, from: &str, to: &str) -> String {
    assert!(
        text.contains(from),
        "the config edit expects `{from}`, which the config no longer holds: update the test"
    );
    text.replace(from, to)
}
