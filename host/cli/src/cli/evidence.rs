//! `progscore replay`, `observations`, `scores`: stored evidence only.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use progscore_runtime::config::Config;
use progscore_runtime::session::Session;
use progscore_scoring::evidence::{ObservationFilter, ScoreFilter};
use progscore_scoring::{ObservationRef, ReplayRequest, ScoringExpectation};

use super::{EXIT_ERROR, EXIT_OK};

#[derive(Debug, Parser)]
pub struct ReplayArgs {
    /// The stored observation to score.
    observation_id: String,
    /// A JSON file holding the expectation (`{"conditions": [...]}`).
    #[arg(long)]
    expect: PathBuf,
    /// An item id to record the score under.
    #[arg(long)]
    item: Option<String>,
}

#[derive(Debug, Parser)]
pub struct ObservationsArgs {
    #[command(subcommand)]
    command: ObservationsCommand,
}

#[derive(Debug, Subcommand)]
enum ObservationsCommand {
    /// Stored observations, newest first (one JSON line each).
    List {
        /// Only this profile.
        #[arg(long)]
        profile: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u64,
    },
    /// One observation, with its whole run.
    Show {
        /// Its id.
        id: String,
    },
}

#[derive(Debug, Parser)]
pub struct ScoresArgs {
    #[command(subcommand)]
    command: ScoresCommand,
}

#[derive(Debug, Subcommand)]
enum ScoresCommand {
    /// Stored scores, newest first (one JSON line each).
    List {
        /// Only this item.
        #[arg(long)]
        item: Option<String>,
        /// Only scores linked to this observation.
        #[arg(long)]
        observation: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u64,
    },
}

pub fn replay(config: &Config, args: ReplayArgs) -> anyhow::Result<u8> {
    let text = std::fs::read_to_string(&args.expect)
        .with_context(|| format!("cannot read {}", args.expect.display()))?;
    let deserializer = &mut serde_json::Deserializer::from_str(&text);
    let expectation: ScoringExpectation = match serde_path_to_error::deserialize(deserializer) {
        Ok(expectation) => expectation,
        Err(err) => bail!(
            "{}: field `{}`: {}",
            args.expect.display(),
            err.path(),
            err.inner()
        ),
    };
    let session = Session::open_offline(config)?;
    let request = ReplayRequest {
        item_id: args.item,
        observation: ObservationRef::Id(args.observation_id),
        expectation,
    };
    match session.replayer.replay(request) {
        Ok(score) => {
            println!("{}", serde_json::to_string(&score)?);
            Ok(EXIT_OK)
        }
        Err(err) => {
            eprintln!("progscore: {err}");
            Ok(EXIT_ERROR)
        }
    }
}

pub fn observations(config: &Config, args: ObservationsArgs) -> anyhow::Result<u8> {
    let session = Session::open_offline(config)?;
    match args.command {
        ObservationsCommand::List { profile, limit } => {
            let filter = ObservationFilter {
                profile,
                limit: Some(limit),
                ..ObservationFilter::default()
            };
            for summary in session.store.list_observations(&filter)? {
                println!("{}", serde_json::to_string(&summary)?);
            }
            Ok(EXIT_OK)
        }
        ObservationsCommand::Show { id } => match session.store.observation(&id)? {
            Some(observation) => {
                println!("{}", serde_json::to_string_pretty(&observation)?);
                Ok(EXIT_OK)
            }
            None => {
                eprintln!(
                    "progscore: no observation {id} in {}",
                    config.store_path.display()
                );
                Ok(EXIT_ERROR)
            }
        },
    }
}

pub fn scores(config: &Config, args: ScoresArgs) -> anyhow::Result<u8> {
    let session = Session::open_offline(config)?;
    match args.command {
        ScoresCommand::List {
            item,
            observation,
            limit,
        } => {
            let filter = ScoreFilter {
                item_id: item,
                observation_id: observation,
                limit: Some(limit),
                ..ScoreFilter::default()
            };
            for score in session.store.list_scores(&filter)? {
                println!("{}", serde_json::to_string(&score)?);
            }
            Ok(EXIT_OK)
        }
    }
}
