//! `progscore run`: execute only, print the run.

use progscore_sandbox::SandboxClientExt as _;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Parser;
use progscore_runtime::backends::Backends;
use progscore_runtime::config::Config;
use progscore_sandbox::{ByteString, Invocation};

use super::{EXIT_ERROR, EXIT_FAILED, EXIT_OK, Terminations};

#[derive(Debug, Parser)]
pub struct RunArgs {
    /// The profile to run under.
    #[arg(long)]
    profile: String,
    /// The program file, run verbatim.
    program: PathBuf,
    /// Arguments for one invocation (after `--`).
    #[arg(last = true)]
    args: Vec<String>,
    /// A file whose bytes are the invocation's stdin.
    #[arg(long, conflicts_with = "invocations")]
    stdin: Option<PathBuf>,
    /// A JSONL file of invocations (`{"args": [...], "stdin": "..."}` per
    /// line), each run in its own fresh sandbox.
    #[arg(long, conflicts_with = "args")]
    invocations: Option<PathBuf>,
}

pub async fn run(config: &Config, args: RunArgs) -> anyhow::Result<u8> {
    // Caught before anything is created, so no signal can leave a container.
    let mut signals = Terminations::install();
    let Some(profile) = config.profile(&args.profile) else {
        let known: Vec<&str> = config.profiles.iter().map(|p| p.name.as_str()).collect();
        bail!(
            "{}: no profile named `{}` (configured: {})",
            config.path.display(),
            args.profile,
            known.join(", ")
        );
    };
    let program = std::fs::read(&args.program)
        .with_context(|| format!("cannot read the program {}", args.program.display()))?;
    let invocations = match &args.invocations {
        Some(path) => read_invocations(path)?,
        None => {
            let stdin = match &args.stdin {
                Some(path) => {
                    Some(ByteString(std::fs::read(path).with_context(|| {
                        format!("cannot read stdin file {}", path.display())
                    })?))
                }
                None => None,
            };
            vec![Invocation {
                args: args.args.clone(),
                stdin,
            }]
        }
    };
    // An invocation the program cannot be given is a usage error: nothing runs.
    if let Err(err) = profile.check_invocations(&invocations) {
        let source = match &args.invocations {
            Some(path) => format!("{}: ", path.display()),
            None => String::new(),
        };
        eprintln!("progscore: {source}{err}");
        return Ok(EXIT_ERROR);
    }
    let backends = Backends::build(
        config.profiles.clone(),
        config.docker.options(),
        config.oci.clone(),
        super::wasi_workers(),
    )?;
    let execution = backends.execute(&program, &args.profile, &invocations);
    // A termination signal drops the call, which removes its containers
    // and workspace before returning.
    let result = tokio::select! {
        result = execution => result,
        signal = signals.next() => {
            eprintln!("progscore: {}: interrupted; the sandbox was cleaned up", signal.name);
            return Ok(signal.exit_code);
        }
    };
    match result {
        Ok(run) => {
            println!("{}", serde_json::to_string_pretty(&run)?);
            for (index, event) in run.events.iter().enumerate() {
                if let Some(behaviour) = &event.behaviour {
                    eprintln!(
                        "progscore: invocation {index} behaviour: {}",
                        behaviour.summary()
                    );
                }
            }
            for warning in &run.sandbox_warnings {
                eprintln!("progscore: sandbox warning: {warning}");
            }
            Ok(EXIT_OK)
        }
        Err(err) => {
            eprintln!("progscore: the run was refused: {err}");
            Ok(EXIT_FAILED)
        }
    }
}

fn read_invocations(path: &Path) -> anyhow::Result<Vec<Invocation>> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot read invocations {}", path.display()))?;
    let mut invocations = Vec::new();
    for (index, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line =
            line.with_context(|| format!("{}:{}: cannot read", path.display(), index + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let invocation: Invocation = serde_json::from_str(&line)
            .with_context(|| format!("{}:{}: not an invocation", path.display(), index + 1))?;
        invocations.push(invocation);
    }
    if invocations.is_empty() {
        bail!("{}: no invocations", path.display());
    }
    Ok(invocations)
}
