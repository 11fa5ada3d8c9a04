//! Behaviour tracing on against off, on the same small benign batch, on
//! every traced backend: runc through the OCI backend (the seccomp
//! listener), gVisor through OCI and through Docker (runsc's trace
//! stream), and WASI (its path imports). The batch is Python and C
//! programs doing typical work: a file written in /tmp and read back, a
//! file of the image read, some computation, and every fourth Python
//! program a subprocess. Rounds of one batch untraced then traced (paired,
//! so the machine's load is shared alike), the wall time of each and the
//! ratio per round; the median ratio per backend. Target: tracing adds at
//! most 15% wall time.
//!
//! The traced runs are also scored against `never` conditions the benign
//! batch keeps (kinds and path filters): each must come out decided
//! (true), not undetermined; the counts per condition and backend are
//! printed.
//!
//! `cargo bench -p progscore-runtime --bench trace` (after scripts/setup.sh).
//! PROGSCORE_BENCH_PROGRAMS sets the batch size (default 24, half Python,
//! half C; WASI runs the Python half), PROGSCORE_BENCH_ROUNDS the rounds
//! (default 3), PROGSCORE_BENCH_ONLY backends whose label starts with it
//! (`oci runc`, `oci gVisor`, `docker gVisor`, `wasi`).

use progscore_sandbox::SandboxClientExt as _;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use progscore_runtime::backends::Backends;
use progscore_runtime::config::Config;
use progscore_sandbox::{
    Backend, DEFAULT_SENSITIVE_PATHS, Invocation, Outcome, RuntimeProfile, TraceSettings,
};
use progscore_scoring::BehaviourCondition;
use progscore_scoring::behaviour::{BehaviourFinding, check};

/// Programs in flight at once: the CLI's policy on this machine's 2 CPUs.
const JOBS: usize = 6;

/// The `never` conditions every program of the batch keeps, one by one.
const NEVER: &[&str] = &[
    r#""net.connect""#,
    r#""proc.signal""#,
    r#""proc.ptrace""#,
    r#"{"fs.open": {"path": "/etc/shadow"}}"#,
    r#"{"fs.open": {"path": "/sandbox/**", "access": "write"}}"#,
    r#"{"proc.exec": {"path": "/bin/sh"}}"#,
];

/// A traced backend: its label, and its Python and C profiles (from the
/// generated config's, moved to its backend and runtime).
struct Traced {
    label: &'static str,
    python: &'static str,
    c: Option<&'static str>,
    /// The Python programs it runs.
    work: fn(usize) -> String,
}

const BACKENDS: &[Traced] = &[
    Traced {
        label: "oci runc",
        python: "python-oci",
        c: Some("c-oci"),
        work: python_program,
    },
    Traced {
        label: "oci gVisor (runsc)",
        python: "python-oci-gvisor",
        c: Some("c-oci-gvisor"),
        work: python_program,
    },
    Traced {
        label: "docker gVisor (runsc)",
        python: "python-gvisor",
        c: Some("c-gvisor"),
        work: python_program,
    },
    Traced {
        label: "wasi (wasmtime)",
        python: "python-wasi",
        c: None,
        work: wasi_program,
    },
];

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `base` moved to `backend` and `runtime` under `name`.
fn moved(
    base: &RuntimeProfile,
    name: &str,
    backend: Backend,
    runtime: Option<&str>,
) -> RuntimeProfile {
    let mut profile = base.clone();
    profile.name = name.into();
    profile.backend = backend;
    profile.runtime = runtime.map(String::from);
    profile
}

fn python_program(i: usize) -> String {
    let child = if i.is_multiple_of(4) {
        "subprocess.run(['/bin/echo', 'child'], capture_output=True, text=True).stdout.strip()"
    } else {
        "'-'"
    };
    format!(
        "import json, os, subprocess\n\
         n = {n}\n\
         path = '/tmp/work-{i}.json'\n\
         with open(path, 'w') as f:\n    json.dump({{'squares': [k * k for k in range(n)]}}, f)\n\
         with open(path) as f:\n    data = json.load(f)\n\
         with open('/etc/hostname') as f:\n    host = f.read()\n\
         names = sorted(os.listdir('/usr/lib'))[:3]\n\
         print(sum(data['squares']), len(names), {child}, {i})\n",
        n = 1000 + i
    )
}

