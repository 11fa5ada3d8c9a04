//! Behaviour evidence end to end, through the binary: the red-team corpus
//! (`corpus.rs`: 50 programs with one side effect each, 50 benign, Python
//! and C) scored with behaviour conditions under gVisor through Docker and
//! through the daemonless OCI backend, and a sample under runc (which says
//! it does not trace), and the Python half under WASI (paths only). Every
//! side effect is recorded (its kind counted in
//! the result line, `attempts` true, `never` false, the event named in the
//! rationale); no benign program shows any event (`never` of every kind
//! true, proven by a complete trace).

mod corpus;
mod redteam;

use std::collections::BTreeMap;

use corpus::{BENIGN, Language, Program, SIDE_EFFECTS};
use progscore_e2e::{Dir, result_lines, stderr, verdict};

const KINDS: [&str; 10] = [
    "net.connect",
    "net.socket",
    "net.bind",
    "proc.exec",
    "proc.spawn",
    "proc.signal",
    "proc.ptrace",
    "fs.open",
    "fs.unlink",
    "fs.rename",
];

/// The sandboxes under test: (name, backend, runtime). gVisor traces
/// through Docker and OCI; runc is traced by the OCI backend's seccomp
/// listener (its events' arguments unverified), not through Docker.
const GVISOR: [(&str, &str, &str); 2] = [
    ("docker-runsc", "docker", "runsc"),
    ("oci-runsc", "oci", "runsc"),
];
const TRACED: [(&str, &str, &str); 3] = [
    ("docker-runsc", "docker", "runsc"),
    ("oci-runsc", "oci", "runsc"),
    ("oci-runc", "oci", "runc"),
];
const UNTRACED: [(&str, &str, &str); 1] = [("docker-runc", "docker", "runc")];

fn profile_name(language: Language, sandbox: &str) -> String {
    let language = match language {
        Language::Python => "py",
        Language::C => "c",
    };
    format!("traced-{language}-{sandbox}")
}

/// The generated `python` and `c` profiles as traced profiles under each
/// sandbox, as TOML to append to the config.
fn traced_profiles() -> String {
    let mut profiles = toml::Table::new();
    for (language, generated) in [(Language::Python, "python"), (Language::C, "c")] {
        for (sandbox, backend, runtime) in TRACED.iter().chain(UNTRACED.iter()) {
            let mut spec: toml::Table = progscore_test_kit::generated_profile(generated);
            spec.insert("backend".into(), (*backend).into());
            spec.insert("runtime".into(), (*runtime).into());
            spec.insert("trace".into(), true.into());
            // Both backends on one machine share its two CPUs: a quick
            // program's run stays well inside these.
            spec.remove("engines");
            profiles.insert(profile_name(language, sandbox), spec.into());
        }
    }
    let mut root = toml::Table::new();
    root.insert("profiles".into(), profiles.into());
    toml::to_string(&root).expect("profiles as TOML")
}

fn line(id: &str, program: &Program, profile: &str, behaviour: serde_json::Value) -> String {
    let stdin = (program.name.ends_with("stdin")).then_some("abc");
    serde_json::json!({
        "id": id,
        "program": program.source,
        "expectation": {"conditions": [{"program_behaves": {
            "profile": profile,
            "behaviour": behaviour,
            "cases": [{"invocation": {"args": [], "stdin": stdin}, "expected": {}}]
        }}]}
    })
    .to_string()
}

struct Scored {
    lines: BTreeMap<String, serde_json::Value>,
}

impl Scored {
    fn of(dir: &Dir, lines: &[String]) -> Scored {
        let batch = dir.write("batch.jsonl", lines.join("\n") + "\n");
        let output = dir.run(&["score", batch.to_str().unwrap(), "--jobs", "4"]);
        let lines = result_lines(&String::from_utf8_lossy(&output.stdout))
            .into_iter()
            .map(|line| (line["id"].as_str().expect("an id").to_string(), line))
            .collect::<BTreeMap<_, _>>();
        assert!(
            !lines.is_empty(),
            "no result lines; stderr: {}",
            stderr(&output)
        );
        Scored { lines }
    }

