"""The package against the real engine and the real store: WASI, sharing,
cancellation, refusals, and the CLI reading what Python wrote (and back)."""

from __future__ import annotations

import asyncio
import json
import pathlib
import subprocess
import time

import pytest

from conftest import REPO, containers
from progscore import (
    ContentScorable,
    DockerRuntimeProfile,
    DockerSandboxClient,
    Equals,
    EvidenceStore,
    InvalidExpectationError,
    ProgramBehaves,
    ProgramCase,
    ProgramExecutionScorer,
    ProgramExecutionSource,
    ProgramInvocation,
    ProgramResult,
    Regex,
    ReplayRefusedError,
    ScoringExpectation,
    ScoringItem,
)

SQUARE = "import sys\nprint(int(sys.argv[1]) ** 2)\n"


def expect(profile: str, arg: str, stdout: str) -> ScoringExpectation:
    case = ProgramCase(
        invocation=ProgramInvocation(arguments=(arg,)),
        expected=ProgramResult(stdout=Equals(value=stdout)),
    )
    return ScoringExpectation(conditions=(ProgramBehaves(runtime_profile_name=profile, cases=(case,)),))


def scorer_for(client: DockerSandboxClient, store: pathlib.Path) -> ProgramExecutionScorer:
    return ProgramExecutionScorer(source=ProgramExecutionSource(sandbox=client), memory=EvidenceStore(store))


