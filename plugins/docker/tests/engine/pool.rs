//! A pool of two real engines: the one scripts/setup.sh starts and the
//! second one scripts/second-engine.sh starts beside it (its own socket,
//! data root and containerd namespace). An outage of one engine is made by
//! a proxy in front of the second engine, which can vanish and come back
//! while the engine itself runs on.

use super::*;
use progscore_docker::{Capacity, Endpoint, EngineOptions};
use progscore_sandbox::SandboxClientExt as _;

fn second_socket() -> PathBuf {
    let url = std::env::var("PROGSCORE_SECOND_ENGINE")
        .unwrap_or_else(|_| "unix:///run/docker-second.sock".into());
    let path = PathBuf::from(url.trim_start_matches("unix://"));
    assert!(
        path.exists(),
        "no second engine at {}: start it with `bash scripts/second-engine.sh start`",
        path.display()
    );
    path
}

fn second_docker() -> Docker {
    Docker::connect_with_unix(
        &second_socket().display().to_string(),
        120,
        bollard::API_DEFAULT_VERSION,
    )
    .expect("second engine socket")
}

fn engine(name: &str, socket: &Path, capacity: usize) -> EngineOptions {
    EngineOptions {
        name: name.into(),
        endpoint: Endpoint::Unix(socket.to_path_buf()),
        capacity: Capacity::Fixed(capacity),
    }
}

fn pool_harness(profiles: Vec<RuntimeProfile>, engines: Vec<EngineOptions>) -> Harness {
    let root = private_tempdir();
    let options = DockerOptions {
        owner_root: root.path().to_path_buf(),
        engines,
        ..DockerOptions::default()
    };
    Harness {
        client: DockerClient::new(profiles, options).expect("client"),
        _root: root,
    }
}

/// Containers labelled with `owner` on the engine `docker`.
pub(crate) async fn owned_on(docker: &Docker, owner: &str) -> Vec<String> {
    let filters = std::collections::HashMap::from([(
        "label".to_string(),
        vec![format!("progscore.owner={owner}")],
    )]);
    let options = bollard::query_parameters::ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    docker
        .list_containers(Some(options))
        .await
        .expect("list containers")
        .into_iter()
        .flat_map(|c| c.names.unwrap_or_default())
        .map(|name| name.trim_start_matches('/').to_string())
        .collect()
}

fn engine_of(run: &ProgramRun) -> String {
    let names: std::collections::BTreeSet<String> = run
        .events
        .iter()
        .map(|e| {
            e.provenance
                .as_ref()
                .and_then(|p| p.engine_name.clone())
                .expect("a pooled run names its engine")
        })
        .collect();
    assert_eq!(names.len(), 1, "one program, one engine: {names:?}");
    names.into_iter().next().unwrap()
}

/// Programs spread over both engines by their free places; each program
/// (its cases) runs on one engine, which its provenance names, and gives
/// the same results on either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_runs_programs_on_both_engines_with_the_same_results() {
    let h = pool_harness(
        vec![profile(RUNC)],
        vec![
            engine("first", Path::new("/var/run/docker.sock"), 2),
            engine("second", &second_socket(), 2),
        ],
    );
    let found = h.client.preflight(RUNC).await.expect("preflight");
    assert!(
        found
            .detail
            .contains("engines first (2 at once), second (2 at once)"),
        "{}",
        found.detail
    );
    let invocations: Vec<Invocation> = ["2", "3"]
        .iter()
        .map(|n| Invocation {
            args: vec![n.to_string()],
            stdin: None,
        })
        .collect();
    let runs = futures_util::future::join_all(
        (0..8).map(|_| h.client.execute(SQUARE.as_bytes(), RUNC, &invocations)),
    )
    .await;
    let mut per_engine = BTreeMap::new();
    for run in runs {
        let run = run.expect("run");
        assert_eq!(stdout(&run, 0), "4\n");
        assert_eq!(stdout(&run, 1), "9\n");
        *per_engine.entry(engine_of(&run)).or_insert(0) += 1;
    }
    assert_eq!(
        per_engine.len(),
        2,
        "both engines ran programs: {per_engine:?}"
    );
    assert!(
        owned_on(&second_docker(), h.client.owner())
            .await
            .is_empty()
    );
    h.assert_clean().await;
}

