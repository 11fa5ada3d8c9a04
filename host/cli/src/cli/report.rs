//! `progscore report`: a batch's results as one self-contained HTML page.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use progscore_report::{Limits, Report, ResultLines};
use progscore_runtime::config::Config;
use progscore_scoring::evidence::EvidenceStore;

use super::EXIT_OK;

#[derive(Debug, Parser)]
pub struct ReportArgs {
    /// The result lines of a batch, as `progscore score --out` or `rescore
    /// --out` wrote them.
    results: PathBuf,
    /// Where to write the page.
    #[arg(short = 'o', long, default_value = "report.html")]
    out: PathBuf,
    /// Another grading of the same batch (e.g. before a rescore): the page
    /// shows the verdicts that changed, both ways. Without it, a rescore's
    /// own `previous` verdicts are used.
    #[arg(long)]
    baseline: Option<PathBuf>,
}

pub fn run(config: &Config, args: ReportArgs) -> anyhow::Result<u8> {
    let started = Instant::now();
    let results = ResultLines::read(&args.results)?;
    let baseline = args
        .baseline
        .as_deref()
        .map(ResultLines::read)
        .transpose()?;
    let store = open_store(&config.store_path)?;
    let report = progscore_report::gather(&results, baseline.as_ref(), &store, Limits::default())?;
    warn_mismatched(&report, &results.source);
    let bytes = write(&report, &args.out)?;
    eprintln!(
        "progscore: wrote {} ({} items, {:.1} MiB) in {:.2} s",
        args.out.display(),
        report.items.len(),
        bytes as f64 / (1024.0 * 1024.0),
        started.elapsed().as_secs_f64()
    );
    Ok(EXIT_OK)
}

/// Says which result lines name evidence of other items (their evidence is
/// left out of the page): results read against another store than theirs.
pub(super) fn warn_mismatched(report: &Report, source: &str) {
    if let Some(first) = report.mismatched_lines.first() {
        eprintln!(
            "progscore: {source}:{first}: {} result line(s) name evidence of other items in the store {}; the page does not show it for them (are these results from another store?)",
            report.mismatched_lines.len(),
            report.store
        );
    }
}

/// The store the results point into; a missing file is an error, never a
/// new empty store.
pub(super) fn open_store(path: &Path) -> anyhow::Result<EvidenceStore> {
    if !path.exists() {
        anyhow::bail!(
            "no evidence store at {}: the report reads the evidence the results point to (set [store] path in the config)",
            path.display()
        );
    }
    Ok(EvidenceStore::open(path)?)
}

/// Renders and writes the page; returns its size in bytes.
pub(super) fn write(report: &Report, out: &Path) -> anyhow::Result<usize> {
    let page = progscore_report::render(report)?;
    std::fs::write(out, &page).with_context(|| format!("cannot write {}", out.display()))?;
    Ok(page.len())
}
