//! What a batch command shows: result lines, the progress bar, the summary.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;

pub(super) use progscore_runtime::results::{
    Counts, Summary, result_line, verdict_and_score, verdict_word,
};

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

    pub(super) fn done(&mut self, summary: &Counts) {
        if let Some(bar) = &self.bar {
            bar.set_position(summary.done as u64);
            bar.set_message(format!(
                "true {} false {} undetermined {}",
                summary.trues, summary.falses, summary.undetermined
            ));
        }
    }

    pub(super) fn tick(&mut self, summary: &Counts, started: Instant) {
        if self.bar.is_none() {
            let done = summary.done;
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
