//! The OCI backend against the real runc and runsc, the real registry and
//! the host's cgroups: what only this backend promises (its cleanup on every
//! path, its seccomp profile, its refusals, its image cache). The behaviour
//! it shares with every backend is in the conformance battery
//! (`tests/conformance`); the sweep after a killed progscore and SIGTERM are
//! in the end-to-end signals tests, which drive the binary.

use progscore_sandbox::SandboxClientExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod conversation;
mod faults;
mod frozen;
mod traced_runc;
mod tracer_wait;

use progscore_oci::{OciClient, OciOptions};
use progscore_sandbox::{
    Invocation, Outcome, ProfileSpec, ProgramRun, RuntimeProfile, SandboxClient, SandboxError,
};

fn spec(name: &str) -> ProfileSpec {
    let mut spec: ProfileSpec = progscore_test_kit::generated_profile(name);
    spec.limits.timeout = "3s".into();
    spec
}

/// The generated `python-oci` and `python-oci-gvisor` profiles, with a
/// shorter timeout.
fn profiles() -> Vec<RuntimeProfile> {
    ["python-oci", "python-oci-gvisor"]
        .into_iter()
        .map(|name| RuntimeProfile::from_spec(name, &spec(name), Path::new(".")).expect("profile"))
        .collect()
}

fn client() -> OciClient {
    OciClient::new(profiles(), OciOptions::default()).expect("client")
}

async fn run(client: &OciClient, profile: &str, program: &str) -> ProgramRun {
    client
        .execute(program.as_bytes(), profile, &[Invocation::default()])
        .await
        .unwrap_or_else(|e| panic!("{profile}: {e}"))
}

fn stdout(run: &ProgramRun) -> String {
    run.events[0].stdout.data.to_string_lossy()
}