/// A profile that names its engines runs on those only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_runs_only_on_the_engines_it_names() {
    let only_second = profile_with(RUNC, |spec| spec.engines = Some(vec!["second".into()]));
    let h = pool_harness(
        vec![only_second],
        vec![
            engine("first", Path::new("/var/run/docker.sock"), 4),
            engine("second", &second_socket(), 4),
        ],
    );
    let five = [Invocation {
        args: vec!["5".into()],
        stdin: None,
    }];
    let runs = futures_util::future::join_all(
        (0..4).map(|_| h.client.execute(SQUARE.as_bytes(), RUNC, &five)),
    )
    .await;
    for run in runs {
        let run = run.expect("run");
        assert_eq!(stdout(&run, 0), "25\n");
        assert_eq!(engine_of(&run), "second");
    }
    let report = h.client.diagnose().await;
    let first = report.iter().find(|r| r.name == "first").unwrap();
    assert!(first.profiles.is_empty(), "{first:?}");
    let second = report.iter().find(|r| r.name == "second").unwrap();
    assert!(second.profiles.iter().all(|p| p.ok), "{second:?}");
    assert_eq!(second.capacity, Some(4));
    h.assert_clean().await;
}

/// An engine that is gone when the client starts does not stop the pool:
/// the preflight passes on the other, says which is down, and programs run
/// there; doctor reports the gone engine as unreachable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_down_at_the_start_leaves_the_others_working() {
    let dir = private_tempdir();
    let h = pool_harness(
        vec![profile(RUNC)],
        vec![
            engine("gone", &dir.path().join("no-engine.sock"), 2),
            engine("first", Path::new("/var/run/docker.sock"), 2),
        ],
    );
    let found = h.client.preflight(RUNC).await.expect("preflight");
    assert!(found.detail.contains("down now: gone"), "{}", found.detail);
    let run = h
        .client
        .execute(
            SQUARE.as_bytes(),
            RUNC,
            &[Invocation {
                args: vec!["3".into()],
                stdin: None,
            }],
        )
        .await
        .expect("run");
    assert_eq!(stdout(&run, 0), "9\n");
    assert_eq!(engine_of(&run), "first");
    let report = h.client.diagnose().await;
    let gone = report.iter().find(|r| r.name == "gone").unwrap();
    assert!(!gone.engine_ok);
    assert!(
        gone.problems.iter().any(|p| p.contains("no such socket")),
        "{gone:?}"
    );
    h.assert_clean().await;
}

