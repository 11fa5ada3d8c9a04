//! `progscore store`: the evidence store as a whole (merging stores written
//! elsewhere, pruning old evidence).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use progscore_runtime::config::Config;
use progscore_runtime::config::retention::{parse_age, parse_size};
use progscore_scoring::evidence::{EvidenceStore, MergeTrust, OnConflict, RetentionPolicy};

use super::EXIT_OK;

#[derive(Debug, Parser)]
pub struct StoreArgs {
    #[command(subcommand)]
    command: StoreCommand,
}

#[derive(Debug, Subcommand)]
enum StoreCommand {
    /// Add another store's evidence (programs, observations, scores) to the
    /// configured store: identical copies merge, an observation stored with
    /// other content under the same id is refused and named, and then
    /// nothing is merged. The other file is only read.
    Merge {
        /// The store to merge in (an evidence.db written elsewhere).
        other: PathBuf,
        /// On an observation stored here with other content (the same
        /// attempt run twice, apart): keep this store's copy, merge the
        /// rest, and skip the other store's scores that rest on its copy.
        #[arg(long)]
        keep_ours: bool,
        /// Let `score` reuse the merged evidence as this store's own: only
        /// for a file your own progscore wrote (another CI runner of
        /// yours). Without it the merged evidence serves replay, rescore
        /// and reports, and `score` runs an attempt here rather than
        /// believe it.
        #[arg(long)]
        trust: bool,
    },
    /// Remove old evidence: observations older than --older-than, then the
    /// oldest until the store fits --max-size, with the scores that rest
    /// on them, unused programs, and a server's finished submissions.
    /// What a named item's latest score rests on stays unless
    /// --include-scored. Prints what it removed (JSON).
    Prune {
        /// Remove what is older than this (e.g. 30d, 12h).
        #[arg(long, value_parser = parse_age, value_name = "AGE")]
        older_than: Option<Duration>,
        /// Then remove the oldest until the bytes in use fit this (e.g. 10GiB).
        #[arg(long, value_parser = parse_size, value_name = "SIZE")]
        max_size: Option<u64>,
        /// Also remove what the latest score of a named item rests on (and
        /// that score): `rescore` and `report` can no longer use it.
        #[arg(long)]
        include_scored: bool,
        /// Say what would be removed, and remove nothing.
        #[arg(long)]
        dry_run: bool,
        /// Afterwards, give the freed space back to the file system
        /// (rewrites the file; other processes using the store wait).
        #[arg(long, conflicts_with = "dry_run")]
        vacuum: bool,
    },
}

pub fn run(config: &Config, args: StoreArgs) -> anyhow::Result<u8> {
    match args.command {
        StoreCommand::Merge {
            other,
            keep_ours,
            trust,
        } => {
            let store = EvidenceStore::open(&config.store_path)?;
            let on_conflict = if keep_ours {
                OnConflict::KeepThisStore
            } else {
                OnConflict::Refuse
            };
            let trust = if trust {
                MergeTrust::Trusted
            } else {
                MergeTrust::Untrusted
            };
            let summary = store.merge_from(&other, on_conflict, trust)?;
            println!("{}", serde_json::to_string(&summary)?);
            eprintln!(
                "progscore: merged {} into {}: {} observation(s) added ({} already here), \
                 {} score(s) added ({} already here), {} program(s) added; {}",
                other.display(),
                store.location(),
                summary.observations_added,
                summary.observations_present,
                summary.scores_added,
                summary.scores_present,
                summary.programs_added,
                if summary.trusted {
                    "trusted: `score` reuses its evidence"
                } else {
                    "not trusted: its evidence serves replay, rescore and reports, and `score` \
                     runs those attempts here (merge with --trust to reuse it)"
                },
            );
            if summary.observations_conflicting > 0 {
                let more = summary.observations_conflicting > summary.conflicting_ids.len() as u64;
                eprintln!(
                    "progscore: kept this store's copy of {} observation(s) stored in both with \
                     different content ({}{}), and skipped the {} score(s) of {} that rest on theirs",
                    summary.observations_conflicting,
                    summary.conflicting_ids.join(", "),
                    if more { ", ..." } else { "" },
                    summary.scores_skipped,
                    other.display(),
                );
            }
            Ok(EXIT_OK)
        }
        StoreCommand::Prune {
            older_than,
            max_size,
            include_scored,
            dry_run,
            vacuum,
        } => {
            if older_than.is_none() && max_size.is_none() {
                anyhow::bail!(
                    "store prune: give --older-than AGE, --max-size SIZE or both; nothing was removed"
                );
            }
            let store = EvidenceStore::open(&config.store_path)?;
            let policy = RetentionPolicy {
                max_age: older_than,
                max_size,
                include_scored,
            };
            let summary = store.prune(&policy, dry_run)?;
            if vacuum {
                store.vacuum()?;
            }
            println!("{}", serde_json::to_string(&summary)?);
            eprintln!(
                "progscore: {} {}: {} observation(s), {} score(s), {} program(s), {} submission(s); \
                 {} old observation(s) kept because an item's latest score rests on them{}",
                if dry_run {
                    "would remove from"
                } else {
                    "removed from"
                },
                store.location(),
                summary.observations_removed,
                summary.scores_removed,
                summary.programs_removed,
                summary.submissions_removed,
                summary.observations_kept_for_scores,
                if include_scored {
                    ""
                } else {
                    " (--include-scored removes them)"
                },
            );
            Ok(EXIT_OK)
        }
    }
}