/// Everything of `client` that could outlive a call: files in its folder
/// (workspaces, bundles), its runtimes' state, its cgroups, mounts naming it.
fn leftovers(client: &OciClient) -> Vec<String> {
    let owner = client.owner();
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(client.owner_dir()) {
        found.extend(entries.flatten().map(|e| e.path().display().to_string()));
    }
    let state = OciOptions::default().state_root.join(owner);
    for runtime in ["runc", "runsc"] {
        if let Ok(entries) = std::fs::read_dir(state.join(runtime)) {
            found.extend(entries.flatten().map(|e| e.path().display().to_string()));
        }
    }
    if let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") {
        for hierarchy in hierarchies.flatten() {
            let dir = hierarchy.path().join("progscore").join(owner);
            // The owner's own cgroup lives as long as the client; what must
            // not outlive a call is an invocation's cgroup below it.
            if let Ok(entries) = std::fs::read_dir(&dir) {
                found.extend(
                    entries
                        .flatten()
                        .filter(|e| e.path().is_dir())
                        .map(|e| e.path().display().to_string()),
                );
            }
        }
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    found.extend(
        mounts
            .lines()
            .filter(|line| line.contains(owner))
            .map(str::to_string),
    );
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_runs_under_runc_and_runsc_with_its_provenance() {
    let client = client();
    for (profile, runtime) in [("python-oci", "runc"), ("python-oci-gvisor", "runsc")] {
        let run = client
            .execute(
                b"import os, sys\nprint(int(sys.argv[1]) ** 2, os.getuid(), os.environ['HOME'], os.environ['HOSTNAME'])\n",
                profile,
                &[Invocation::with_args(["3"])],
            )
            .await
            .unwrap_or_else(|e| panic!("{profile}: {e}"));
        let event = &run.events[0];
        assert_eq!(
            event.outcome,
            Outcome::Exited { exit_code: 0 },
            "{profile}: {run:?}"
        );
        // As under Docker: nobody, its home from the image, the hostname.
        assert_eq!(stdout(&run), "9 65534 /nonexistent sandbox\n");
        let provenance = event.provenance.as_ref().expect("provenance");
        assert_eq!(provenance.backend, "oci");
        assert_eq!(provenance.runtime, runtime);
        assert!(
            provenance.engine.starts_with(runtime),
            "{}",
            provenance.engine
        );
        assert!(
            provenance
                .image_id
                .as_deref()
                .is_some_and(|id| id.starts_with("sha256:"))
        );
        let usage = event
            .usage
            .as_ref()
            .unwrap_or_else(|| panic!("{profile}: not measured: {run:?}"));
        assert!(
            usage.peak_memory_bytes.is_some_and(|peak| peak > 0),
            "{usage:?}"
        );
        assert!(usage.cpu_ms.is_some(), "{usage:?}");
    }
    assert_eq!(leftovers(&client), Vec::<String>::new());
    // The client's own cgroup and state folders go with it.
    let owner = client.owner().to_string();
    drop(client);
    let hierarchies: Vec<_> = std::fs::read_dir("/sys/fs/cgroup")
        .unwrap()
        .flatten()
        .map(|h| h.path().join("progscore").join(&owner))
        .filter(|dir| dir.exists())
        .collect();
    assert_eq!(hierarchies, Vec::<std::path::PathBuf>::new());
    assert!(!OciOptions::default().state_root.join(&owner).exists());
}

/// Dropping a call at any point of its life (before the container starts,
/// while it starts, while the program runs) removes everything it made
/// before the drop returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_leaves_no_container_cgroup_mount_bundle_or_workspace() {
    let client = client();
    let program = b"import time\nprint('started', flush=True)\ntime.sleep(30)\n";
    let invocations = [Invocation::default(), Invocation::default()];
    for profile in ["python-oci", "python-oci-gvisor"] {
        for delay_ms in [0, 1, 5, 15, 40, 80, 150, 300, 700] {
            let call = client.execute(program, profile, &invocations);
            let ended = tokio::time::timeout(Duration::from_millis(delay_ms), call).await;
            assert!(
                ended.is_err(),
                "{profile}: the call ended within {delay_ms} ms"
            );
            assert_eq!(
                leftovers(&client),
                Vec::<String>::new(),
                "{profile}: cancelled after {delay_ms} ms"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seccomp_refuses_reaching_into_other_processes_and_ordinary_programs_work() {
    let client = client();
    // ptrace and process_vm_readv: allowed by Docker's default profile on
    // recent kernels, refused by this backend's.
    let refused = run(
        &client,
        "python-oci",
        r#"import subprocess
for name, call in [('ptrace', 'syscall(101, 0, 0, 0, 0)'), ('process_vm_readv', 'syscall(310, 1, 0, 0, 0, 0, 0)'), ('io_uring_setup', 'syscall(425, 1, 0)')]:
    done = subprocess.run(['perl', '-e', '$r = ' + call + '; print(($r == -1) ? "refused " . ($!+0) : "allowed")'], capture_output=True, text=True)
    print(name, done.stdout)
"#,
    )
    .await;
    assert_eq!(
        refused.events[0].outcome,
        Outcome::Exited { exit_code: 0 },
        "{refused:?}"
    );
    let text = stdout(&refused);
    assert_eq!(text.matches("refused 1").count(), 3, "{text}");

    // Threads, subprocesses, a server and a client on the loopback.
    let ordinary = run(
        &client,
        "python-oci",
        r#"import socket, subprocess, threading
server = socket.socket()
server.bind(('127.0.0.1', 0))
server.listen(1)
def answer():
    connection, _ = server.accept()
    connection.sendall(connection.recv(16).upper())
    connection.close()
thread = threading.Thread(target=answer)
thread.start()
client = socket.create_connection(server.getsockname())
client.sendall(b'ping')
print(client.recv(16).decode())
thread.join()
print(subprocess.run(['echo', 'child'], capture_output=True, text=True).stdout.strip())
"#,
    )
    .await;
    assert_eq!(
        ordinary.events[0].outcome,
        Outcome::Exited { exit_code: 0 },
        "{ordinary:?}"
    );
    assert_eq!(stdout(&ordinary), "PING\nchild\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_come_before_anything_runs() {
    let mut missing = spec("python-oci");
    missing.runtime = Some("no-such-runtime".into());
    let missing = RuntimeProfile::from_spec("missing", &missing, Path::new(".")).unwrap();
    let volume_image = fixture_reference("progscore-fixture-volume");
    let mut volume = spec("python-oci");
    volume.image = Some(volume_image.clone());
    let volume = RuntimeProfile::from_spec("volume", &volume, Path::new(".")).unwrap();
    let client = OciClient::new(vec![missing, volume], OciOptions::default()).unwrap();

    let err = client
        .execute(b"print(1)\n", "missing", &[Invocation::default()])
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::RuntimeMissing { .. }), "{err}");
    assert!(err.to_string().contains("no-such-runtime"), "{err}");

    let err = client.preflight("volume").await.unwrap_err();
    assert!(matches!(err, SandboxError::ArtifactRefused { .. }), "{err}");
    assert!(err.to_string().contains("/data"), "{err}");

    let err = client
        .execute(b"print(1)\n", "nope", &[Invocation::default()])
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::UnknownProfile { .. }), "{err}");
    assert_eq!(leftovers(&client), Vec::<String>::new());
}

/// A cached image whose files changed on disk is never run: the next client
/// rebuilds it from its verified blobs before anything runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_cached_image_is_rebuilt_not_run() {
    let cache = tempfile::tempdir().unwrap();
    let options = OciOptions {
        image_cache: cache.path().to_path_buf(),
        ..OciOptions::default()
    };
    let program = "import os\nprint(open('/usr/lib/python3.11/os.py').read().count('TAMPERED'))\n";
    let first = OciClient::new(profiles(), options.clone()).unwrap();
    assert_eq!(stdout(&run(&first, "python-oci", program).await), "0\n");
    drop(first);

    let os_py: Vec<PathBuf> = glob_rootfs(cache.path(), "usr/lib/python3.11/os.py");
    assert_eq!(os_py.len(), 1, "{os_py:?}");
    let mut text = std::fs::read_to_string(&os_py[0]).unwrap();
    text.push_str("\n# TAMPERED\n");
    std::fs::write(&os_py[0], text).unwrap();

    let second = OciClient::new(profiles(), options).unwrap();
    let run = run(&second, "python-oci", program).await;
    assert_eq!(stdout(&run), "0\n", "the tampered file ran: {run:?}");
}