/// WASI's: no /tmp and no processes; the program's own file is read.
fn wasi_program(i: usize) -> String {
    format!(
        "import json, os\n\
         n = {n}\n\
         with open(__file__) as f:\n    source = f.read()\n\
         names = sorted(os.listdir(os.path.dirname(__file__)))\n\
         data = json.loads(json.dumps({{'squares': [k * k for k in range(n)]}}))\n\
         print(sum(data['squares']), len(source) > 0, len(names), {i})\n",
        n = 1000 + i
    )
}

fn c_program(i: usize) -> String {
    format!(
        "#include <stdio.h>\n\
         int main(void) {{\n\
         \x20   FILE *f = fopen(\"/tmp/work.txt\", \"w\");\n\
         \x20   if (!f) return 1;\n\
         \x20   for (int k = 0; k < {n}; k++) fprintf(f, \"%d\\n\", k * k);\n\
         \x20   fclose(f);\n\
         \x20   f = fopen(\"/tmp/work.txt\", \"r\");\n\
         \x20   long sum = 0; int v;\n\
         \x20   while (fscanf(f, \"%d\", &v) == 1) sum += v;\n\
         \x20   fclose(f);\n\
         \x20   f = fopen(\"/etc/hostname\", \"r\");\n\
         \x20   if (f) fclose(f);\n\
         \x20   printf(\"%ld %d\\n\", sum, {i});\n\
         \x20   return 0;\n\
         }}\n",
        n = 1000 + i
    )
}

