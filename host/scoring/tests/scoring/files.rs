//! Files beside a program: they reach the backend with the run, they key
//! the attempt (other files, another run; the same files, the stored
//! evidence), a file in the program's place is refused with its field
//! named, and a replay or rescore with other files finds no evidence.

use progscore_sandbox::ProgramFiles;

use super::*;

/// A client that records the files of every run it was given.
fn recording() -> (Setup, Arc<std::sync::Mutex<Vec<ProgramFiles>>>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let client = ScriptedClient::new(profiles()).with_responder({
        let seen = seen.clone();
        move |request| {
            seen.lock().unwrap().push(request.files.clone());
            square_responder(request)
        }
    });
    (Setup::new(client), seen)
}

fn files(content: &str) -> ProgramFiles {
    ProgramFiles::new([("data/in.txt".to_string(), ByteString::from(content))]).unwrap()
}

fn square_beside(files: ProgramFiles) -> ScoreRequest {
    inline(SQUARE, expect("python", &[(&["3"], "9")]).with_files(files))
}

#[tokio::test]
async fn files_reach_the_backend_and_key_the_attempt() {
    let (setup, seen) = recording();
    let plain = setup
        .scorer
        .score(square_beside(ProgramFiles::default()))
        .await
        .unwrap();
    let one = setup.scorer.score(square_beside(files("1"))).await.unwrap();
    let one_again = setup.scorer.score(square_beside(files("1"))).await.unwrap();
    let two = setup.scorer.score(square_beside(files("2"))).await.unwrap();

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen, vec![ProgramFiles::default(), files("1"), files("2")]);
    assert_eq!(one_again.evidence, EvidenceUse::Stored);
    assert_eq!(one_again.observation_ids, one.observation_ids);
    assert_ne!(one.observation_ids, plain.observation_ids);
    assert_ne!(two.observation_ids, one.observation_ids);
    // The observation records the files by digest, not their bytes.
    let observation = setup
        .store
        .observation(&one.observation_ids[0])
        .unwrap()
        .unwrap();
    assert_eq!(
        observation.profile_fingerprint["files"]["data/in.txt"],
        sha256_hex(b"1")
    );
}

#[tokio::test]
async fn a_file_in_the_programs_place_is_refused_naming_it() {
    let (setup, seen) = recording();
    let source = profiles()[0]
        .program_path()
        .trim_start_matches("/sandbox/")
        .to_string();
    let clash = ProgramFiles::new([(source.clone(), ByteString::from("x"))]).unwrap();
    let err = setup.scorer.score(square_beside(clash)).await.unwrap_err();
    match err {
        ScoringError::Expectation(invalid) => assert_eq!(
            invalid.field_path(),
            format!("conditions[0].program_behaves.files.{source}")
        ),
        other => panic!("{other}"),
    }
    assert!(seen.lock().unwrap().is_empty(), "nothing ran");
    let outside = serde_json::from_value::<ScoringExpectation>(serde_json::json!({
        "conditions": [{"program_behaves": {
            "profile": "python",
            "files": {"../etc/passwd": "x"},
            "cases": [{"invocation": {"args": []}, "expected": {}}]
        }}]
    }))
    .unwrap_err();
    assert!(
        outside.to_string().contains("file `../etc/passwd`"),
        "{outside}"
    );
}

#[tokio::test]
async fn replay_and_rescore_with_other_files_find_no_evidence() {
    let (setup, _) = recording();
    let score = setup.scorer.score(square_beside(files("1"))).await.unwrap();
    let id = score.observation_ids[0].clone();
    let replay = |files: ProgramFiles| ReplayRequest {
        item_id: None,
        observation: ObservationRef::Id(id.clone()),
        expectation: expect("python", &[(&["3"], "9")]).with_files(files),
    };
    let same = setup.scorer.replayer().replay(replay(files("1"))).unwrap();
    assert_eq!(same.value, Some(true));
    for other in [files("2"), ProgramFiles::default()] {
        let err = setup.scorer.replayer().replay(replay(other)).unwrap_err();
        assert!(
            matches!(&err, ScoringError::Replay(ReplayRefusal::OtherFiles { .. })),
            "{err}"
        );
    }
    let rescore = |files: ProgramFiles| RescoreRequest {
        item_id: None,
        program: ProgramInput::Inline(SQUARE.to_vec()),
        expectation: expect("python", &[(&["3"], "9")]).with_files(files),
    };
    let found = setup
        .scorer
        .replayer()
        .rescore(rescore(files("1")))
        .unwrap();
    assert_eq!(found.score.value, Some(true));
    let other = setup
        .scorer
        .replayer()
        .rescore(rescore(files("2")))
        .unwrap();
    assert_eq!(other.score.value, None, "no evidence with those files");
}