/// Files at `relative` inside every cached rootfs under `cache` (every
/// generation of every image).
fn glob_rootfs(cache: &Path, relative: &str) -> Vec<PathBuf> {
    std::fs::read_dir(cache.join("trees"))
        .unwrap()
        .flatten()
        .flat_map(|image| std::fs::read_dir(image.path()).unwrap().flatten())
        .map(|generation| generation.path().join("rootfs").join(relative))
        .filter(|path| path.is_file())
        .collect()
}

/// The environment variable naming the cache the helper below prepares.
const HELPER_CACHE: &str = "PROGSCORE_TEST_OCI_HELPER_CACHE";

/// Not a test of its own: the second process of the test below, started
/// with the cache named in its environment. It prepares `python-oci` there
/// (as a second `progscore` would before its first run) and exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by a_tree_judged_damaged_elsewhere_stays_under_a_running_program"]
async fn helper_prepare_the_python_image() {
    let Some(cache) = std::env::var_os(HELPER_CACHE) else {
        return;
    };
    let options = OciOptions {
        image_cache: cache.into(),
        ..OciOptions::default()
    };
    let client = OciClient::new(profiles(), options).unwrap();
    client.preflight("python-oci").await.expect("preflight");
}

/// The pid of `owner`'s program once it handles SIGUSR1 (found by its
/// cgroup, as the host sees it).
async fn program_waiting_for_sigusr1(owner: &str) -> libc::pid_t {
    let wanted = format!("/progscore/{owner}/");
    loop {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse().ok()) else {
                continue;
            };
            let in_cgroup = std::fs::read_to_string(entry.path().join("cgroup"))
                .is_ok_and(|cgroup| cgroup.contains(&wanted));
            let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
            let handles_usr1 = status
                .lines()
                .find_map(|l| l.strip_prefix("SigCgt:"))
                .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
                .is_some_and(|mask| mask & (1 << (libc::SIGUSR1 - 1)) != 0);
            if in_cgroup && handles_usr1 && status.contains("python3") {
                return pid;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Two processes share the cache. While a program of the first runs on the
/// image's tree, the second finds that tree damaged (a file appeared in it,
/// as a runtime creating a mount point would make) and rebuilds it. The
/// running program, which then loads modules and starts python again from
/// the tree, is unaffected: a tree in use is never deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_judged_damaged_elsewhere_stays_under_a_running_program() {
    let cache = tempfile::tempdir().unwrap();
    let options = OciOptions {
        image_cache: cache.path().to_path_buf(),
        ..OciOptions::default()
    };
    // The program waits for the second process's whole rebuild.
    let mut waiting = spec("python-oci");
    waiting.limits.timeout = "300s".into();
    let waiting = RuntimeProfile::from_spec("python-oci", &waiting, Path::new(".")).unwrap();
    let client = OciClient::new(vec![waiting], options.clone()).unwrap();
    let program = "import signal\nsignal.signal(signal.SIGUSR1, lambda *a: None)\nsignal.pause()\nimport csv, subprocess, textwrap\nchild = subprocess.run(['python3', '-c', 'import email.mime.text; print(6 * 7)'], capture_output=True, text=True)\nprint(child.stdout.strip(), csv.QUOTE_ALL, textwrap.dedent('  x'))\n";
    let invocations = [Invocation::default()];
    let mut running = client.execute(program.as_bytes(), "python-oci", &invocations);
    // The run goes on in the client's own tasks whether or not this
    // future is polled; it is awaited at the end.
    let pid = tokio::select! {
        pid = program_waiting_for_sigusr1(client.owner()) => pid,
        run = &mut running => panic!("the program ended before it waited: {run:?}"),
    };
    let trees = glob_rootfs(cache.path(), "etc/passwd");
    assert_eq!(trees.len(), 1, "{trees:?}");
    let rootfs = trees[0].parent().unwrap().parent().unwrap();
    std::fs::write(rootfs.join("stray"), b"").unwrap();
    let helper = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "helper_prepare_the_python_image", "--ignored"])
        .env(HELPER_CACHE, cache.path())
        .output()
        .await
        .unwrap();
    assert!(
        helper.status.success(),
        "the second process failed: {}",
        String::from_utf8_lossy(&helper.stdout)
    );
    // SAFETY: kill has no memory-safety preconditions.
    let sent = unsafe { libc::kill(pid, libc::SIGUSR1) };
    assert_eq!(sent, 0, "{}", std::io::Error::last_os_error());
    let run = running.await;
    let run = run.expect("run");
    assert_eq!(
        run.events[0].outcome,
        Outcome::Exited { exit_code: 0 },
        "{run:?}"
    );
    assert_eq!(stdout(&run), "42 1 x\n", "{run:?}");

    // The rebuilt tree is current; the damaged one goes once its user is gone.
    assert_eq!(glob_rootfs(cache.path(), "stray").len(), 1);
    drop(client);
    let next = OciClient::new(profiles(), options).unwrap();
    next.preflight("python-oci").await.expect("preflight");
    assert_eq!(glob_rootfs(cache.path(), "etc/passwd").len(), 1);
    assert_eq!(glob_rootfs(cache.path(), "stray"), Vec::<PathBuf>::new());
}

