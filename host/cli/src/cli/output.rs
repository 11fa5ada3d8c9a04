//! What a batch command shows: result lines, the progress bar, the summary.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use progscore_scoring::{ReasonKind, Score};

pub(super) use progscore_runtime::results::{result_line, verdict_word};

/// Where result lines go.
pub(super) struct Output {
    writer: Box<dyn Write>,
}

impl Output {
    pub(super) fn open(path: Option<&PathBuf>) -> anyhow::Result<Output> {
        let writer: Box<dyn Write> = match path {
            Some(path) => Box::new(std::io::BufWriter::new(
                std::fs::File::create(path)
                    .with_context(|| format!("cannot write {}", path.display()))?,
            )),
            None => Box::new(std::io::stdout()),
        };
        Ok(Output { writer })
    }

    pub(super) fn line(&mut self, value: &serde_json::Value) -> anyhow::Result<()> {
        serde_json::to_writer(&mut self.writer, value)?;
        self.writer.write_all(b"\n")?;
        // Each line is final once written: a crash or Ctrl-C loses nothing scored.
        self.writer.flush()?;
        Ok(())
    }

    pub(super) fn flush(&mut self) -> anyhow::Result<()> {
        self.writer.flush()?;
        Ok(())
    }
}

#[derive(Default)]
pub(super) struct Summary {
    pub(super) trues: usize,
    pub(super) falses: usize,
    pub(super) undetermined: usize,
    pub(super) errors: usize,
    pub(super) cancelled: usize,
    /// Refused by the sandbox (a profile that cannot run, an engine gone).
    pub(super) not_scored: usize,
    /// Undetermined verdicts by kind: how many, and the first reason seen.
    pub(super) reasons: BTreeMap<ReasonKind, (usize, String)>,
}

impl Summary {
    pub(super) fn add(&mut self, score: &Score) {
        match score.value {
            Some(true) => self.trues += 1,
            Some(false) => self.falses += 1,
            None => {
                self.undetermined += 1;
                // Grouped by kind: reasons name containers and figures.
                let kind = score.reason_kind.unwrap_or(ReasonKind::SandboxError);
                let example = score
                    .reason
                    .clone()
                    .unwrap_or_else(|| score.rationale.clone());
                self.reasons.entry(kind).or_insert((0, example)).0 += 1;
            }
        }
    }

    pub(super) fn scored(&self) -> usize {
        self.trues + self.falses + self.undetermined
    }

    pub(super) fn done(&self) -> usize {
        self.scored() + self.errors + self.not_scored
    }

    pub(super) fn print(&self, wall: Duration, bad_lines: usize) {
        let secs = wall.as_secs_f64().max(1e-9);
        eprintln!();
        eprintln!("  {:<14} {:>7}", "true", self.trues);
        eprintln!("  {:<14} {:>7}", "false", self.falses);
        eprintln!("  {:<14} {:>7}", "undetermined", self.undetermined);
        if self.errors > 0 {
            eprintln!("  {:<14} {:>7}", "errors", self.errors);
        }
        if bad_lines > 0 {
            eprintln!("  {:<14} {:>7}", "bad lines", bad_lines);
        }
        if self.cancelled + self.not_scored > 0 {
            eprintln!(
                "  {:<14} {:>7}",
                "not scored",
                self.cancelled + self.not_scored
            );
        }
        eprintln!("  {:<14} {:>7.2} s", "wall time", secs);
        eprintln!(
            "  {:<14} {:>7.2}",
            "programs/s",
            self.scored() as f64 / secs
        );
        if !self.reasons.is_empty() {
            let mut reasons: Vec<_> = self.reasons.iter().collect();
            reasons.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(b.0)));
            eprintln!("  undetermined, by reason:");
            for (kind, (count, example)) in reasons {
                eprintln!(
                    "    {count:>5}  {} (e.g. {})",
                    kind.describe(),
                    shorten(example, 160)
                );
            }
        }
    }
}

/// The first `max` characters of `text`, marked when cut.
fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// A progress bar on a terminal, plain periodic lines otherwise.
pub(super) struct Progress {
    bar: Option<indicatif::ProgressBar>,
    total: usize,
}

impl Progress {
    pub(super) fn new(total: usize) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(total as u64);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} {msg} {rate} eta {eta}",
            ) {
                // indicatif's own `{per_sec}` prints four decimals.
                let rate = |state: &indicatif::ProgressState, out: &mut dyn std::fmt::Write| {
                    let _ = write!(out, "{:.1}/s", state.per_sec());
                };
                bar.set_style(style.with_key("rate", rate));
            }
            bar
        });
        Progress { bar, total }
    }

    pub(super) fn done(&mut self, summary: &Summary) {
        if let Some(bar) = &self.bar {
            bar.set_position(summary.done() as u64);
            bar.set_message(format!(
                "true {} false {} undetermined {}",
                summary.trues, summary.falses, summary.undetermined
            ));
        }
    }

    pub(super) fn tick(&mut self, summary: &Summary, started: Instant) {
        if self.bar.is_none() {
            let done = summary.done();
            let rate = done as f64 / started.elapsed().as_secs_f64().max(1e-9);
            eprintln!(
                "progress: {done}/{} done (true {}, false {}, undetermined {}), {rate:.1}/s",
                self.total, summary.trues, summary.falses, summary.undetermined
            );
        }
    }

    pub(super) fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