fn main() {
    let count = setting("PROGSCORE_BENCH_PROGRAMS", 24);
    let rounds = setting("PROGSCORE_BENCH_ROUNDS", 3);
    let only = std::env::var("PROGSCORE_BENCH_ONLY").unwrap_or_default();
    let backends: Vec<&Traced> = BACKENDS
        .iter()
        .filter(|traced| traced.label.starts_with(only.as_str()))
        .collect();
    let config = Config::load(&progscore_test_kit::generated_config_path())
        .expect("progscore.toml: run scripts/setup.sh");
    let c = config.profile("c").expect("profile c").clone();
    let mut plain: Vec<RuntimeProfile> = vec![
        moved(&c, "c-oci", Backend::Oci, None),
        moved(&c, "c-oci-gvisor", Backend::Oci, Some("runsc")),
        moved(&c, "c-gvisor", Backend::Docker, Some("runsc")),
    ];
    for name in [
        "python-oci",
        "python-oci-gvisor",
        "python-gvisor",
        "python-wasi",
    ] {
        plain.push(config.profile(name).expect("profile").clone());
    }
    let mut profiles = Vec::new();
    for profile in plain {
        let mut traced = profile.clone();
        traced.name = format!("{}-traced", profile.name);
        traced.trace = Some(TraceSettings {
            sensitive: DEFAULT_SENSITIVE_PATHS.map(String::from).to_vec(),
        });
        profiles.extend([profile, traced]);
    }
    let backends_client = Backends::new(profiles).expect("backends");
    let pythons = count.div_ceil(2);
    let c_programs: Vec<String> = (0..count / 2).map(c_program).collect();
    let conditions: Vec<BehaviourCondition> = NEVER
        .iter()
        .map(|never| {
            serde_json::from_str(&format!(r#"{{"never": [{never}]}}"#)).expect("condition")
        })
        .collect();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    // Warm-up, both sides of every backend: images fetched and unpacked,
    // each WASI profile's module loaded (else the first round's untraced
    // side pays it).
    for traced in &backends {
        for suffix in ["", "-traced"] {
            let batch = Batch::of(traced, suffix, 1, &c_programs[..1.min(c_programs.len())]);
            runtime.block_on(batch.run(&backends_client, &conditions));
        }
    }

    println!(
        "{} Python + {} C programs per batch (WASI: the Python ones), {JOBS} in flight, {rounds} paired rounds",
        pythons,
        c_programs.len()
    );
    println!(
        "  {:<24} {:>6} {:>12} {:>12} {:>8}",
        "backend", "round", "off (s)", "on (s)", "on/off"
    );
    let mut summary = Vec::new();
    for traced in &backends {
        let mut ratios = Vec::new();
        // Per condition: (true, false, undetermined) over the traced runs.
        let mut findings: BTreeMap<usize, [usize; 3]> = BTreeMap::new();
        for round in 0..rounds {
            let off = runtime.block_on(
                Batch::of(traced, "", pythons, &c_programs).run(&backends_client, &conditions),
            );
            let on = runtime.block_on(
                Batch::of(traced, "-traced", pythons, &c_programs)
                    .run(&backends_client, &conditions),
            );
            for (index, counts) in on.findings {
                let total = findings.entry(index).or_default();
                for k in 0..3 {
                    total[k] += counts[k];
                }
            }
            let ratio = on.took.as_secs_f64() / off.took.as_secs_f64();
            ratios.push(ratio);
            println!(
                "  {:<24} {:>6} {:>12.2} {:>12.2} {:>7.2}x",
                traced.label,
                round + 1,
                off.took.as_secs_f64(),
                on.took.as_secs_f64(),
                ratio
            );
        }
        ratios.sort_by(f64::total_cmp);
        let median = ratios[ratios.len() / 2];
        summary.push((traced.label, median, findings));
    }
    println!();
    for (label, median, findings) in &summary {
        println!("  {label}: median on/off {median:.2}x (target <= 1.15x)");
        for (index, [holds, violated, undecided]) in findings {
            println!(
                "    never {:<58} true {holds:>3}  false {violated:>3}  undetermined {undecided:>3}",
                NEVER[*index]
            );
        }
    }
}

/// Prints why a condition was not true, once per profile and reason.
fn say_once(profile: &str, why: &str) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let line = format!("  ({profile}: {why})");
    let mut said = SAID.lock().unwrap();
    if !said.contains(&line) {
        println!("{line}");
        said.push(line);
    }
}

/// One batch on one backend's profiles (`suffix` "-traced" or "").
struct Batch {
    runs: Vec<(String, String)>,
}

/// What a batch showed: its wall time, and per condition the findings of
/// its traced runs (true, false, undetermined).
struct Ran {
    took: Duration,
    findings: BTreeMap<usize, [usize; 3]>,
}

impl Batch {
    fn of(traced: &Traced, suffix: &str, pythons: usize, c: &[String]) -> Batch {
        let mut runs: Vec<(String, String)> = (0..pythons)
            .map(|i| (format!("{}{suffix}", traced.python), (traced.work)(i)))
            .collect();
        if let Some(c_profile) = traced.c {
            runs.extend(
                c.iter()
                    .map(|program| (format!("{c_profile}{suffix}"), program.clone())),
            );
        }
        Batch { runs }
    }

    /// Runs the batch; every program must exit 0.
    async fn run(&self, backends: &Backends, conditions: &[BehaviourCondition]) -> Ran {
        let started = Instant::now();
        let findings: Vec<Vec<usize>> = futures_util::stream::iter(self.runs.iter())
            .map(|(profile, program)| async move {
                let run = backends
                    .execute(program.as_bytes(), profile, &[Invocation::default()])
                    .await
                    .unwrap_or_else(|e| panic!("{profile}: {e}"));
                let event = &run.events[0];
                assert!(
                    matches!(event.outcome, Outcome::Exited { exit_code: 0 }),
                    "{profile}: {run:?}"
                );
                let Some(behaviour) = &event.behaviour else {
                    return Vec::new();
                };
                conditions
                    .iter()
                    .map(|condition| match check(0, condition, Some(behaviour)) {
                        BehaviourFinding::Holds => 0,
                        BehaviourFinding::Violated(why) => {
                            say_once(profile, &why);
                            1
                        }
                        BehaviourFinding::Undecided(why) => {
                            say_once(profile, &why);
                            2
                        }
                    })
                    .collect()
            })
            .buffer_unordered(JOBS)
            .collect()
            .await;
        let took = started.elapsed();
        let mut counts: BTreeMap<usize, [usize; 3]> = BTreeMap::new();
        for run in findings {
            for (index, finding) in run.into_iter().enumerate() {
                counts.entry(index).or_default()[finding] += 1;
            }
        }
        Ran {
            took,
            findings: counts,
        }
    }
}