    fn get(&self, id: &str) -> &serde_json::Value {
        self.lines
            .get(id)
            .unwrap_or_else(|| panic!("no result line {id}"))
    }
}

fn behaviour_of(line: &serde_json::Value) -> &serde_json::Value {
    &line["cases"][0]["behaviour"]
}

#[test]
fn the_corpus_is_traced_under_gvisor_with_every_side_effect_and_no_benign_event() {
    let dir = Dir::new();
    dir.edit_config(|config| format!("{config}\n{}", traced_profiles()));
    let mut lines = Vec::new();
    for (sandbox, _, _) in TRACED {
        for program in SIDE_EFFECTS {
            let profile = profile_name(program.language, sandbox);
            let kind = program.kind.expect("a side effect");
            let id = format!("{sandbox}/{}", program.name);
            lines.push(line(
                &format!("{id}/attempts"),
                program,
                &profile,
                serde_json::json!({"attempts": [kind]}),
            ));
            lines.push(line(
                &format!("{id}/never"),
                program,
                &profile,
                serde_json::json!({"never": [kind]}),
            ));
        }
        for program in BENIGN {
            let profile = profile_name(program.language, sandbox);
            lines.push(line(
                &format!("{sandbox}/{}/never", program.name),
                program,
                &profile,
                serde_json::json!({"never": KINDS}),
            ));
        }
    }
    let scored = Scored::of(&dir, &lines);

    let mut missed = Vec::new();
    for (sandbox, _, _) in TRACED {
        for program in SIDE_EFFECTS {
            let kind = program.kind.expect("a side effect");
            let id = format!("{sandbox}/{}", program.name);
            let attempts = scored.get(&format!("{id}/attempts"));
            let never = scored.get(&format!("{id}/never"));
            let behaviour = behaviour_of(attempts);
            let counted = behaviour["counts"][kind].as_u64().unwrap_or(0);
            if verdict(attempts) != "true" || verdict(never) != "false" || counted == 0 {
                missed.push(format!(
                    "{id}: {kind} counted {counted}, attempts {} ({}), never {} ({}); behaviour {behaviour}",
                    verdict(attempts),
                    attempts["rationale"],
                    verdict(never),
                    never["rationale"],
                ));
                continue;
            }
            // The rationale names what was tried.
            let rationale = never["rationale"].as_str().unwrap_or_default();
            assert!(
                rationale.contains(kind) && rationale.contains("must never do"),
                "{id}: {rationale}"
            );
            assert_eq!(behaviour["status"], "traced", "{id}: {behaviour}");
        }
        for program in BENIGN {
            let id = format!("{sandbox}/{}/never", program.name);
            let line = scored.get(&id);
            let behaviour = behaviour_of(line);
            let quiet = behaviour["status"] == "traced"
                && behaviour["counts"]
                    .as_object()
                    .is_some_and(|c| c.is_empty())
                && behaviour.get("incomplete").is_none();
            if verdict(line) != "true" || !quiet {
                missed.push(format!(
                    "{id}: {} ({}); behaviour {behaviour}",
                    verdict(line),
                    line["rationale"]
                ));
            }
        }
    }
    assert!(
        missed.is_empty(),
        "{} of {} corpus lines wrong:\n{}",
        missed.len(),
        lines.len(),
        missed.join("\n")
    );
}

/// The kinds the WASI backend traces: the host's path imports. Sockets and
/// processes do not exist in WASI preview 1 (an attempt fails in the
/// guest's libc, unseen).
const WASI_KINDS: [&str; 3] = ["fs.open", "fs.unlink", "fs.rename"];

