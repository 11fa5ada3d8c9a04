//! Command-line surface: raw flags here, resolved into typed configuration
//! once, then handed to one module per command.

mod comparators;
mod doctor;
mod evidence;
mod profiles;
mod run;
mod score;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use progscore::config::{Config, DEFAULT_CONFIG};

/// Exit status: everything done.
pub const EXIT_OK: u8 = 0;
/// Exit status: the work ran but something failed (refused run, failing verdict with --fail-on).
pub const EXIT_FAILED: u8 = 1;
/// Exit status: usage or configuration error.
pub const EXIT_ERROR: u8 = 2;

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
}

/// WASI guests run in worker processes that are this executable again.
pub fn wasi_workers() -> progscore::backends::WasiWorkers {
    use progscore::backends::WasiWorkers;
    match progscore_wasi::WorkerCommand::current_exe() {
        Ok(command) => WasiWorkers::Command(command),
        Err(_) => WasiWorkers::Auto,
    }
}

pub async fn dispatch(args: Args) -> u8 {
    let config = match Config::load(&args.config) {
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
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("progscore: {err:#}");
            EXIT_ERROR
        }
    }
}
