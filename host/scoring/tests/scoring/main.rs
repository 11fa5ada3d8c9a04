//! The scorer against the scripted sandbox client: verdict rules, evidence
//! reuse, sharing and cancellation, replay refusals, the store's part. One
//! test binary; a module per concern.

mod checkers;
#[path = "../common/mod.rs"]
mod common;
mod doc_flow;
mod faults;
mod files;
mod interactive;
mod leases;
mod limits;
mod policies;
mod provenance;
mod replay;
mod rescore;
mod reuse;
mod shapes;
mod sharing;
mod store_races;
mod validation;
mod verdicts;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{NativeComparators, SQUARE, expect, profile, profiles};
use progscore_evidence::{
    EvidenceStore, MergeTrust, Observation, ObservationFilter, OnConflict, ScoreFilter,
    ScoreStatus, StoreError,
};
use progscore_sandbox::fake::{FakeRequest, ScriptedClient, event, exited_event};
use progscore_sandbox::{
    ByteString, CapturedStream, InvocationEvent, Outcome, SandboxError, TimeLimit, sha256_hex,
};
use progscore_scoring::{
    Attempt, Condition, EvidenceUse, ExpectationError, ObservationRef, ProgramCase,
    ProgramExecutionScorer, ProgramExecutionSource, ProgramInput, ProgramResult, ReasonKind,
    ReplayRefusal, ReplayRequest, RescoreRequest, ScoreRequest, ScoringError, ScoringExpectation,
    TextCondition,
};
use tokio_util::sync::CancellationToken;

/// Runs the square program "for real" in the fake's terms: the square of the
/// first argument for the square program, a syntax error for anything else.
fn square_responder(request: &FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError> {
    Ok(request
        .invocations
        .iter()
        .map(|invocation| {
            let n = invocation.args.first().and_then(|a| a.parse::<i64>().ok());
            match n {
                Some(n) if request.program == SQUARE => {
                    exited_event(0, format!("{}\n", n * n).as_bytes(), b"")
                }
                _ => exited_event(1, b"", b"SyntaxError: invalid syntax\n"),
            }
        })
        .collect())
}

struct Setup {
    client: ScriptedClient,
    store: Arc<EvidenceStore>,
    scorer: ProgramExecutionScorer,
}

impl Setup {
    fn new(client: ScriptedClient) -> Setup {
        Setup::with_store(client, Arc::new(EvidenceStore::open_in_memory().unwrap()))
    }

    fn with_store(client: ScriptedClient, store: Arc<EvidenceStore>) -> Setup {
        let source = ProgramExecutionSource::new(Arc::new(client.clone()), store.clone());
        let scorer = ProgramExecutionScorer::new(source, Arc::new(NativeComparators));
        Setup {
            client,
            store,
            scorer,
        }
    }

    fn square() -> Setup {
        Setup::new(ScriptedClient::new(profiles()).with_responder(square_responder))
    }

    /// The same setup, its scorer taking these language names for profiles.
    fn with_languages(self, languages: &[(&str, &str)]) -> Setup {
        let languages = languages
            .iter()
            .map(|(name, profile)| (name.to_string(), profile.to_string()))
            .collect();
        Setup {
            scorer: self.scorer.with_languages(languages),
            ..self
        }
    }

    fn started(&self) -> usize {
        self.client.counters().started.load(Ordering::SeqCst)
    }

    fn cancelled(&self) -> usize {
        self.client.counters().cancelled.load(Ordering::SeqCst)
    }
}

fn inline(program: &[u8], expectation: ScoringExpectation) -> ScoreRequest {
    ScoreRequest::new(ProgramInput::Inline(program.to_vec()), expectation)
}

/// A client whose every run returns these events (one per invocation expected).
fn scripted(events: Vec<InvocationEvent>) -> Setup {
    Setup::new(ScriptedClient::new(profiles()).with_responder(move |_| Ok(events.clone())))
}

fn truncated(kept: &[u8], total: u64) -> CapturedStream {
    CapturedStream {
        data: ByteString(kept.to_vec()),
        truncated: true,
        total_bytes: total,
    }
}