#[test]
fn the_python_corpus_under_wasi_records_every_path_it_tries_and_proves_no_other_kind() {
    let dir = Dir::new();
    dir.edit_config(|config| {
        let mut spec: toml::Table = progscore_test_kit::generated_profile("python-wasi");
        spec.insert("trace".into(), true.into());
        let mut profiles = toml::Table::new();
        profiles.insert("traced-py-wasi".into(), spec.into());
        let mut root = toml::Table::new();
        root.insert("profiles".into(), profiles.into());
        format!("{config}\n{}", toml::to_string(&root).expect("TOML"))
    });
    let python = |program: &&Program| program.language == Language::Python;
    // Much of the corpus cannot even start under WASI (no `socket`, no
    // `os.fork`): each program runs inside a `try`, so that its verdict is
    // its behaviour's alone, whatever it raised.
    let line = |id: &str, program: &Program, profile: &str, behaviour: serde_json::Value| {
        let source = serde_json::to_string(program.source).expect("a string literal");
        let wrapped = format!(
            "try:\n    exec(compile({source}, 'main.py', 'exec'), {{'__name__': '__main__'}})\n\
             except BaseException:\n    pass\n"
        );
        let wrapped = Program {
            source: Box::leak(wrapped.into_boxed_str()),
            ..*program
        };
        line(id, &wrapped, profile, behaviour)
    };
    let mut lines = Vec::new();
    for program in SIDE_EFFECTS.iter().filter(python) {
        let kind = program.kind.expect("a side effect");
        for (condition, behaviour) in [
            ("attempts", serde_json::json!({"attempts": [kind]})),
            ("never", serde_json::json!({"never": [kind]})),
        ] {
            let id = format!("{}/{condition}", program.name);
            lines.push(line(&id, program, "traced-py-wasi", behaviour));
        }
    }
    for program in BENIGN.iter().filter(python) {
        let id = format!("{}/never", program.name);
        lines.push(line(
            &id,
            program,
            "traced-py-wasi",
            serde_json::json!({"never": WASI_KINDS}),
        ));
        let id = format!("{}/never-any", program.name);
        lines.push(line(
            &id,
            program,
            "traced-py-wasi",
            serde_json::json!({"never": KINDS}),
        ));
    }
    let scored = Scored::of(&dir, &lines);

    let mut wrong = Vec::new();
    for program in SIDE_EFFECTS.iter().filter(python) {
        let kind = program.kind.expect("a side effect");
        let attempts = scored.get(&format!("{}/attempts", program.name));
        let never = scored.get(&format!("{}/never", program.name));
        let behaviour = behaviour_of(attempts);
        let expected = if WASI_KINDS.contains(&kind) {
            // Every path the program tries reaches the host, even one under
            // no folder the guest was given.
            ("true", "false")
        } else {
            // Not a kind the host can see: never proven either way.
            ("undetermined", "undetermined")
        };
        if (verdict(attempts).as_str(), verdict(never).as_str()) != expected
            || behaviour["status"] != "traced"
        {
            wrong.push(format!(
                "{}: {kind}: attempts {} ({}), never {} ({}); behaviour {behaviour}",
                program.name,
                verdict(attempts),
                attempts["rationale"],
                verdict(never),
                never["rationale"]
            ));
        }
    }
    for program in BENIGN.iter().filter(python) {
        let line = scored.get(&format!("{}/never", program.name));
        let behaviour = behaviour_of(line);
        let quiet = behaviour["counts"]
            .as_object()
            .is_some_and(|c| c.is_empty());
        let any = scored.get(&format!("{}/never-any", program.name));
        if verdict(line) != "true" || !quiet || verdict(any) != "undetermined" {
            wrong.push(format!(
                "{}: never {} ({}), never of any kind {} ({}); behaviour {behaviour}",
                program.name,
                verdict(line),
                line["rationale"],
                verdict(any),
                any["rationale"]
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} Python corpus programs wrong under WASI:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn dockers_runc_says_it_does_not_trace_and_behaviour_stays_undetermined() {
    let dir = Dir::new();
    dir.edit_config(|config| format!("{config}\n{}", traced_profiles()));
    let sample = [&SIDE_EFFECTS[0], &BENIGN[0], &SIDE_EFFECTS[34], &BENIGN[31]];
    let mut lines = Vec::new();
    for (sandbox, _, _) in UNTRACED {
        for program in sample {
            let profile = profile_name(program.language, sandbox);
            lines.push(line(
                &format!("{sandbox}/{}", program.name),
                program,
                &profile,
                serde_json::json!({"never": KINDS}),
            ));
        }
    }
    let scored = Scored::of(&dir, &lines);
    for (id, line) in &scored.lines {
        assert_eq!(verdict(line), "undetermined", "{id}: {line}");
        assert_eq!(line["reason_kind"], "behaviour_unknown", "{id}: {line}");
        let behaviour = behaviour_of(line);
        assert_eq!(behaviour["status"], "not_traced", "{id}: {behaviour}");
        assert!(
            behaviour["reason"]
                .as_str()
                .is_some_and(|r| r.contains("runtime `runc`")),
            "{id}: {behaviour}"
        );
    }
    assert_eq!(scored.lines.len(), lines.len());
}

#[test]
fn a_behaviour_condition_on_a_profile_that_does_not_trace_is_refused_naming_the_field() {
    let dir = Dir::new();
    let batch = dir.write(
        "batch.jsonl",
        line(
            "untraced",
            &BENIGN[0],
            "python",
            serde_json::json!({"never": ["net.connect"]}),
        ) + "\n",
    );
    let output = dir.run(&["score", batch.to_str().unwrap()]);
    let text = stderr(&output);
    assert!(
        text.contains("program_behaves.behaviour")
            && text.contains("does not trace behaviour")
            && text.contains("trace = true"),
        "{text}"
    );
    assert_ne!(output.status.code(), Some(0));
}

#[test]
fn a_flood_of_events_is_counted_whole_kept_bounded_and_undetermined_only_where_the_drop_could_hide_it()
 {
    let dir = Dir::new();
    dir.edit_config(|config| format!("{config}\n{}", traced_profiles()));
    let flood = Program {
        name: "py-open-flood",
        language: Language::Python,
        kind: Some("fs.open"),
        source: "for _ in range(20000):\n    open('/tmp/f', 'w').close()\n",
    };
    let mut lines = Vec::new();
    for (sandbox, _, _) in GVISOR {
        let profile = profile_name(Language::Python, sandbox);
        for (name, behaviour) in [
            ("kind", serde_json::json!({"never": ["fs.open"]})),
            (
                "path",
                serde_json::json!({"never": [{"fs.open": {"path": "/sandbox/**"}}]}),
            ),
            (
                "other-kind",
                serde_json::json!({"never": ["net.connect", "proc.exec"]}),
            ),
        ] {
            lines.push(line(
                &format!("{sandbox}/{name}"),
                &flood,
                &profile,
                behaviour,
            ));
        }
    }
    let scored = Scored::of(&dir, &lines);
    for (sandbox, _, _) in GVISOR {
        let kind = scored.get(&format!("{sandbox}/kind"));
        let behaviour = behaviour_of(kind);
        assert_eq!(
            behaviour["counts"]["fs.open"], 20000,
            "{sandbox}: {behaviour}"
        );
        assert_eq!(behaviour["dropped"], 20000 - 256, "{sandbox}: {behaviour}");
        assert!(
            behaviour.get("incomplete").is_none(),
            "{sandbox}: {behaviour}"
        );
        // The count proves the kind; a path the dropped events could hold
        // is undetermined; another kind's absence is still proven.
        assert_eq!(verdict(kind), "false", "{sandbox}: {kind}");
        let path = scored.get(&format!("{sandbox}/path"));
        assert_eq!(verdict(path), "undetermined", "{sandbox}: {path}");
        assert!(
            path["rationale"]
                .as_str()
                .is_some_and(|r| r.contains("were not kept")),
            "{sandbox}: {path}"
        );
        let other = scored.get(&format!("{sandbox}/other-kind"));
        assert_eq!(verdict(other), "true", "{sandbox}: {other}");
    }
}

#[test]
fn doctor_says_which_traced_profiles_are_traced_and_why_not() {
    let dir = Dir::new();
    dir.edit_config(|config| format!("{config}\n{}", traced_profiles()));
    let output = dir.run(&["doctor"]);
    let text = String::from_utf8_lossy(&output.stdout);
    let line = |profile: &str| {
        text.lines()
            .find(|line| line.contains(&format!("profile {profile}:")))
            .unwrap_or_else(|| panic!("no line for {profile} in:\n{text}"))
            .to_string()
    };
    assert!(
        line("traced-py-docker-runsc").ends_with("behaviour traced"),
        "{text}"
    );
    // In the words a run records: Docker's runc cannot be given a seccomp
    // listener, the OCI backend's can.
    assert!(
        line("traced-py-docker-runc")
            .contains("behaviour not traced: runtime `runc` is not traced here")
            && line("traced-py-docker-runc").contains("the OCI backend traces runc"),
        "{text}"
    );
    for sandbox in ["oci-runsc", "oci-runc"] {
        assert!(
            line(&format!("traced-py-{sandbox}")).ends_with("behaviour traced"),
            "{text}"
        );
    }
    // An untraced profile says nothing of behaviour.
    assert!(!line("python-gvisor").contains("behaviour"), "{text}");
}

#[test]
fn a_user_comparator_of_version_0_2_0_judges_the_traced_connections() {
    let component = progscore_comparator_host::test_guests::example("no-connections")
        .expect("the example comparator is built with the comparator host");
    let sha256 = progscore_sandbox::sha256_hex(&std::fs::read(component).expect("the component"));
    let dir = Dir::new();
    dir.edit_config(|config| {
        format!(
            "{config}\n{}\n[comparators.no-connections]\npath = \"{component}\"\nsha256 = \"{sha256}\"\n",
            traced_profiles()
        )
    });
    let item = |id: &str, program: &Program, sandbox: &str, allow: &[&str]| {
        serde_json::json!({
            "id": id,
            "program": program.source,
            "expectation": {"conditions": [{"program_behaves": {
                "profile": profile_name(program.language, sandbox),
                "cases": [{"invocation": {"args": []}, "expected": {
                    "stdout": {"comparator": "no-connections", "params": {"allow": allow}}
                }}]
            }}]}
        })
        .to_string()
    };
    let outside = &SIDE_EFFECTS[0];
    let loopback = &SIDE_EFFECTS[1];
    assert_eq!(outside.name, "py-connect-outside");
    assert_eq!(loopback.name, "py-connect-loopback");
    let benign = BENIGN
        .iter()
        .find(|p| p.language == Language::Python)
        .expect("a benign Python program");
    let lines = [
        item("outside", outside, "docker-runsc", &[]),
        item(
            "loopback-allowed",
            loopback,
            "docker-runsc",
            &["127.0.0.1:9"],
        ),
        item("benign", benign, "docker-runsc", &[]),
        item("outside-untraced", outside, "docker-runc", &[]),
    ];
    let scored = Scored::of(&dir, &lines);
    let outside = scored.get("outside");
    assert_eq!(verdict(outside), "false", "{outside}");
    assert!(
        outside.to_string().contains("1.1.1.1:443"),
        "the comparator names the connection: {outside}"
    );
    for id in ["loopback-allowed", "benign"] {
        assert_eq!(verdict(scored.get(id)), "true", "{id}: {}", scored.get(id));
    }
    // Docker's runc does not trace: the comparator cannot prove an absence.
    let untraced = scored.get("outside-untraced");
    assert_eq!(verdict(untraced), "undetermined", "{untraced}");
}

/// The red-team corpus (`redteam.rs`): each payload reaches the forbidden
/// thing by another road, its twin prints the same without it. Under every
/// traced sandbox a payload is `false` or undetermined, never `true`; a twin
/// is never `false` (and `true` where the sandbox can decide it: the counts
/// are printed, per sandbox). Under OCI runc, whose listener performs the
/// opens itself, every twin under an `fs.open` path filter is `true` but
/// those `redteam::RUNC_UNDECIDED_OPEN_TWINS` names.
#[test]
fn red_team_payloads_are_never_proven_innocent_and_their_twins_never_guilty() {
    for (name, _) in redteam::RUNC_UNDECIDED_OPEN_TWINS {
        assert!(
            redteam::PAIRS.iter().any(|pair| pair.name == *name),
            "no pair named {name}"
        );
    }
    let dir = Dir::new();
    dir.edit_config(|config| format!("{config}\n{}", traced_profiles()));
    // PROGSCORE_RED_TEAM_SANDBOXES (names, comma-separated) runs a few.
    let chosen = std::env::var("PROGSCORE_RED_TEAM_SANDBOXES").ok();
    let sandboxes: Vec<&str> = TRACED
        .iter()
        .map(|(sandbox, _, _)| *sandbox)
        .filter(|sandbox| {
            chosen
                .as_deref()
                .is_none_or(|chosen| chosen.split(',').any(|name| name == *sandbox))
        })
        .collect();
    let mut lines = Vec::new();
    for &sandbox in &sandboxes {
        for pair in redteam::PAIRS {
            let profile = profile_name(pair.language, sandbox);
            let never: serde_json::Value = serde_json::from_str(pair.never).expect("an action");
            let behaviour = serde_json::json!({"never": [never]});
            for (role, source) in [("payload", pair.payload), ("twin", pair.twin)] {
                let program = Program {
                    name: pair.name,
                    language: pair.language,
                    kind: None,
                    source,
                };
                let id = format!("{sandbox}/{}/{role}", pair.name);
                lines.push(line(&id, &program, &profile, behaviour.clone()));
            }
        }
    }
    let scored = Scored::of(&dir, &lines);

    // A path-filtered `fs.open` condition runc now decides (verified opens).
    let runc_decides = |pair: &redteam::Pair| {
        let never: serde_json::Value = serde_json::from_str(pair.never).expect("an action");
        never["fs.open"].get("path").is_some()
            && !redteam::RUNC_UNDECIDED_OPEN_TWINS
                .iter()
                .any(|(name, _)| *name == pair.name)
    };
    let mut wrong = Vec::new();
    let mut table = Vec::new();
    for &sandbox in &sandboxes {
        let mut counts: BTreeMap<(&str, String), usize> = BTreeMap::new();
        for pair in redteam::PAIRS {
            for role in ["payload", "twin"] {
                let id = format!("{sandbox}/{}/{role}", pair.name);
                let result = scored.get(&id);
                let value = verdict(result);
                *counts.entry((role, value.clone())).or_default() += 1;
                let (bad, wanted) = match role {
                    "payload" => (value == "true", "false or undetermined"),
                    _ if sandbox == "oci-runc" && runc_decides(pair) => {
                        (value != "true", "true (runc's listener performs the opens)")
                    }
                    _ => (value == "false", "true or undetermined"),
                };
                table.push(format!(
                    "{id}: {value} ({})",
                    result["rationale"]
                        .as_str()
                        .or(result["reason"].as_str())
                        .unwrap_or("")
                ));
                if bad {
                    wrong.push(format!(
                        "{id}: {value}, wanted {wanted}, under never {}: {}; behaviour {}",
                        pair.never,
                        result,
                        behaviour_of(result)
                    ));
                }
            }
        }
        let count =
            |role: &str, value: &str| counts.get(&(role, value.to_string())).copied().unwrap_or(0);
        eprintln!(
            "[red team] {sandbox}: payloads false {} / undetermined {} / true {}; \
             twins true {} / undetermined {} / false {}",
            count("payload", "false"),
            count("payload", "undetermined"),
            count("payload", "true"),
            count("twin", "true"),
            count("twin", "undetermined"),
            count("twin", "false"),
        );
    }
    if std::env::var_os("PROGSCORE_RED_TEAM_TABLE").is_some() {
        eprintln!("{}", table.join("\n"));
    }
    assert!(
        wrong.is_empty(),
        "{} red-team lines wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
