//! Closed pipes: a program that exits without reading its stdin gets its
//! verdict on every backend, and progscore survives it; only a closed
//! standard output of progscore itself ends progscore (quietly).

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use progscore_e2e::{Dir, result_lines, stderr, verdict};

/// Every backend the generated config has: Docker runc and gVisor, OCI runc
/// and runsc, WASI.
const PROFILES: [&str; 5] = [
    "python",
    "python-gvisor",
    "python-oci",
    "python-oci-gvisor",
    "python-wasi",
];

/// Far more than any pipe buffer holds (64 KiB), so the write is still
/// going on when the program has exited.
const STDIN_BYTES: usize = 4 * 1024 * 1024;

fn item(id: String, profile: &str, program: &str, expected: serde_json::Value) -> String {
    serde_json::json!({
        "id": id,
        "program": program,
        "expectation": {"conditions": [{"program_behaves": {"profile": profile, "cases": [
            {"invocation": {"args": [], "stdin": "x".repeat(STDIN_BYTES)}, "expected": expected}]}}]},
    })
    .to_string()
}

#[test]
fn programs_that_exit_without_reading_megabytes_of_stdin_get_their_verdicts_on_every_backend() {
    let dir = Dir::new();
    let mut lines = Vec::new();
    for profile in PROFILES {
        for copy in 0..2 {
            // A syntax error: the interpreter never reads stdin.
            lines.push(item(
                format!("{profile}-syntax-{copy}"),
                profile,
                &format!("# {copy}\nprint(\n"),
                serde_json::json!({"stderr": {"contains": "SyntaxError"}, "exit_code": 1}),
            ));
            // Prints and exits at once.
            lines.push(item(
                format!("{profile}-prints-{copy}"),
                profile,
                &format!("# {copy}\nprint(7)\n"),
                serde_json::json!({"stdout": {"equals": "7"}}),
            ));
            // Reads a little, then exits.
            lines.push(item(
                format!("{profile}-reads-{copy}"),
                profile,
                &format!("# {copy}\nimport sys\nprint(len(sys.stdin.read(10)))\n"),
                serde_json::json!({"stdout": {"equals": "10"}}),
            ));
        }
    }
    dir.write("batch.jsonl", lines.join("\n"));
    let output = dir.run(&[
        "score",
        "batch.jsonl",
        "--jobs",
        "4",
        "--out",
        "results.jsonl",
    ]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "progscore ended with {:?}: {}",
        output.status,
        stderr(&output)
    );
    let results = result_lines(&std::fs::read_to_string(dir.path().join("results.jsonl")).unwrap());
    assert_eq!(results.len(), lines.len(), "{}", stderr(&output));
    for line in &results {
        assert_eq!(verdict(line), "true", "{line}");
    }
}

/// `progscore ... | head`: a reader that has gone away ends progscore as a
/// closed pipe ends other tools, by SIGPIPE, with nothing on stderr (no
/// panic, no error paragraph).
#[test]
fn a_closed_standard_output_ends_progscore_quietly() {
    let dir = Dir::new();
    let mut ends = [0; 2];
    // SAFETY: pipe writes two descriptors into an array of two.
    assert_eq!(
        unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) },
        0
    );
    // SAFETY: both descriptors are fresh and owned here alone.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
    // The reader is gone before progscore writes its first line.
    drop(read_end);
    let output = dir
        .command()
        .args(["profiles"])
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::piped())
        .output()
        .expect("run progscore");
    assert_eq!(output.status.signal(), Some(libc::SIGPIPE), "{output:?}");
    assert_eq!(stderr(&output), "");
}
