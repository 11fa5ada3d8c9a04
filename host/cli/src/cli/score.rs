//! `progscore score` and `progscore rescore`: batches of items.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, ValueEnum};
use futures_util::StreamExt;
use progscore_runtime::batch::{Batch, BatchItem, BatchLineError};
use progscore_runtime::config::Config;
use progscore_runtime::session::Session;
use progscore_sandbox::SandboxError;
use progscore_scoring::evidence::StoreError;
use progscore_scoring::{
    Condition, ProgramInput, RescoreRequest, ScoreRequest, ScoringError, ScoringExpectation,
};
use tokio_util::sync::CancellationToken;

use super::output::{Output, Progress, Summary, result_line, verdict_word};
use super::{EXIT_ERROR, EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE, Terminations};

/// Rescored items written per transaction.
const RESCORE_CHUNK: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// Exit 1 when any item is false.
    False,
    /// Exit 1 when any item is undetermined.
    Undetermined,
}

#[derive(Debug, Parser)]
pub struct ScoreArgs {
    /// The batch: one JSON item per line.
    batch: PathBuf,
    /// Write result lines here instead of stdout.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Programs scored at once (default: 3 per core, measured fastest; with
    /// configured engines, at least what they take at once in all).
    #[arg(long)]
    jobs: Option<usize>,
    /// Run again under new observation ids even where evidence is stored.
    #[arg(long)]
    fresh: bool,
    /// Stop at the first bad line instead of scoring the good ones.
    #[arg(long)]
    strict: bool,
    /// Exit 1 when any item has this verdict (repeatable).
    #[arg(long, value_enum)]
    fail_on: Vec<FailOn>,
    /// At the end, also write the results as an HTML page here (see `progscore report`).
    #[arg(long)]
    report: Option<PathBuf>,
}

#[derive(Debug, Parser)]
pub struct RescoreArgs {
    /// The batch: one JSON item per line (programs and changed expectations).
    batch: PathBuf,
    /// Write result lines here instead of stdout.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Stop at the first bad line instead of rescoring the good ones.
    #[arg(long)]
    strict: bool,
    /// Exit 1 when any item has this verdict (repeatable).
    #[arg(long, value_enum)]
    fail_on: Vec<FailOn>,
}

/// The items to score and the refused lines, or the exit status when
/// `--strict` stops everything.
type Prepared = Result<(Vec<BatchItem>, Vec<BatchLineError>), u8>;

/// Reads the batch and checks every line's expectation; reports bad lines.
fn prepare(session: &Session, batch: &Path, strict: bool) -> anyhow::Result<Prepared> {
    let Batch { items, mut errors } = Batch::read(batch)?;
    let mut good = Vec::with_capacity(items.len());
    for mut item in items {
        // A language name becomes its profile's own name here, so that the
        // preflight and the summary name profiles.
        item.expectation = session.replayer.canonical(item.expectation);
        // Offline sessions (rescore) validate inside the rescore itself.
        let checked = match &session.scorer {
            Some(scorer) => scorer.validate(&item.expectation),
            None => Ok(()),
        };
        match checked {
            Ok(()) => good.push(item),
            Err(err) => errors.push(BatchLineError {
                file: batch.display().to_string(),
                line: item.line,
                id: Some(item.id.clone()),
                field: Some(format!("expectation.{}", err.field_path())),
                message: err.to_string(),
            }),
        }
    }
    errors.sort_by_key(|e| e.line);
    for error in &errors {
        eprintln!("progscore: {error}");
    }
    if strict && !errors.is_empty() {
        eprintln!(
            "progscore: --strict: nothing scored ({} bad line(s))",
            errors.len()
        );
        return Ok(Err(EXIT_ERROR));
    }
    Ok(Ok((good, errors)))
}

