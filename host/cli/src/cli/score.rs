//! `progscore score` and `progscore rescore`: batches of items.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, ValueEnum};
use futures_util::StreamExt;
use progscore_runtime::batch::{BatchItem, BatchSource};
use progscore_runtime::batch_run::{
    self, BatchEvent, BatchOptions, ItemCheck, ItemEvent, ReplayItems, StoreFault, Survey,
};
use progscore_runtime::config::Config;
use progscore_runtime::policy::{BatchEnd, exit, exit_status};
use progscore_runtime::session::Session;
use progscore_scoring::ScoringError;
use progscore_scoring::evidence::StoreError;
use tokio_util::sync::CancellationToken;

use super::Terminations;
use super::output::{Output, Progress, Summary, result_line, verdict_and_score, verdict_word};

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

/// Reads the batch once, checking every line; reports the bad lines.
/// `None` when `--strict` stops everything.
fn survey(
    source: &BatchSource,
    check: &dyn ItemCheck,
    strict: bool,
) -> anyhow::Result<Option<Survey>> {
    let survey = batch_run::survey(source, check)?;
    for error in &survey.bad_lines {
        eprintln!("progscore: {error}");
    }
    let bad_lines = survey.bad_lines.len();
    if strict && bad_lines > 0 {
        eprintln!("progscore: --strict: nothing scored ({bad_lines} bad line(s))");
        return Ok(None);
    }
    Ok(Some(survey))
}