/// The engine running a program stops answering (its proxy vanishes; the
/// engine behind it runs on, as a partitioned host would): the program runs
/// again from the start on the other engine, its results are whole and
/// from that engine only, and once the first answers again what this
/// client left on it is removed before it takes programs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_moves_when_its_engine_stops_answering_and_the_engine_is_swept_on_return() {
    let mut proxy = proxy::EngineProxy::start_for(&second_socket());
    let h = pool_harness(
        vec![profile(RUNC)],
        vec![
            // Preferred while both are free: the program starts there.
            engine("flaky", proxy.socket(), 4),
            engine("steady", Path::new("/var/run/docker.sock"), 4),
        ],
    );
    let program = "import time, sys\nprint('started', flush=True)\ntime.sleep(1)\nprint(int(sys.argv[1]) ** 2)\n";
    let invocations = [
        Invocation {
            args: vec!["2".into()],
            stdin: None,
        },
        Invocation {
            args: vec!["7".into()],
            stdin: None,
        },
    ];
    let second = second_docker();
    let run = h.client.execute(program.as_bytes(), RUNC, &invocations);
    let outage = async {
        for _ in 0..400 {
            if !owned_on(&second, h.client.owner()).await.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(
            !owned_on(&second, h.client.owner()).await.is_empty(),
            "the program never started on the flaky engine"
        );
        proxy.stop();
    };
    let (run, ()) = tokio::join!(run, outage);
    let run = run.expect("the program moved to the steady engine");
    assert_eq!(stdout(&run, 0), "started\n4\n", "{run:#?}");
    assert_eq!(stdout(&run, 1), "started\n49\n", "{run:#?}");
    assert_eq!(engine_of(&run), "steady");
    assert!(
        run.sandbox_warnings.iter().any(|w| w.contains("`flaky`")
            && w.contains("stopped answering")
            && w.contains("ran again from the start on another engine")),
        "{:?}",
        run.sandbox_warnings
    );
    // What the lost run left on the second engine is still there while it
    // cannot be reached...
    assert!(!owned_on(&second, h.client.owner()).await.is_empty());
    proxy.restart();
    // ...and goes once it answers again, before it runs anything.
    let mut swept = false;
    for _ in 0..200 {
        if owned_on(&second, h.client.owner()).await.is_empty() {
            swept = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(swept, "the returning engine was not swept");
    // It takes programs again: with the steady engine full, the next
    // programs go to it.
    let mut engines = std::collections::BTreeSet::new();
    for _ in 0..40 {
        let runs = futures_util::future::join_all(
            (0..8).map(|_| h.client.execute(SQUARE.as_bytes(), RUNC, &invocations)),
        )
        .await;
        for run in runs {
            let run = run.expect("run");
            assert_eq!(stdout(&run, 1), "49\n");
            engines.insert(engine_of(&run));
        }
        if engines.contains("flaky") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        engines.contains("flaky"),
        "the engine never came back into use: {engines:?}"
    );
    h.assert_clean().await;
}

/// A call waiting out its engine's outage gives up its place in the
/// client's schedule: a timeout on another engine that must be confirmed
/// alone (it takes the schedule whole) runs meanwhile, instead of waiting as
/// long as the outage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_for_its_engine_does_not_hold_up_a_confirmation_on_another() {
    let mut proxy = proxy::EngineProxy::start_for(&second_socket());
    let mut on_flaky = profile_with(RUNC, |spec| spec.engines = Some(vec!["flaky".into()]));
    on_flaky.name = "on-flaky".into();
    let mut on_steady = profile_with(RUNC, |spec| {
        spec.engines = Some(vec!["steady".into()]);
        spec.limits.timeout = "1s".into();
    });
    on_steady.name = "on-steady".into();
    let root = private_tempdir();
    let client = DockerClient::new(
        vec![on_flaky, on_steady],
        DockerOptions {
            owner_root: root.path().to_path_buf(),
            engines: vec![
                engine("flaky", proxy.socket(), 4),
                engine("steady", Path::new("/var/run/docker.sock"), 4),
            ],
            // Far longer than the test may take: before the fix, the
            // confirmation waited for all of it.
            outage_wait: Duration::from_secs(600),
            ..DockerOptions::default()
        },
    )
    .expect("client");
    let one = [Invocation::default()];
    let waiting = client.execute(
        b"import time\nprint('started', flush=True)\ntime.sleep(2)\nprint('done')\n",
        "on-flaky",
        &one,
    );
    // Writes all the time and uses little CPU: its timeout is not proven
    // unless it runs alone.
    let chatty = "import time\nwhile True:\n    print('tick', flush=True)\n    time.sleep(0.005)\n";
    let second = second_docker();
    let confirmation = async {
        for _ in 0..400 {
            if !owned_on(&second, client.owner()).await.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(
            !owned_on(&second, client.owner()).await.is_empty(),
            "the program never started on the flaky engine"
        );
        proxy.stop();
        let run = tokio::time::timeout(
            Duration::from_secs(120),
            client.execute(chatty.as_bytes(), "on-steady", &one),
        )
        .await
        .expect("the confirmation waited for the other engine's outage")
        .expect("run");
        proxy.restart();
        run
    };
    let (waited, confirmed) = tokio::join!(waiting, confirmation);
    assert!(
        confirmed
            .sandbox_warnings
            .iter()
            .any(|w| w.contains("ran again with no other program beside it")),
        "{confirmed:#?}"
    );
    assert_eq!(
        confirmed.events[0].outcome.kind(),
        "timed_out",
        "{confirmed:#?}"
    );
    let waited = waited.expect("the flaky engine came back within the outage wait");
    assert_eq!(stdout(&waited, 0), "started\ndone\n", "{waited:#?}");
    drop(client);
}

/// With every engine of the pool gone past the outage wait, a call is
/// refused, naming each engine and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_with_every_engine_gone_refuses_the_call_naming_each() {
    let dir = private_tempdir();
    let root = private_tempdir();
    let options = DockerOptions {
        owner_root: root.path().to_path_buf(),
        engines: vec![
            engine("a", &dir.path().join("a.sock"), 2),
            engine("b", &dir.path().join("b.sock"), 2),
        ],
        outage_wait: Duration::from_secs(1),
        ..DockerOptions::default()
    };
    let client = DockerClient::new(vec![profile(RUNC)], options).expect("client");
    let err = client
        .execute(SQUARE.as_bytes(), RUNC, &[Invocation::default()])
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, SandboxError::EngineUnavailable { .. }),
        "{message}"
    );
    assert!(
        message.contains("`a` at unix://") && message.contains("`b` at unix://"),
        "{message}"
    );
}