pub async fn score(config: &Config, args: ScoreArgs) -> anyhow::Result<u8> {
    // Caught before anything is created, so no signal can leave a container.
    let signals = Terminations::install();
    let session = Session::open(config, super::wasi_workers())?;
    let (items, bad_lines) = match prepare(&session, &args.batch, args.strict)? {
        Ok(prepared) => prepared,
        Err(code) => return Ok(code),
    };
    let scorer = session
        .scorer
        .as_ref()
        .context("a scoring session has a scorer")?;
    let cancel = CancellationToken::new();
    let (interrupt, received) = signals.cancel_on_signal(cancel.clone());

    // Every profile the batch uses is checked before anything runs; the
    // items of a profile that cannot run are not scored and nothing of
    // them is stored.
    let mut refused: BTreeMap<String, SandboxError> = BTreeMap::new();
    let profiles: std::collections::BTreeSet<String> = items
        .iter()
        .filter_map(|item| profile_of(&item.expectation).map(str::to_string))
        .collect();
    let checks = futures_util::future::join_all(
        profiles
            .iter()
            .map(|profile| async move { (profile.clone(), scorer.preflight(profile).await) }),
    );
    let checks = tokio::select! {
        checks = checks => checks,
        () = cancel.cancelled() => Vec::new(),
    };
    for (profile, check) in checks {
        if let Err(err) = check {
            refused.insert(profile, err);
        }
    }
    let (items, refused_items): (Vec<BatchItem>, Vec<BatchItem>) =
        items.into_iter().partition(|item| {
            profile_of(&item.expectation).is_none_or(|profile| !refused.contains_key(profile))
        });
    for (profile, err) in &refused {
        let count = refused_items
            .iter()
            .filter(|item| profile_of(&item.expectation) == Some(profile))
            .count();
        eprintln!(
            "progscore: profile `{profile}` cannot run here: {err}\n  {count} item(s) of it not scored; nothing was stored for them"
        );
    }

    // Configured engines say how many programs they take (known once the
    // preflight reached them): enough in flight to keep them all busy.
    let engines_take = session
        .backends
        .as_ref()
        .and_then(|backends| backends.docker_capacity())
        .unwrap_or(0);
    let jobs = args
        .jobs
        .unwrap_or_else(|| progscore_runtime::policy::default_jobs(engines_take))
        .max(1);
    let mut out = Output::open(args.out.as_ref())?;
    let mut progress = Progress::new(items.len() + refused_items.len());
    let started = Instant::now();
    let mut results = futures_util::stream::iter(items)
        .map(|item| {
            let request = ScoreRequest::new(ProgramInput::Inline(item.program), item.expectation)
                .item_id(item.id.clone())
                .fresh(args.fresh)
                .cancel(cancel.child_token());
            let cancel = cancel.clone();
            async move {
                if cancel.is_cancelled() {
                    return (item.id, Err(ScoringError::Cancelled));
                }
                (item.id, scorer.score(request).await)
            }
        })
        .buffer_unordered(jobs);
    let mut summary = Summary {
        not_scored: refused_items.len(),
        ..Summary::default()
    };
    // Why the batch stopped before its end, when the sandbox went away.
    let mut stopped: Option<String> = None;
    // Set when the evidence store itself failed.
    let mut store_failed: Option<String> = None;
    // The result lines, kept for --report.
    let mut written: Vec<serde_json::Value> = Vec::new();
    let mut ticker = tokio::time::interval(Duration::from_secs(2));
    ticker.tick().await;
    loop {
        tokio::select! {
            next = results.next() => {
                let Some((id, result)) = next else { break };
                match result {
                    Ok(score) => {
                        let line = result_line(&score, None);
                        out.line(&line)?;
                        if args.report.is_some() {
                            written.push(line);
                        }
                        summary.add(&score);
                        progress.done(&summary);
                    }
                    Err(ScoringError::Cancelled) => summary.cancelled += 1,
                    Err(ScoringError::Store(err)) if err.is_store_fault() => {
                        // The same for every item: said once, and the batch stops.
                        summary.errors += 1;
                        if store_failed.is_none() {
                            eprintln!("progscore: {}", store_fault_message(&session, &err));
                            store_failed = Some(err.to_string());
                            cancel.cancel();
                        }
                        progress.done(&summary);
                    }
                    Err(ScoringError::Refused(err)) => {
                        summary.not_scored += 1;
                        if matches!(err, SandboxError::EngineUnavailable { .. }) {
                            // No further item is burned against a dead engine.
                            if stopped.is_none() {
                                eprintln!("progscore: {err}");
                                stopped = Some(err.to_string());
                                cancel.cancel();
                            }
                        } else {
                            eprintln!("progscore: item {id}: not scored: {err}");
                        }
                        progress.done(&summary);
                    }
                    Err(err) => {
                        eprintln!("progscore: item {id}: {err}");
                        summary.errors += 1;
                        progress.done(&summary);
                    }
                }
            }
            _ = ticker.tick() => progress.tick(&summary, started),
        }
    }
    interrupt.abort();
    progress.finish();
    out.flush()?;
    summary.print(started.elapsed(), bad_lines.len());
    if let Some(path) = &args.report {
        // Scored items are stored and their lines written: a report that
        // cannot be made is said, and loses nothing.
        let made = write_report(&session, &args.batch, written, started.elapsed(), path);
        match made {
            Ok(()) => eprintln!("progscore: report written to {}", path.display()),
            Err(err) => eprintln!("progscore: no report: {err:#}"),
        }
    }
    if let Some(signal) = received.get() {
        eprintln!(
            "progscore: {}: {} item(s) not scored; their containers were removed. Run the same command again to continue.",
            signal.name,
            summary.cancelled + summary.not_scored
        );
        return Ok(signal.exit_code);
    }
    if store_failed.is_some() {
        eprintln!(
            "progscore: stopped: the evidence store failed; {} item(s) not scored. The results written so far stand.",
            summary.cancelled + summary.not_scored + summary.errors
        );
        return Ok(EXIT_ERROR);
    }
    if stopped.is_some() {
        eprintln!(
            "progscore: stopped: {} item(s) not scored (nothing was stored for them; finished results are). Run the same command again to continue once the engine is back.",
            summary.cancelled + summary.not_scored
        );
        return Ok(EXIT_UNAVAILABLE);
    }
    if summary.not_scored > 0 {
        return Ok(EXIT_UNAVAILABLE);
    }
    Ok(exit_code(&summary, &args.fail_on, bad_lines.len()))
}