/// Runs under runc and runsc leave the shared tree as it was built: every
/// mount point the bundle needs exists in it beforehand, even for an image
/// without `/tmp` (so the runtime never creates one there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_leave_the_shared_tree_unchanged() {
    let cache = tempfile::tempdir().unwrap();
    let options = OciOptions {
        image_cache: cache.path().to_path_buf(),
        ..OciOptions::default()
    };
    let image = image_without_tmp();
    let profiles: Vec<RuntimeProfile> = ["python-oci", "python-oci-gvisor"]
        .into_iter()
        .map(|name| {
            let mut spec = spec(name);
            spec.image = Some(image.clone());
            RuntimeProfile::from_spec(name, &spec, Path::new(".")).expect("profile")
        })
        .collect();
    let client = OciClient::new(profiles, options).unwrap();
    for profile in ["python-oci", "python-oci-gvisor"] {
        let run = run(
            &client,
            profile,
            "import os\nprint(os.getcwd(), os.path.isdir('/tmp'))\n",
        )
        .await;
        assert_eq!(stdout(&run), "/tmp True\n", "{profile}: {run:?}");
    }
    let cached = client.cached_images().await;
    assert_eq!(cached.len(), 1, "{cached:?}");
    assert!(
        cached[0].is_intact(),
        "a run changed the shared tree: {:?}",
        cached[0].problems
    );
}

/// The project's python image with `/tmp` removed, pushed to the local
/// registry; its digest reference.
fn image_without_tmp() -> String {
    let base = spec("python-oci").image.expect("python-oci has an image");
    let tag = "127.0.0.1:5000/progscore-test-oci-no-tmp:latest";
    let mut build = std::process::Command::new("docker")
        .args(["build", "--network", "none", "--quiet", "--tag", tag, "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("docker build");
    use std::io::Write;
    write!(
        build.stdin.take().unwrap(),
        "FROM {base}\nRUN rm -rf /tmp\n"
    )
    .unwrap();
    assert!(build.wait().unwrap().success(), "docker build failed");
    let push = std::process::Command::new("docker")
        .args(["push", "--quiet", tag])
        .output()
        .expect("docker push");
    assert!(
        push.status.success(),
        "{}",
        String::from_utf8_lossy(&push.stderr)
    );
    fixture_reference("progscore-test-oci-no-tmp")
}

/// A fixture image's digest reference, as scripts/setup.sh pushed it.
fn fixture_reference(name: &str) -> String {
    let output = std::process::Command::new("docker")
        .args([
            "image",
            "inspect",
            &format!("127.0.0.1:5000/{name}:latest"),
            "--format",
            "{{range .RepoDigests}}{{println .}}{{end}}",
        ])
        .output()
        .expect("docker");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find(|line| line.starts_with("127.0.0.1:5000/"))
        .unwrap_or_else(|| panic!("{name} is not pushed: run scripts/setup.sh"))
        .to_string()
}