pub async fn score(config: &Config, args: ScoreArgs) -> anyhow::Result<u8> {
    // Caught before anything is created, so no signal can leave a container.
    let signals = Terminations::install();
    let session = Session::open(config, super::wasi_workers())?;
    let scoring = session.items().context("a scoring session has a scorer")?;
    // The batch is read once to check every line and find its profiles,
    // then again as the items are scored: never held whole in memory.
    let source = BatchSource::File(args.batch.clone());
    let Some(survey) = survey(&source, &scoring, args.strict)? else {
        return Ok(exit::ERROR);
    };
    let mut bad_lines = survey.bad_lines.len();
    let cancel = CancellationToken::new();
    let (interrupt, received) = signals.cancel_on_signal(cancel.clone());
    let options = BatchOptions {
        jobs: args.jobs,
        fresh: args.fresh,
        cancel: cancel.clone(),
    };
    let mut events = std::pin::pin!(batch_run::run_batch(&scoring, &source, &survey, options));
    let mut out = Output::open(args.out.as_ref())?;
    let mut progress = Progress::new(survey.items());
    let started = Instant::now();
    // The result lines, kept for --report.
    let mut written: Vec<serde_json::Value> = Vec::new();
    let mut ticker = tokio::time::interval(Duration::from_secs(2));
    ticker.tick().await;
    let mut so_far = progscore_runtime::results::Counts::default();
    let finished = loop {
        tokio::select! {
            next = events.next() => {
                let Some(event) = next else { anyhow::bail!("the batch ended without its end") };
                match event {
                    // Every profile the batch uses is checked before
                    // anything runs; the items of a profile that cannot
                    // run are not scored and nothing of them is stored.
                    BatchEvent::ProfileRefused(refused) => {
                        eprintln!(
                            "progscore: profile `{}` cannot run here: {}\n  {} item(s) of it not scored; nothing was stored for them",
                            refused.profile, refused.error, refused.items
                        );
                    }
                    BatchEvent::Started { .. } => {}
                    BatchEvent::BadLine(error) => {
                        eprintln!("progscore: {error}");
                        bad_lines += 1;
                    }
                    BatchEvent::Item { event, counts } => {
                        match event {
                            ItemEvent::Scored(score) => {
                                let line = result_line(&score, None);
                                out.line(&line)?;
                                if args.report.is_some() {
                                    written.push(line);
                                }
                            }
                            ItemEvent::Cancelled { .. } | ItemEvent::AlreadySaid { .. } => {}
                            ItemEvent::StoreFailed { fault: StoreFault::Store(err), .. } => {
                                eprintln!("progscore: {}", store_fault_message(&session, &err));
                            }
                            ItemEvent::StoreFailed { fault, .. } => eprintln!("progscore: {fault}"),
                            ItemEvent::EngineGone { error, .. } => eprintln!("progscore: {error}"),
                            ItemEvent::NotScored { id, error } => {
                                eprintln!("progscore: item {id}: not scored: {error}");
                            }
                            ItemEvent::NotRun { id, reason } => {
                                eprintln!("progscore: item {id}: not scored: {reason}");
                            }
                            ItemEvent::Failed { id, error } => {
                                eprintln!("progscore: item {id}: {error}");
                            }
                        }
                        so_far = counts;
                        progress.done(&so_far);
                    }
                    BatchEvent::End(finished) => break finished,
                }
            }
            _ = ticker.tick() => progress.tick(&so_far, started),
        }
    };
    interrupt.abort();
    progress.finish();
    out.flush()?;
    let summary = &finished.summary;
    summary.print(started.elapsed(), bad_lines);
    if let Some(path) = &args.report {
        // Scored items are stored and their lines written: a report that
        // cannot be made is said, and loses nothing.
        let made = write_report(&session, &args.batch, written, started.elapsed(), path);
        match made {
            Ok(()) => eprintln!("progscore: report written to {}", path.display()),
            Err(err) => eprintln!("progscore: no report: {err:#}"),
        }
    }
    let end = finished.end(received.get().map(|signal| signal.exit_code));
    let unscored = summary.cancelled + summary.not_scored;
    match end {
        BatchEnd::Interrupted { .. } => {
            let name = received.get().map_or("signal", |signal| signal.name);
            eprintln!(
                "progscore: {name}: {unscored} item(s) not scored; their containers were removed. Run the same command again to continue."
            );
        }
        BatchEnd::StoreFailed => eprintln!(
            "progscore: stopped: the evidence store failed; {} item(s) not scored. The results written so far stand.",
            unscored + summary.errors
        ),
        BatchEnd::EngineGone => eprintln!(
            "progscore: stopped: {unscored} item(s) not scored (nothing was stored for them; finished results are). Run the same command again to continue once the engine is back."
        ),
        BatchEnd::NotScored | BatchEnd::Finished => {}
    }
    Ok(exit_status(end, summary, fail_on(&args.fail_on), bad_lines))
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

pub async fn rescore(config: &Config, args: RescoreArgs) -> anyhow::Result<u8> {
    let session = Session::open_offline(config)?;
    let check = ReplayItems(&session.replayer);
    let source = BatchSource::File(args.batch.clone());
    let Some(survey) = survey(&source, &check, args.strict)? else {
        return Ok(exit::ERROR);
    };
    let mut bad_lines = survey.bad_lines.len();
    let mut out = Output::open(args.out.as_ref())?;
    let started = Instant::now();
    let mut summary = Summary::default();
    let mut changed = Vec::new();
    // Scores are written 1,000 to a transaction: several times faster than
    // one commit each (see the scoring benchmark), and an interrupted rescore
    // loses at most the chunk in progress, which the next rescore redoes.
    let mut lines = survey.read_again(&source, &check).peekable();
    while lines.peek().is_some() {
        let mut chunk: Vec<BatchItem> = Vec::with_capacity(RESCORE_CHUNK);
        for line in lines.by_ref().take(RESCORE_CHUNK) {
            match line {
                Ok(item) => chunk.push(item),
                Err(error) => {
                    eprintln!("progscore: {error}");
                    bad_lines += 1;
                }
            }
        }
        // What the last chunk freed goes back to the system: its drafts,
        // rows and comparisons were spread over the allocator's per-thread
        // arenas, which otherwise kept growing with the batch (heap live
        // +4 MB, resident +20 MB from 10,000 to 200,000 items).
        release_freed_memory();
        let requests = chunk.iter().map(BatchItem::rescore_request).collect();
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
                        let before = rescore.previous.as_ref().map(|p| {
                            verdict_and_score(p.record.status, p.record.value, p.record.score)
                        });
                        changed.push(format!(
                            "{}: {} -> {}",
                            item.id,
                            before.unwrap_or_else(|| "none".into()),
                            verdict_and_score(
                                rescore.score.status,
                                rescore.score.value,
                                rescore.score.score
                            )
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
                        ScoringError::ItemOfAnotherProgram { .. } | ScoringError::EmptyItemId => {
                            "id".into()
                        }
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
    summary.print(started.elapsed(), bad_lines);
    let end = BatchEnd::of(&summary, None);
    Ok(exit_status(
        end,
        &summary,
        fail_on(&args.fail_on),
        bad_lines,
    ))
}

/// Returns the allocator's free pages to the system (glibc keeps them).
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own arenas; any thread may call it.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A fault of the store itself, said once: which file, where the batch
/// stopped, and how to check the file. Results already written stand.
fn store_fault(session: &Session, err: &StoreError, batch: &Path, line: usize) -> u8 {
    eprintln!(
        "progscore: {}\n  stopped at {}:{line}: nothing from this line on was scored; the results written so far stand.",
        store_fault_message(session, err),
        batch.display()
    );
    exit::ERROR
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

/// The `--fail-on` flags as the batch policy takes them.
fn fail_on(flags: &[FailOn]) -> progscore_runtime::policy::FailOn {
    progscore_runtime::policy::FailOn {
        falses: flags.contains(&FailOn::False),
        undetermined: flags.contains(&FailOn::Undetermined),
    }
}