/// The second engine over TCP with mutual TLS (scripts/second-engine.sh
/// listens on 127.0.0.1:2376 with its own CA), as a remote engine is reached.
fn remote_engine(name: &str, capacity: usize) -> EngineOptions {
    let tls = Path::new("/var/lib/docker-second/tls");
    EngineOptions {
        name: name.into(),
        endpoint: Endpoint::Tcp {
            address: "127.0.0.1:2376".into(),
            tls: Some(progscore_docker::TlsFiles {
                ca: tls.join("ca.pem"),
                cert: tls.join("cert.pem"),
                key: tls.join("key.pem"),
            }),
        },
        capacity: Capacity::Fixed(capacity),
    }
}

/// Volumes labelled with `owner` on the engine `docker`.
async fn owned_volumes_on(docker: &Docker, owner: &str) -> Vec<String> {
    let filters = std::collections::HashMap::from([(
        "label".to_string(),
        vec![format!("progscore.owner={owner}")],
    )]);
    let options = bollard::query_parameters::ListVolumesOptionsBuilder::new()
        .filters(&filters)
        .build();
    docker
        .list_volumes(Some(options))
        .await
        .expect("list volumes")
        .volumes
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.name)
        .collect()
}

/// An engine reached over TCP with TLS cannot see this host's files: the
/// program reaches it in a volume, read-only for the program as the bind
/// mount is, arguments and stdin arrive exactly, and nothing of the call
/// (containers, volumes) is left on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_over_tls_gets_the_program_in_a_read_only_volume() {
    let h = pool_harness(vec![profile(RUNC)], vec![remote_engine("remote", 2)]);
    let found = h.client.preflight(RUNC).await.expect("preflight over TLS");
    assert!(found.detail.contains("runtime runc"), "{}", found.detail);
    let program = "import sys, os\n\
        print(int(sys.argv[1]) ** 2, sys.stdin.read().strip())\n\
        for path in (__file__, '/sandbox/other'):\n\
        \x20   try:\n\
        \x20       open(path, 'a').write('x')\n\
        \x20       print('wrote', path)\n\
        \x20   except OSError as e:\n\
        \x20       print('refused', path, e.errno)\n";
    let run = h
        .client
        .execute(
            program.as_bytes(),
            RUNC,
            &[Invocation {
                args: vec!["12".into()],
                stdin: Some("from stdin".into()),
            }],
        )
        .await
        .expect("run");
    assert_eq!(
        stdout(&run, 0),
        "144 from stdin\nrefused /sandbox/program 13\nrefused /sandbox/other 30\n",
        "{run:#?}"
    );
    let second = second_docker();
    assert!(owned_on(&second, h.client.owner()).await.is_empty());
    assert!(owned_volumes_on(&second, h.client.owner()).await.is_empty());
    h.assert_clean().await;
}

/// A compiled language on an engine over TLS: the build lives in a volume
/// (writable for the compile, read-only for the cases) and comes back here
/// to be hashed; the hash is the same as a build on the local engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_on_an_engine_over_tls_hashes_as_a_local_build() {
    let c = profile("c");
    let program = "#include <stdio.h>\nint main(void){FILE*f=fopen(\"/build/x\",\"w\");printf(\"%s\\n\", f?\"wrote\":\"refused\");return 0;}\n";
    let remote = pool_harness(vec![c.clone()], vec![remote_engine("remote", 2)]);
    let local = harness(vec![c]);
    let case = [Invocation::default()];
    let on_remote = remote
        .client
        .execute(program.as_bytes(), "c", &case)
        .await
        .expect("run over TLS");
    let on_local = local
        .client
        .execute(program.as_bytes(), "c", &case)
        .await
        .expect("run here");
    assert_eq!(stdout(&on_remote, 0), "refused\n", "{on_remote:#?}");
    assert_eq!(stdout(&on_local, 0), "refused\n");
    let hash = |run: &ProgramRun| {
        run.compile
            .as_ref()
            .and_then(|c| c.artifact_sha256.clone())
            .expect("a build hash")
    };
    assert_eq!(hash(&on_remote), hash(&on_local));
    let second = second_docker();
    assert!(
        owned_volumes_on(&second, remote.client.owner())
            .await
            .is_empty()
    );
    remote.assert_clean().await;
    local.assert_clean().await;
}