/// The batch's results as an HTML page, its wall time the batch's own.
fn write_report(
    session: &Session,
    batch: &Path,
    lines: Vec<serde_json::Value>,
    wall: Duration,
    path: &Path,
) -> anyhow::Result<()> {
    let results = progscore_report::ResultLines::from_values(batch.display().to_string(), lines);
    let mut report = progscore_report::gather(
        &results,
        None,
        &session.store,
        progscore_report::Limits::default(),
    )?;
    report.span_seconds = Some(wall.as_secs_f64());
    super::report::write(&report, path)?;
    Ok(())
}

/// The profile an item's expectation names (validated items have one).
fn profile_of(expectation: &ScoringExpectation) -> Option<&str> {
    expectation
        .conditions
        .first()
        .map(|condition| match condition {
            Condition::ProgramBehaves(behaves) => behaves.profile.as_str(),
        })
}

pub async fn rescore(config: &Config, args: RescoreArgs) -> anyhow::Result<u8> {
    let session = Session::open_offline(config)?;
    let (items, bad_lines) = match prepare(&session, &args.batch, args.strict)? {
        Ok(prepared) => prepared,
        Err(code) => return Ok(code),
    };
    let mut out = Output::open(args.out.as_ref())?;
    let started = Instant::now();
    let mut summary = Summary::default();
    let mut changed = Vec::new();
    // Scores are written 1,000 to a transaction: several times faster than
    // one commit each (see the scoring benchmark), and an interrupted rescore
    // loses at most the chunk in progress, which the next rescore redoes.
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        let chunk: Vec<BatchItem> = items.by_ref().take(RESCORE_CHUNK).collect();
        let requests = chunk
            .iter()
            .map(|item| RescoreRequest {
                item_id: Some(item.id.clone()),
                program: ProgramInput::Inline(item.program.clone()),
                expectation: item.expectation.clone(),
            })
            .collect();
        let results = match session.replayer.rescore_batch(requests) {
            Ok(results) => results,
            Err(ScoringError::Store(err)) if err.is_store_fault() => {
                out.flush()?;
                let line = chunk.first().map_or(0, |item| item.line);
                return Ok(store_fault(&session, &err, &args.batch, line));
            }
            Err(err) => return Err(err.into()),
        };
        for (item, result) in chunk.iter().zip(results) {
            match result {
                Ok(rescore) => {
                    let previous = rescore
                        .previous
                        .as_ref()
                        .map(|p| verdict_word(p.record.status, p.record.value));
                    out.line(&result_line(
                        &rescore.score,
                        Some((rescore.changed, previous.clone())),
                    ))?;
                    if rescore.changed {
                        changed.push(format!(
                            "{}: {} -> {}",
                            item.id,
                            previous.unwrap_or_else(|| "none".into()),
                            verdict_word(rescore.score.status, rescore.score.value)
                        ));
                    }
                    summary.add(&rescore.score);
                }
                Err(ScoringError::Store(err)) if err.is_store_fault() => {
                    out.flush()?;
                    return Ok(store_fault(&session, &err, &args.batch, item.line));
                }
                Err(err) => {
                    let field = match &err {
                        ScoringError::Expectation(e) => format!("expectation.{}", e.field_path()),
                        _ => "expectation".into(),
                    };
                    eprintln!(
                        "progscore: {}:{}: field `{field}`: {err}",
                        args.batch.display(),
                        item.line
                    );
                    summary.errors += 1;
                }
            }
        }
    }
    out.flush()?;
    if changed.is_empty() {
        eprintln!("no verdict changed");
    } else {
        eprintln!("{} verdict(s) changed:", changed.len());
        for line in &changed {
            eprintln!("  {line}");
        }
    }
    summary.print(started.elapsed(), bad_lines.len());
    Ok(exit_code(&summary, &args.fail_on, bad_lines.len()))
}

