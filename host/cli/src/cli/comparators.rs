//! `progscore comparators` and `progscore compare`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use progscore_comparator_host::{ComparisonOutcome, ObservedStream};
use progscore_runtime::config::Config;
use progscore_runtime::session::load_comparators;

use super::{EXIT_ERROR, EXIT_FAILED, EXIT_OK, EXIT_UNDETERMINED};

#[derive(Debug, Parser)]
pub struct ComparatorsArgs {}

#[derive(Debug, Parser)]
pub struct CompareArgs {
    /// The comparator's name (built-in or configured).
    name: String,
    /// Its parameters as JSON, e.g. '{"value": "9"}'.
    #[arg(long, default_value = "{}")]
    params: String,
    /// A file holding the observed output.
    #[arg(long)]
    observed: PathBuf,
    /// Treat the observed bytes as a truncated prefix.
    #[arg(long)]
    truncated: bool,
    /// With --truncated: the total bytes the stream had (default: one more than kept).
    #[arg(long)]
    total_bytes: Option<u64>,
}

pub fn list(config: &Config, _args: ComparatorsArgs) -> anyhow::Result<u8> {
    let host = load_comparators(config)?;
    for info in host.comparators() {
        println!("{}", serde_json::to_string(&info)?);
    }
    for warning in host.warnings() {
        eprintln!("progscore: warning: {warning}");
    }
    Ok(EXIT_OK)
}

/// Exit 0 on match, 1 on mismatch, 3 on undetermined, 2 on bad input.
pub fn compare(config: &Config, args: CompareArgs) -> anyhow::Result<u8> {
    let host = load_comparators(config)?;
    let bytes = std::fs::read(&args.observed)
        .with_context(|| format!("cannot read {}", args.observed.display()))?;
    let stream = if args.truncated {
        let total = args.total_bytes.unwrap_or(bytes.len() as u64 + 1);
        ObservedStream::truncated(bytes, total)
    } else {
        ObservedStream::complete(bytes)
    };
    if let Err(err) = host.validate(&args.name, &args.params) {
        eprintln!("progscore: {err}");
        return Ok(EXIT_ERROR);
    }
    let (word, reason, code) = match host.compare(&args.name, &args.params, &stream) {
        Ok(ComparisonOutcome::Match) => ("match", None, EXIT_OK),
        Ok(ComparisonOutcome::Mismatch(reason)) => ("mismatch", Some(reason), EXIT_FAILED),
        Ok(ComparisonOutcome::Undetermined(reason)) => {
            ("undetermined", Some(reason), EXIT_UNDETERMINED)
        }
        Err(err) => {
            eprintln!("progscore: {err}");
            return Ok(EXIT_ERROR);
        }
    };
    println!("{}", serde_json::json!({"verdict": word, "reason": reason}));
    Ok(code)
}
