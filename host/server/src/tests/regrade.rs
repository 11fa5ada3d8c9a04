//! Re-grading through the server (`/v1/replay`, `/v1/rescore`) writes a
//! score under an item id only for that item's own program: a client cannot
//! put an unrelated verdict at the top of another item's history.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{Served, post_lines, prints_ok};

fn expectation() -> Value {
    json!({"conditions": [{"program_behaves": {"profile": "python", "cases": [
        {"invocation": {"args": []}, "expected": {"stdout": {"equals": "ok"}}}
    ]}}]})
}

fn line(id: &str, program: &str) -> Value {
    json!({"id": id, "program": program, "expectation": expectation()})
}

/// How many scores the store holds for `item`.
fn scores_of(served: &Served, item: &str) -> usize {
    let filter = progscore_scoring::evidence::ScoreFilter {
        item_id: Some(item.to_string()),
        ..Default::default()
    };
    served
        .state
        .session()
        .replayer
        .store()
        .list_scores(&filter)
        .expect("the scores")
        .len()
}

#[tokio::test]
async fn a_replay_or_rescore_never_puts_another_programs_verdict_on_an_item() {
    let served = Served::new("", prints_ok, Duration::ZERO).await;
    // Two items, each scored with its own program.
    let (status, lines) = post_lines(
        &served,
        "/v1/batches",
        &[
            line("mine", "print('ok')"),
            line("theirs", "print('ok')  # theirs"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{lines:?}");
    let observation_of = |id: &str| {
        lines
            .iter()
            .find(|l| l["id"] == id)
            .and_then(|l| l["observation_ids"][0].as_str())
            .map(String::from)
            .unwrap_or_else(|| panic!("no observation for {id}: {lines:?}"))
    };
    let theirs = observation_of("theirs");
    let mine = observation_of("mine");

    // Replaying the other item's evidence under "mine" is refused, and
    // nothing is written.
    let (status, _, body) = served
        .post(
            "/v1/replay",
            json!({"observation_id": theirs, "expectation": expectation(), "id": "mine"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["field"], "id", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`mine` was scored with another program")),
        "{body}"
    );
    assert_eq!(scores_of(&served, "mine"), 1);

    // An empty id names nothing.
    let (status, _, body) = served
        .post(
            "/v1/replay",
            json!({"observation_id": mine, "expectation": expectation(), "id": " "}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["field"], "id", "{body}");

    // Its own evidence re-grades it.
    let (status, _, body) = served
        .post(
            "/v1/replay",
            json!({"observation_id": mine, "expectation": expectation(), "id": "mine"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["value"], true, "{body}");
    assert_eq!(scores_of(&served, "mine"), 2);

    // A rescore line with another program under "mine" is a refused line;
    // the other lines are re-graded.
    let (status, lines) = post_lines(
        &served,
        "/v1/rescore",
        &[
            line("mine", "print('ok')  # theirs"),
            line("theirs", "print('ok')  # theirs"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{lines:?}");
    let refused = lines
        .iter()
        .find(|l| l["id"] == "mine")
        .expect("mine's line");
    assert_eq!(refused["field"], "id", "{refused}");
    let regraded = lines.iter().find(|l| l["id"] == "theirs").expect("theirs");
    assert_eq!(regraded["value"], true, "{regraded}");
    assert_eq!(scores_of(&served, "mine"), 2, "nothing written for mine");
    assert_eq!(scores_of(&served, "theirs"), 2);
    // Nothing ran for any of it.
    assert_eq!(served.runs(), 2);
}
