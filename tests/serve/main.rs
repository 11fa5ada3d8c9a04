//! `progscore serve` end to end: the built binary started on loopback with
//! the real engine, asked over real HTTP (a plain HTTP/1.1 client here, and
//! the published SandboxFusion and verl clients from the venv that
//! scripts/setup.sh fills).

mod exposure;
mod judge0;
mod lifecycle;
mod limits;
mod load;
mod piston;
mod sandbox_fusion;

use progscore_e2e::Dir;
pub use progscore_e2e::served::{Reply, ServeIn, Served, request, try_post_json, try_request};

/// A token long enough for `[serve] tokens`.
pub const TOKEN: &str = "test-token-0123456789abcdef";

/// Serves python and cpp only (the generated config's other profiles need
/// other runtimes), with short timeouts so that loops end soon.
pub fn serving_dir(extra_serve: &str) -> Dir {
    let dir = Dir::new();
    dir.edit_config(|text| {
        format!(
            "{}\n[serve]\nprofiles = [\"python\", \"cpp\"]\n{extra_serve}\n",
            progscore_test_kit::replace_required(&text, "timeout = \"10s\"", "timeout = \"2s\"")
        )
    });
    dir
}

/// The build a served observation's run used: its compile event, as JSON
/// (the same text for every request of one gathered build, since each
/// request's own observation carries the build it shared).
pub fn build_of(served: &Served, observation: &str) -> String {
    let stored = served
        .request("GET", &format!("/v1/observations/{observation}"), &[], b"")
        .json();
    assert_eq!(
        stored["run"]["events"].as_array().map(Vec::len),
        Some(1),
        "a request's own observation holds its own case only: {stored}"
    );
    assert!(stored["run"]["compile"].is_object(), "{stored}");
    stored["run"]["compile"].to_string()
}

/// Where scripts/setup.sh installed the published clients (the
/// SandboxFusion and Judge0 SDKs, verl's module).
pub fn clients_dir() -> std::path::PathBuf {
    std::env::var_os("PROGSCORE_SERVE_CLIENTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from("/var/cache/progscore/serve-clients"))
}

/// Runs the client script `serve/clients/SCRIPT` with the clients' venv
/// against `served` (its URL, then `args`); passes when the script ends
/// with "all clients agree" and the server then stops cleanly on SIGTERM.
pub fn run_clients(served: Served, script: &str, args: &[&std::path::Path]) {
    let python = clients_dir().join("venv/bin/python");
    assert!(
        python.exists(),
        "{} not installed: run scripts/setup.sh",
        python.display()
    );
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("serve/clients")
        .join(script);
    let output = std::process::Command::new(&python)
        .arg(&script)
        .arg(served.url())
        .args(args)
        .output()
        .expect("run the clients");
    let printed = String::from_utf8_lossy(&output.stdout);
    let (code, log) = served.terminate();
    assert!(
        output.status.success() && printed.contains("all clients agree"),
        "{printed}\n{}\nserver log:\n{log}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(code, Some(0), "{log}");
}
