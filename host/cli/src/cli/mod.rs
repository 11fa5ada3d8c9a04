//! Command-line surface: raw flags here, resolved into typed configuration
//! once, then handed to one module per command.

mod comparators;
mod doctor;
mod evidence;
mod output;
mod profiles;
mod report;
mod run;
mod score;
mod serve;
mod store;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use progscore_runtime::config::{Config, DEFAULT_CONFIG};
use progscore_runtime::policy::exit;

/// Exit status: everything done.
pub const EXIT_OK: u8 = exit::OK;
/// Exit status: the work ran but something failed (refused run, failing verdict with --fail-on).
pub const EXIT_FAILED: u8 = exit::FAILED;
/// Exit status: usage or configuration error.
pub const EXIT_ERROR: u8 = exit::ERROR;
/// Exit status of `compare`: the comparator could not decide.
pub const EXIT_UNDETERMINED: u8 = 3;

/// Runs submitted programs in a hardened sandbox and scores what they do.
#[derive(Debug, Parser)]
#[command(name = "progscore", version, about)]
pub struct Args {
    /// The TOML config (profiles, comparators, store).
    #[arg(long, global = true, env = "PROGSCORE_CONFIG", default_value = DEFAULT_CONFIG)]
    pub config: PathBuf,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Score a batch (JSONL): run each program, check it, store the evidence.
    Score(score::ScoreArgs),
    /// Re-grade a batch from stored evidence only; report changed verdicts.
    Rescore(score::RescoreArgs),
    /// Score one stored observation against an expectation file; runs nothing.
    Replay(evidence::ReplayArgs),
    /// List or show stored observations.
    Observations(evidence::ObservationsArgs),
    /// List stored scores.
    Scores(evidence::ScoresArgs),
    /// Run a program under a profile and print the run as JSON (no scoring).
    Run(run::RunArgs),
    /// List the loaded comparators (built-in and configured).
    Comparators(comparators::ComparatorsArgs),
    /// Run one comparator by hand on a file's bytes.
    Compare(comparators::CompareArgs),
    /// List the configured profiles and their fingerprints.
    Profiles(profiles::ProfilesArgs),
    /// Check that every profile's backend is usable, and say why not.
    Doctor(doctor::DoctorArgs),
    /// Write a batch's results as one self-contained HTML page.
    Report(report::ReportArgs),
    /// The evidence store as a whole: merge a store written elsewhere, prune old evidence.
    Store(store::StoreArgs),
    /// Serve the runtime over HTTP: progscore's /v1 API and SandboxFusion's /run_code.
    Serve(serve::ServeArgs),
}

/// A request to stop: SIGINT, SIGTERM or SIGHUP, and the exit status it gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Termination {
    /// `SIGINT`, `SIGTERM` or `SIGHUP`.
    pub name: &'static str,
    /// 128 + the signal's number, as shells report it.
    pub exit_code: u8,
}

/// The termination signals, caught from the moment this is built: what
/// `timeout`, `docker stop`, systemd, Kubernetes and CI runners send must
/// clean up like Ctrl-C does, not kill the process with its containers.
pub struct Terminations {
    interrupt: Option<tokio::signal::unix::Signal>,
    terminate: Option<tokio::signal::unix::Signal>,
    hangup: Option<tokio::signal::unix::Signal>,
}

impl Terminations {
    /// Installs the handlers (within a tokio runtime).
    pub fn install() -> Terminations {
        use tokio::signal::unix::{SignalKind, signal};
        Terminations {
            interrupt: signal(SignalKind::interrupt()).ok(),
            terminate: signal(SignalKind::terminate()).ok(),
            hangup: signal(SignalKind::hangup()).ok(),
        }
    }