/// The second engine over SSH (scripts/second-engine.sh runs an sshd on
/// 127.0.0.1:22 whose sessions reach it), through bollard's SSH transport:
/// the program is delivered in volumes as to any engine elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_over_ssh_runs_programs_as_the_local_one() {
    let engine = EngineOptions {
        name: "over-ssh".into(),
        endpoint: Endpoint::Ssh {
            address: "root@127.0.0.1".into(),
            key: Some("/var/lib/docker-second/ssh/id_ed25519".into()),
        },
        capacity: Capacity::Fixed(2),
    };
    let h = pool_harness(vec![profile(RUNC)], vec![engine]);
    let report = h.client.diagnose().await.remove(0);
    assert!(report.engine_ok, "{report:?}");
    assert_eq!(report.endpoint, "ssh://root@127.0.0.1");
    let invocations = [
        Invocation {
            args: vec!["6".into()],
            stdin: None,
        },
        Invocation {
            args: vec!["-4".into()],
            stdin: None,
        },
    ];
    let run = h
        .client
        .execute(SQUARE.as_bytes(), RUNC, &invocations)
        .await
        .expect("run over SSH");
    assert_eq!(stdout(&run, 0), "36\n", "{run:#?}");
    assert_eq!(stdout(&run, 1), "16\n");
    let second = second_docker();
    assert!(owned_on(&second, h.client.owner()).await.is_empty());
    assert!(owned_volumes_on(&second, h.client.owner()).await.is_empty());
    h.assert_clean().await;
}

/// A build over its bound (`compile_limits.build`) is the program's
/// `compile_error`, on this host's engine and on one elsewhere alike (whose
/// build is not copied back beyond the bound); a build within it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_over_its_bound_is_a_compile_error_here_and_elsewhere() {
    let c = profile_with("c", |spec| {
        if let Some(limits) = spec.compile_limits.as_mut() {
            limits.build = Some("64KiB".into());
        }
    });
    assert_eq!(
        c.limits_of(progscore_sandbox::Stage::Compile).build_bytes,
        Some(64 << 10)
    );
    // Initialised data goes into the executable: 1 MiB of it.
    let big = "#include <stdio.h>\nchar blob[1 << 20] = {1};\nint main(int argc, char **argv){(void)argv;printf(\"%d\\n\", blob[argc - 1]);return 0;}\n";
    let small = "#include <stdio.h>\nint main(void){printf(\"small\\n\");return 0;}\n";
    let remote = pool_harness(vec![c.clone()], vec![remote_engine("remote", 2)]);
    let local = harness(vec![c]);
    let case = [Invocation::default()];
    for (h, place) in [(&local, "here"), (&remote, "elsewhere")] {
        let run = h
            .client
            .execute(big.as_bytes(), "c", &case)
            .await
            .expect("run");
        let compile = run.compile.as_ref().expect("a compile");
        let Outcome::CompileError { reason } = &compile.event.outcome else {
            panic!("{place}: {run:#?}");
        };
        assert!(
            reason.contains("larger than its limit of 65536 bytes"),
            "{place}: {reason}"
        );
        assert!(compile.artifact_sha256.is_none(), "{place}");
        assert!(
            matches!(&run.events[0].outcome, Outcome::CompileError { .. }),
            "{place}: {run:#?}"
        );
        let run = h
            .client
            .execute(small.as_bytes(), "c", &case)
            .await
            .expect("run");
        assert_eq!(stdout(&run, 0), "small\n", "{place}: {run:#?}");
        h.assert_clean().await;
    }
    let second = second_docker();
    assert!(
        owned_volumes_on(&second, remote.client.owner())
            .await
            .is_empty()
    );
}