/// A fault of the store itself, said once: which file, where the batch
/// stopped, and how to check the file. Results already written stand.
fn store_fault(session: &Session, err: &StoreError, batch: &Path, line: usize) -> u8 {
    eprintln!(
        "progscore: {}\n  stopped at {}:{line}: nothing from this line on was scored; the results written so far stand.",
        store_fault_message(session, err),
        batch.display()
    );
    EXIT_ERROR
}

/// The fault with the store's file named once, and how to check the file.
fn store_fault_message(session: &Session, err: &StoreError) -> String {
    let location = session.store.location();
    let fault = match err {
        StoreError::Sqlite {
            context,
            cause: source,
        } => {
            format!("evidence store {location}: {context}: {source}")
        }
        other => other.to_string(),
    };
    format!("{fault}\n  Check the store with: sqlite3 {location} \"PRAGMA integrity_check\"")
}

fn exit_code(summary: &Summary, fail_on: &[FailOn], bad_lines: usize) -> u8 {
    if bad_lines > 0 || summary.errors > 0 {
        return EXIT_ERROR;
    }
    let failing = fail_on.iter().any(|f| match f {
        FailOn::False => summary.falses > 0,
        FailOn::Undetermined => summary.undetermined > 0,
    });
    if failing { EXIT_FAILED } else { EXIT_OK }
}
