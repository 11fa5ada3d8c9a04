//! The scorer with the real WebAssembly comparator host: the adapter maps
//! refusals and verdicts faithfully.

#[path = "../../scoring/tests/common/mod.rs"]
mod common;

use std::sync::Arc;

use common::{SQUARE, expect, profiles};
use progscore_comparator_host::{ComparatorHost, HostOptions};
use progscore_evidence::{EvidenceStore, ScoreStatus};
use progscore_runtime::comparators::WasmComparators;
use progscore_sandbox::fake::{ScriptedClient, exited_event};
use progscore_sandbox::{ByteString, CapturedStream};
use progscore_scoring::{
    ComparatorRefusal, ComparatorVerdict, OutputComparator, ProgramExecutionScorer,
    ProgramExecutionSource, ProgramInput, ScoreRequest,
};

fn host(cache: &std::path::Path) -> ComparatorHost {
    let mut host = ComparatorHost::new(HostOptions {
        cache_dir: Some(cache.to_path_buf()),
        ..HostOptions::default()
    })
    .unwrap();
    host.register_builtins().unwrap();
    host
}

fn truncated(kept: Vec<u8>) -> CapturedStream {
    CapturedStream {
        data: ByteString(kept),
        truncated: true,
        total_bytes: 1 + 1024 * 1024,
    }
}

#[tokio::test]
async fn the_wasm_host_as_the_scorers_comparators() {
    let cache = tempfile::tempdir().unwrap();
    let host = WasmComparators(Arc::new(host(cache.path())));
    let nine = serde_json::json!({"value": "9"});

    assert_eq!(OutputComparator::validate(&host, "equals", &nine), Ok(()));
    assert!(matches!(
        OutputComparator::validate(&host, "no-such", &nine),
        Err(ComparatorRefusal::Unknown { .. })
    ));
    assert!(matches!(
        OutputComparator::validate(&host, "equals", &serde_json::json!({"valeu": "9"})),
        Err(ComparatorRefusal::InvalidParams { .. })
    ));
    let compare =
        |stream: &CapturedStream| OutputComparator::compare(&host, "equals", &nine, stream);
    assert_eq!(
        compare(&CapturedStream::complete(b"9\n".to_vec())),
        ComparatorVerdict::Match
    );
    let mut spaces = b"9".to_vec();
    spaces.extend(std::iter::repeat_n(b' ', 127));
    assert!(matches!(
        compare(&truncated(spaces)),
        ComparatorVerdict::Undetermined(_)
    ));
    let mut xs = b"8".to_vec();
    xs.extend(std::iter::repeat_n(b'x', 127));
    assert!(matches!(
        compare(&truncated(xs)),
        ComparatorVerdict::Mismatch(_)
    ));

    // End to end through the scorer.
    let client =
        ScriptedClient::new(profiles()).with_responder(|_| Ok(vec![exited_event(0, b"9\n", b"")]));
    let store = Arc::new(EvidenceStore::open_in_memory().unwrap());
    let scorer = ProgramExecutionScorer::new(
        ProgramExecutionSource::new(Arc::new(client), store),
        Arc::new(host.clone()),
    );
    let score = scorer
        .score(ScoreRequest::new(
            ProgramInput::Inline(SQUARE.to_vec()),
            expect("python", &[(&["3"], "9")]),
        ))
        .await
        .unwrap();
    assert_eq!(score.status, ScoreStatus::Complete);
    assert_eq!(score.value, Some(true));
}
