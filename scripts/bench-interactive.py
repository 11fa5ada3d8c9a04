#!/usr/bin/env python3
"""Interactive runs' cost, beside baselines measured in the same run.

1. Round trips per second between a program and its interactor through
   `progscore score` (two containers, the conversation pumped by progscore),
   from the case's own transcript, beside the same two Python processes
   joined by plain pipes on the host.
2. An interactive item's total cost (`progscore score`, wall time) beside the
   same program scored on stdin/stdout (its whole input given at once).

Usage: scripts/bench-interactive.py [PROGSCORE] (default target/release/progscore,
else target/debug/progscore); PROGSCORE_CONFIG as for any run.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

ROUNDS = 2000
REPEATS = 3

PROGRAM = """import sys
for line in sys.stdin:
    if line.strip() == "done":
        break
    print(int(line) * 2, flush=True)
"""

INTERACTOR = """import sys
n = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else int(open(sys.argv[1]).read())
for i in range(1, n + 1):
    print(i, flush=True)
    if sys.stdin.readline().strip() != str(2 * i):
        sys.exit(1)
print("done", flush=True)
print("ok", file=sys.stderr)
"""


def binary():
    if len(sys.argv) > 1:
        return sys.argv[1]
    for build in ("release", "debug"):
        path = os.path.join(os.path.dirname(__file__), "..", "target", build, "progscore")
        if os.path.exists(path):
            return path
    sys.exit("build progscore first")


def plain_pipe_seconds(folder, rounds=ROUNDS):
    program = os.path.join(folder, "program.py")
    interactor = os.path.join(folder, "interactor.py")
    open(program, "w").write(PROGRAM)
    open(interactor, "w").write(INTERACTOR)
    start = time.monotonic()
    judge = subprocess.Popen(
        ["python3", interactor, str(rounds)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    solver = subprocess.Popen(["python3", program], stdin=judge.stdout, stdout=judge.stdin)
    judge.stdout.close()
    judge.stdin.close()
    solver.wait()
    judge.wait()
    assert judge.returncode == 0, "the plain pair disagreed"
    return time.monotonic() - start


def item(interactive, rounds, profile):
    behaves = {"profile": profile, "limits": {"timeout": "60s"}}
    if interactive:
        behaves["interactor"] = {"profile": profile, "source": INTERACTOR}
        behaves["cases"] = [{"invocation": {"stdin": str(rounds)}, "expected": {"answer": "-"}}]
    else:
        stdin = "".join(f"{i}\n" for i in range(1, rounds + 1)) + "done\n"
        expected = "".join(f"{2 * i}\n" for i in range(1, rounds + 1))
        behaves["cases"] = [{"invocation": {"stdin": stdin},
                             "expected": {"stdout": {"equals": expected}}}]
    return {"id": "bench", "program": PROGRAM,
            "expectation": {"conditions": [{"program_behaves": behaves}]}}


def score(progscore, folder, line, name):
    batch = os.path.join(folder, f"{name}.jsonl")
    open(batch, "w").write(json.dumps(line) + "\n")
    store = os.path.join(folder, f"{name}.db")
    env = dict(os.environ)
    start = time.monotonic()
    done = subprocess.run([progscore, "score", "--fresh", batch], cwd=folder, env=env,
                          capture_output=True, text=True)
    seconds = time.monotonic() - start
    lines = [json.loads(l) for l in done.stdout.splitlines() if l.startswith("{")]
    assert lines and lines[0]["status"] == "complete" and lines[0]["value"] is True, done.stdout + done.stderr
    return seconds, lines[0], store


def transcript_seconds(folder, result):
    """The conversation's own length, from the stored transcript: its
    first write to its last (both sandboxes' start taken out)."""
    shown = subprocess.run(
        [binary(), "observations", "show", result["observation_ids"][0]],
        cwd=folder, capture_output=True, text=True)
    observation = json.loads(shown.stdout)
    transcript = observation["run"]["interaction"]["transcripts"][0]
    turns = transcript["turns"]
    return (turns[-1]["at_us"] - turns[0]["at_us"]) / 1e6


def main():
    progscore = binary()
    with tempfile.TemporaryDirectory() as folder:
        # The conversation alone: two processes' start taken out.
        started = min(plain_pipe_seconds(folder, 0) for _ in range(REPEATS))
        pipe = min(plain_pipe_seconds(folder) for _ in range(REPEATS)) - started
        print(f"round trips: {ROUNDS} per case, best of {REPEATS}")
        print(f"  plain pipe on the host:      {ROUNDS / pipe:10.0f} round trips/s ({pipe:.3f} s)")
        for profile in PROFILES:
            measure(progscore, folder, profile, pipe)


PROFILES = os.environ.get("BENCH_PROFILES", "python,python-oci").split(",")


def measure(progscore, folder, profile, pipe):
    if True:
        conversations, interactive_totals, plain_totals = [], [], []
        for _ in range(REPEATS):
            seconds, result, _ = score(progscore, folder, item(True, ROUNDS, profile), "interactive")
            interactive_totals.append(seconds)
            try:
                conversations.append(transcript_seconds(folder, result))
            except (KeyError, ValueError, IndexError) as error:
                print(f"(no transcript figure: {error})")
            seconds, _, _ = score(progscore, folder, item(False, ROUNDS, profile), "plain")
            plain_totals.append(seconds)
        if conversations:
            best = min(conversations)
            print(f"  {profile:>12}, two sandboxes: {ROUNDS / best:10.0f} round trips/s ({best:.3f} s)"
                  f"  ratio {best / pipe:.2f}x")
        it, pl = min(interactive_totals), min(plain_totals)
        print(f"  {profile:>12} item total (score --fresh): interactive {it:.2f} s, same program on stdin {pl:.2f} s"
              f"  ratio {it / pl:.2f}x")


if __name__ == "__main__":
    main()