    /// The next termination signal.
    pub async fn next(&mut self) -> Termination {
        async fn on(signal: &mut Option<tokio::signal::unix::Signal>) {
            match signal {
                Some(signal) => {
                    signal.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = on(&mut self.interrupt) => Termination { name: "SIGINT", exit_code: 130 },
            () = on(&mut self.terminate) => Termination { name: "SIGTERM", exit_code: 143 },
            () = on(&mut self.hangup) => Termination { name: "SIGHUP", exit_code: 129 },
        }
    }

    /// Waits for the first signal, records it and cancels `cancel`; a
    /// second signal exits at once (what is left is swept by the next start).
    pub fn cancel_on_signal(
        mut self,
        cancel: tokio_util::sync::CancellationToken,
    ) -> (
        tokio::task::JoinHandle<()>,
        std::sync::Arc<std::sync::OnceLock<Termination>>,
    ) {
        let received = std::sync::Arc::new(std::sync::OnceLock::new());
        let record = received.clone();
        let task = tokio::spawn(async move {
            let first = self.next().await;
            let _ = record.set(first);
            cancel.cancel();
            let second = self.next().await;
            eprintln!(
                "progscore: {} again: exiting without waiting for cleanup",
                second.name
            );
            std::process::exit(i32::from(second.exit_code));
        });
        (task, received)
    }
}

/// WASI guests run in worker processes that are this executable again.
pub fn wasi_workers() -> progscore_runtime::backends::WasiWorkers {
    progscore_runtime::backends::WasiWorkers::this_executable()
}

pub async fn dispatch(args: Args) -> u8 {
    // The built-in comparators need no config: without the default file,
    // `compare` and `comparators` use them alone.
    let builtins_only = matches!(args.command, Command::Compare(_) | Command::Comparators(_))
        && args.config == std::path::Path::new(DEFAULT_CONFIG)
        && !args.config.exists();
    let loaded = if builtins_only {
        Config::parse(&args.config, "")
    } else {
        Config::load(&args.config)
    };
    // The server's table is the server's to read, and checked here for
    // every command: a bad value is said at once, as any other table's.
    let loaded = loaded
        .and_then(|config| progscore_server::ServeSettings::from_config(&config).map(|_| config));
    let config = match loaded {
        Ok(config) => config,
        Err(err) => {
            eprintln!("progscore: {err}");
            return EXIT_ERROR;
        }
    };
    let result = match args.command {
        Command::Score(a) => score::score(&config, a).await,
        Command::Rescore(a) => score::rescore(&config, a).await,
        Command::Replay(a) => evidence::replay(&config, a),
        Command::Observations(a) => evidence::observations(&config, a),
        Command::Scores(a) => evidence::scores(&config, a),
        Command::Comparators(a) => comparators::list(&config, a),
        Command::Compare(a) => comparators::compare(&config, a),
        Command::Run(run_args) => run::run(&config, run_args).await,
        Command::Profiles(profile_args) => profiles::run(&config, profile_args),
        Command::Doctor(doctor_args) => doctor::run(&config, doctor_args).await,
        Command::Report(report_args) => report::run(&config, report_args),
        Command::Serve(serve_args) => serve::serve(&config, serve_args).await,
        Command::Store(store_args) => store::run(&config, store_args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("progscore: {}", chain(&err));
            EXIT_ERROR
        }
    }
}

/// An error and its causes, each said once. The libraries' errors that
/// quote their cause in their message do not also give it as their source,
/// so every link of the chain says something new.
fn chain(err: &anyhow::Error) -> String {
    err.chain()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

#[cfg(test)]
mod tests {
    use super::chain;
    use anyhow::Context;

    #[test]
    fn each_cause_is_said_once() {
        let store = progscore_scoring::evidence::StoreError::Sqlite {
            context: "reading observations",
            cause: rusqlite_error(),
        };
        let err = Err::<(), _>(store)
            .context("cannot rescore results.jsonl")
            .unwrap_err();
        let text = chain(&err);
        assert_eq!(text.matches("disk I/O error").count(), 1, "{text}");
        assert!(
            text.starts_with(
                "cannot rescore results.jsonl: evidence store: reading observations: "
            ),
            "{text}"
        );
    }

    fn rusqlite_error() -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_IOERR),
            Some("disk I/O error".into()),
        )
    }
}