def created_since(owner: str | None, since: float) -> int:
    """Containers labelled with this owner created since `since` (unix
    seconds), as the engine's event log tells."""
    assert owner is not None
    output = subprocess.run(
        [
            "docker", "events", "--since", f"{since:.3f}", "--until", f"{time.time():.3f}",
            "--filter", "type=container", "--filter", "event=create",
            "--filter", f"label=progscore.owner={owner}", "--format", "{{.Actor.ID}}",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return len([line for line in output.splitlines() if line])


async def test_the_example_under_wasi(config: pathlib.Path) -> None:
    client = DockerSandboxClient.from_config(config)
    assert "python-wasi" in client.get_runtime_profile_names()
    run = await client.execute_async(
        program=SQUARE, runtime_profile_name="python-wasi", invocations=(ProgramInvocation(arguments=("3",)),)
    )
    assert run.events[0].exit_code == 0
    assert run.events[0].stdout == "9\n"
    assert run.events[0].cpu_ms is not None
    scorer = scorer_for(client, config.parent / "evidence.db")
    score = (await scorer.score_async(scorable=ContentScorable(value=SQUARE), expectation=expect("python-wasi", "3", "9")))[0]
    assert score.get_value() is True, score.score_rationale
    observation = (await scorer.memory.get_observations_async(observation_ids=score.observation_ids))[0]
    replayed = (await scorer.score_observation_async(observation=observation, expectation=expect("python-wasi", "3", "8")))[0]
    assert replayed.get_value() is False
    assert replayed.observation_ids == score.observation_ids


async def test_streams_keep_their_bytes_truncation_and_size(image: str) -> None:
    client = DockerSandboxClient(profiles={
        "python": DockerRuntimeProfile(image=image, command=("python3", "-I"), output="1KiB"),
    })
    program = (
        "import sys\n"
        "sys.stdout.buffer.write(b'caf\\xe9 ' + b'x' * 5000)\n"
        "sys.stderr.write('ok')\n"
        "sys.exit(3)\n"
    )
    event = (await client.execute_async(program=program, runtime_profile_name="python", invocations=(ProgramInvocation(),))).events[0]
    assert event.exit_code == 3
    assert event.stdout_stream.data.startswith(b"caf\xe9 x")
    assert len(event.stdout_stream.data) == 1024
    assert event.stdout_stream.truncated is True
    assert event.stdout_stream.total_bytes == 5005
    assert event.stdout.startswith("caf\ufffd x")
    assert (event.stderr, event.stderr_stream.truncated, event.stderr_stream.total_bytes) == ("ok", False, 2)


async def test_a_cancelled_task_leaves_no_container(config: pathlib.Path) -> None:
    client = DockerSandboxClient.from_config(config)
    scorer = scorer_for(client, config.parent / "evidence.db")
    assert client.docker_owner is not None
    before = set(containers(client.docker_owner))
    sleeper = ContentScorable(value="import time\ntime.sleep(60)\nprint(9)\n")
    task = asyncio.create_task(scorer.score_async(scorable=sleeper, expectation=expect("python", "0", "9")))
    while not set(containers(client.docker_owner, "status=running")) - before:
        await asyncio.sleep(0.02)
    task.cancel()
    await asyncio.sleep(0)
    # Cancelled again while it waits for its cleanup: it still waits.
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The cancellation completed after the cleanup: nothing of ours is left.
    assert set(containers(client.docker_owner)) == before
    assert client.docker_workspaces is not None
    assert list(pathlib.Path(client.docker_workspaces).iterdir()) == []


async def test_two_tasks_scoring_one_attempt_share_one_container(config: pathlib.Path) -> None:
    client = DockerSandboxClient.from_config(config)
    scorer = scorer_for(client, config.parent / "evidence.db")
    since = time.time()
    program = ContentScorable(value="import time\ntime.sleep(1)\nprint(9)\n")
    first, second = await asyncio.gather(
        scorer.score_async(scorable=program, expectation=expect("python", "0", "9")),
        scorer.score_async(scorable=program, expectation=expect("python", "0", "9")),
    )
    assert first[0].observation_ids == second[0].observation_ids
    assert {first[0].evidence, second[0].evidence} == {"ran", "joined"}
    assert created_since(client.docker_owner, since - 1) == 1


async def test_a_bad_expectation_raises_before_anything_runs(config: pathlib.Path) -> None:
    client = DockerSandboxClient.from_config(config)
    scorer = scorer_for(client, config.parent / "evidence.db")
    since = time.time()
    program = ContentScorable(value=SQUARE)
    with pytest.raises(InvalidExpectationError, match="unknown profile `pyhton`"):
        await scorer.score_async(scorable=program, expectation=expect("pyhton", "3", "9"))
    bad_pattern = ScoringExpectation(conditions=(ProgramBehaves(runtime_profile_name="python", cases=(
        ProgramCase(invocation=ProgramInvocation(arguments=("3",)), expected=ProgramResult(stdout=Regex(value="(?=9)"))),
    )),))
    with pytest.raises(InvalidExpectationError, match="lookahead"):
        await scorer.score_async(scorable=program, expectation=bad_pattern)
    with pytest.raises(InvalidExpectationError, match="NUL byte"):
        await scorer.score_async(scorable=program, expectation=expect("python", "3\0", "9"))
    assert created_since(client.docker_owner, since - 1) == 0
    assert await scorer.memory.get_scores_async() == []


async def test_replay_with_other_invocations_raises_and_writes_nothing(config: pathlib.Path) -> None:
    client = DockerSandboxClient.from_config(config)
    scorer = scorer_for(client, config.parent / "evidence.db")
    score = (await scorer.score_async(scorable=ContentScorable(value=SQUARE), expectation=expect("python", "3", "9")))[0]
    observation = (await scorer.memory.get_observations_async(observation_ids=score.observation_ids))[0]
    before = len(await scorer.memory.get_scores_async())
    with pytest.raises(ReplayRefusedError, match="other invocations"):
        await scorer.score_observation_async(observation=observation, expectation=expect("python", "4", "16"))
    with pytest.raises(ReplayRefusedError, match="is not stored"):
        await scorer.memory.get_observations_async(observation_ids=["obs-0123456789abcdef"])
    assert len(await scorer.memory.get_scores_async()) == before


def progscore(config: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    binary = REPO / "target" / "debug" / "progscore"
    return subprocess.run(
        [str(binary), "--config", str(config), *args],
        capture_output=True,
        text=True,
        cwd=config.parent,
    )


def batch_line(item_id: str, expected: str) -> str:
    return json.dumps({
        "id": item_id,
        "program": SQUARE,
        "expectation": json.loads(expect("python", "3", expected)._json()),
    })


async def test_the_cli_reads_what_python_wrote_and_back(config: pathlib.Path) -> None:
    client = DockerSandboxClient.from_config(config)
    scorer = scorer_for(client, config.parent / "evidence.db")
    # Python scores; the CLI lists and re-grades it.
    await scorer.score_async(scorable=ContentScorable(value=SQUARE), expectation=expect("python", "3", "9"), item_id="from-python")
    listed = progscore(config, "scores", "list", "--item", "from-python")
    assert listed.returncode == 0, listed.stderr
    assert '"from-python"' in listed.stdout
    (config.parent / "changed.jsonl").write_text(batch_line("from-python", "8"))
    rescored = progscore(config, "rescore", "changed.jsonl")
    assert rescored.returncode == 0, rescored.stderr
    line = json.loads(rescored.stdout.splitlines()[0])
    assert (line["value"], line["changed"]) == (False, True)

    # The CLI scores; Python lists and re-grades it.
    (config.parent / "batch.jsonl").write_text(batch_line("from-cli", "9"))
    scored = progscore(config, "score", "batch.jsonl")
    assert scored.returncode == 0, scored.stderr
    scores = await scorer.memory.get_scores_async(item_id="from-cli")
    assert [s.get_value() for s in scores] == [True]
    regraded = (await scorer.rescore_async(scorable=ContentScorable(value=SQUARE), expectation=expect("python", "3", "8"), item_id="from-cli"))[0]
    assert regraded.get_value() is False
    assert regraded.observation_ids == scores[0].observation_ids


async def test_many_programs_are_scored_with_a_bound(config: pathlib.Path) -> None:
    client = DockerSandboxClient.from_config(config)
    scorer = scorer_for(client, config.parent / "evidence.db")
    items = [
        ScoringItem(scorable=ContentScorable(value=f"print({i} * {i})  # {i}\n"), expectation=expect("python", "0", str(i * i)), item_id=f"item-{i}")
        for i in range(8)
    ] + [ScoringItem(scorable=ContentScorable(value=SQUARE), expectation=expect("nope", "3", "9"))]
    results = await scorer.score_many_async(items, max_concurrency=3)
    assert [getattr(r, "value", None) for r in results[:8]] == [True] * 8
    assert isinstance(results[8], InvalidExpectationError)
    assert [getattr(r, "item_id", None) for r in results[:8]] == [f"item-{i}" for i in range(8)]


async def test_a_checker_judges_answers_and_a_fraction_scores_the_cases(config: pathlib.Path) -> None:
    client = DockerSandboxClient.from_config(config)
    scorer = scorer_for(client, config.parent / "evidence.db")
    cases = tuple(
        ProgramCase(invocation=ProgramInvocation(arguments=(arg,)), expected=ProgramResult(answer=answer))
        for arg, answer in (("1", "yes"), ("2", "NO"), ("3", "yes"))
    )
    behaves = ProgramBehaves(runtime_profile_name="python", cases=cases, checker="yes_no", score={"policy": "fraction"})
    # Yes for odd numbers, in its own case: the checker takes yes and no in any case; 3 is wrong.
    program = ContentScorable(value="import sys\nprint('Yes' if int(sys.argv[1]) == 1 else 'no')\n")
    score = (await scorer.score_async(scorable=program, expectation=ScoringExpectation(conditions=(behaves,))))[0]
    assert score.status == "complete", score.score_rationale
    assert score.value is False
    assert score.score is not None and abs(score.score - 2 / 3) < 1e-9, score.score
    assert [case.matched for case in score.cases] == [True, True, False]
    assert score.cases[2].detail is not None and "judged wrong by the checker" in score.cases[2].detail


INTERACTOR = """import sys
secret = int(open(sys.argv[1]).read())
for queries in range(1, 9):
    line = sys.stdin.readline().split()
    if not line:
        print("wrong answer unexpected end of the program's output", file=sys.stderr)
        sys.exit(1)
    if line[0] == "!":
        ok = int(line[1]) == secret
        print("ok found it" if ok else "wrong answer not the secret", file=sys.stderr)
        sys.exit(0 if ok else 1)
    guess = int(line[1])
    print("=" if guess == secret else ("<" if secret < guess else ">"), flush=True)
print("wrong answer query limit exceeded", file=sys.stderr)
sys.exit(1)
"""

SEARCH = """lo, hi = 1, 100
while True:
    mid = (lo + hi) // 2
    print("?", mid, flush=True)
    answer = input().strip()
    if answer == "=":
        print("!", mid, flush=True)
        break
    lo, hi = (lo, mid - 1) if answer == "<" else (mid + 1, hi)
"""


async def test_an_interactor_judges_a_conversation_kept_as_evidence(config: pathlib.Path) -> None:
    client = DockerSandboxClient.from_config(config)
    scorer = scorer_for(client, config.parent / "evidence.db")
    cases = tuple(
        ProgramCase(invocation=ProgramInvocation(stdin=secret), expected=ProgramResult(answer=secret))
        for secret in ("37", "100")
    )
    interactor = {"profile": "python", "source": INTERACTOR}
    behaves = ProgramBehaves(runtime_profile_name="python", cases=cases, interactor=interactor)
    expectation = ScoringExpectation(conditions=(behaves,))
    right = (await scorer.score_async(scorable=ContentScorable(value=SEARCH), expectation=expectation))[0]
    assert right.status == "complete", right.score_rationale
    assert right.value is True, right.cases
    assert right.cases[0].checker == "ok found it"
    # Guessing linearly runs past the query limit: the interactor says so.
    linear = "for x in range(1, 101):\n    print('?', x, flush=True)\n    if input() == '=':\n        print('!', x); break\n"
    wrong = (await scorer.score_async(scorable=ContentScorable(value=linear), expectation=expectation))[0]
    assert wrong.value is False
    assert wrong.cases[0].detail is not None and "query limit exceeded" in wrong.cases[0].detail


def test_a_tagged_image_is_refused() -> None:
    with pytest.raises(InvalidExpectationError, match="not pinned"):
        DockerSandboxClient(profiles={"python": DockerRuntimeProfile(image="python:3.12", command=("python3",))})
