//! `progscore store`: the evidence store as a whole (merging stores written
//! elsewhere).

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use progscore_runtime::config::Config;
use progscore_scoring::evidence::{EvidenceStore, MergeTrust, OnConflict};

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
    }
}
