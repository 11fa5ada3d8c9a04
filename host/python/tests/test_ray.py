"""progscore.ray on a real Ray cluster on this machine: a head (no CPUs, so
no programs) and two worker nodes, each its own raylet. What a user of a
cluster would notice: programs on both nodes with every verdict right, a
rerun that reuses the evidence, a node killed mid-batch, containers killed
or removed from outside, a driver stopped by SIGTERM or killed outright, two drivers at once under one cap, a node that cannot run a
profile."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

from progscore import (  # noqa: E402
    ContentScorable,
    Equals,
    EvidenceStore,
    ProgramBehaves,
    ProgramCase,
    ProgramInvocation,
    ProgramResult,
    Score,
    ScoringExpectation,
    ScoringItem,
)
from progscore.ray import NAMESPACE, NODE_CONFIG_ENV, NodeStats, RayScorer  # noqa: E402

from conftest import REPO, containers  # noqa: E402

JOBS_PER_NODE = 2
# Enough 8 s programs that both nodes are still running some when the
# driver is stopped.
SIGTERM_ITEMS = 48


@pytest.fixture
def cluster() -> Iterator[tuple[Cluster, list[Any]]]:
    """A head without CPUs and two one-CPU worker nodes; this process is
    the driver."""
    cluster = Cluster(
        initialize_head=True,
        connect=True,
        head_node_args={"num_cpus": 0, "include_dashboard": False},
    )
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    try:
        yield cluster, workers
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]


def sleeper(index: int, seconds: float) -> ScoringItem:
    """A right program that takes ``seconds`` (each its own attempt)."""
    program = f"import sys, time\n# item {index}\ntime.sleep(float(sys.argv[1]))\nprint('ok')\n"
    case = ProgramCase(
        invocation=ProgramInvocation(arguments=(str(seconds),)),
        expected=ProgramResult(stdout=Equals(value="ok")),
    )
    expectation = ScoringExpectation(conditions=[ProgramBehaves(runtime_profile_name="python", cases=[case])])
    return ScoringItem(scorable=ContentScorable(value=program), expectation=expectation, item_id=f"sleeper-{index}")


def observations(store: pathlib.Path) -> list[str]:
    with sqlite3.connect(store) as db:
        return [row[0] for row in db.execute("SELECT id FROM observations")]


async def stats_of_every_node() -> list[NodeStats]:
    from ray.util import list_named_actors

    found = []
    for entry in list_named_actors(all_namespaces=True):
        if entry["namespace"] == NAMESPACE:
            value = await ray.get_actor(entry["name"], namespace=NAMESPACE).stats.remote()
            found.append(NodeStats(**{k: value[k] for k in NodeStats.__dataclass_fields__}))
    return found


def expected_verdicts() -> dict[str, str]:
    verdicts = {}
    for line in (REPO / "examples" / "expected-verdicts.txt").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.startswith("#"):
            verdicts[parts[0]] = parts[1]
    return verdicts


def run_cli(config: pathlib.Path, address: str, batch: pathlib.Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "progscore.ray", "score", str(batch), "--address", address, "--config", str(config), *extra],
        capture_output=True,
        text=True,
        timeout=600,
    )


def with_cpu_limits(config: pathlib.Path) -> None:
    """Gives the profiles a CPU-time limit below their wall-clock one: the
    example batch's infinite loop is documented `false`, a proven timeout,
    which only a CPU-time limit gives on a busy machine (under the
    wall-clock limit alone a starved loop is rightly left undetermined)."""
    text = config.read_text()
    assert 'timeout = "10s"' in text, "the generated config's limits changed: update this helper"
    config.write_text(text.replace('timeout = "10s"', 'timeout = "10s"\ncpu_time = "3s"'))


def unproven_timeouts_aside(stdout: str) -> tuple[dict[str, str], set[str]]:
    """The verdicts, each documented `false` that a busy machine left
    undetermined as an unproven timeout counted as `false`, and those ids:
    the honest answer of a machine that starved the loop, never a wrong one."""
    verdicts, unproven = {}, set()
    expected = expected_verdicts()
    for line in map(json.loads, stdout.splitlines()):
        word = {True: "true", False: "false", None: "undetermined"}[line["value"]]
        if word == "undetermined" and expected.get(line["id"]) == "false" and line.get("reason_kind") == "unconfirmed_timeout":
            word = "false"
            unproven.add(line["id"])
        verdicts[line["id"]] = word
    return verdicts, unproven


def verdicts_of(stdout: str) -> dict[str, str]:
    words = {True: "true", False: "false", None: "undetermined"}
    return {line["id"]: words[line["value"]] for line in map(json.loads, stdout.splitlines())}


async def test_the_example_batch_runs_on_both_workers_with_every_verdict_right_and_a_rerun_reuses_it(
    cluster: tuple[Cluster, list[Any]], config: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    head, _ = cluster
    with_cpu_limits(config)
    batch = REPO / "examples" / "batch.jsonl"
    # This process holds the node runtimes between the two commands, to read
    # their figures.
    async with RayScorer(config=config) as holder:
        first = await asyncio.to_thread(run_cli, config, head.address, batch)
        assert first.returncode == 0, first.stderr
        verdicts, unproven = unproven_timeouts_aside(first.stdout)
        assert verdicts == expected_verdicts()
        # The same summary as `progscore score`.
        assert "  true                19" in first.stderr, first.stderr
        assert "programs/s" in first.stderr
        served = {stats.node_id: stats.served for stats in await holder.node_stats()}
        assert len(served) == 2 and all(count > 0 for count in served.values()), served

        stored = observations(tmp_path / "evidence.db")
        again = await asyncio.to_thread(run_cli, config, head.address, batch)
        assert again.returncode == 0, again.stderr
        assert unproven_timeouts_aside(again.stdout)[0] == expected_verdicts()
        # Every decided verdict is reused; an unproven one runs again.
        reran = {line["id"] for line in map(json.loads, again.stdout.splitlines()) if line["evidence"] != "stored"}
        assert reran <= unproven, (reran, unproven)
        if not unproven:
            assert sorted(observations(tmp_path / "evidence.db")) == sorted(stored), "a rerun stores nothing new"
        # Only preflights (and the reruns) reached the nodes the second time.
        after = {stats.node_id: stats.served for stats in await holder.node_stats()}
        assert sum(after.values()) - sum(served.values()) <= 2 * 4 + len(unproven), (served, after)
    # The last driver gone, no runtime of progscore stays on the cluster.
    await runtimes_gone()


async def runtimes_gone() -> None:
    """Waits until no progscore runtime is left on the cluster (fails after
    a minute rather than hang)."""
    from ray.util import list_named_actors

    for _ in range(600):
        if not [e for e in list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"progscore runtimes left on the cluster: {list_named_actors(all_namespaces=True)}")


async def test_a_worker_killed_mid_batch_leaves_no_false_and_no_duplicate_and_the_batch_completes(
    cluster: tuple[Cluster, list[Any]], config: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    head, workers = cluster
    items = [sleeper(index, 2.0) for index in range(16)]
    async with RayScorer(config=config, jobs_per_node=JOBS_PER_NODE) as scorer:
        batch = asyncio.ensure_future(scorer.score_many_async(items))
        # Wait until the first worker's runtime is running programs.
        victim_id = workers[0].node_id
        while True:
            stats = {s.node_id: s for s in await scorer.node_stats()}
            if victim_id in stats and stats[victim_id].running > 0:
                break
            await asyncio.sleep(0.1)
        victim_owner = stats[victim_id].docker_owner
        head.remove_node(workers[0], allow_graceful=False)
        results = await batch
        assert list(scorer.lost_nodes) == [victim_id], "the killed node's runs failed and ran again"

    assert all(isinstance(result, Score) for result in results), results
    values = [result.value for result in results if isinstance(result, Score)]
    assert False not in values, [r for r in results]
    assert values.count(True) == len(items), [(r.item_id, r.value, r.reason) for r in results if isinstance(r, Score)]
    ids = [result.observation_ids[0] for result in results if isinstance(result, Score)]
    assert len(set(ids)) == len(items)
    assert sorted(observations(tmp_path / "evidence.db")) == sorted(set(ids)), "each attempt stored once"
    # What the killed node's runtime left is removed by the next progscore
    # that reaches the engine (its owner is provably gone).
    from progscore import DockerSandboxClient

    local = DockerSandboxClient.from_config(config)
    await local.execute_async(program="print(1)\n", runtime_profile_name="python", invocations=[ProgramInvocation()])
    assert victim_owner is not None
    assert containers(victim_owner) == []


async def test_containers_killed_or_removed_from_outside_give_no_false_and_a_rerun_completes(
    cluster: tuple[Cluster, list[Any]], config: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """`docker kill` and `docker rm -f` of containers a node runs for the
    driver: the struck programs are undetermined (never false), nothing of a
    struck run is stored, and the same batch scored again is all true."""
    items = [sleeper(index, 1.5) for index in range(12)]
    struck: list[str] = []
    async with RayScorer(config=config, jobs_per_node=JOBS_PER_NODE) as scorer:
        batch = asyncio.ensure_future(scorer.score_many_async(items))
        while not batch.done() and len(struck) < 4:
            for node in await scorer.node_stats():
                running = containers(node.docker_owner, "status=running") if node.docker_owner else []
                for name in running[:1]:
                    if name in struck:
                        continue
                    # Alternately killed and removed, as another user of the engine might.
                    action = ["kill"] if len(struck) % 2 == 0 else ["rm", "-f"]
                    if subprocess.run(["docker", *action, name], capture_output=True).returncode == 0:
                        struck.append(name)
            await asyncio.sleep(0.05)
        results = await batch
    assert len(struck) >= 2, f"no container was caught running: {struck}"
    scores = [result for result in results if isinstance(result, Score)]
    assert len(scores) == len(items), results
    assert False not in [score.value for score in scores], [(s.item_id, s.value, s.reason) for s in scores]
    undetermined = [score for score in scores if score.value is None]
    assert undetermined, "a struck program was scored as if its run were whole"
    for score in undetermined:
        assert score.reason_kind == "sandbox_error", (score.item_id, score.reason)
    # Only whole runs are evidence: the rerun runs the struck programs again
    # and reuses the rest.
    stored = set(observations(tmp_path / "evidence.db"))
    async with RayScorer(config=config, jobs_per_node=JOBS_PER_NODE) as scorer:
        again = await scorer.score_many_async(items)
    rescored = [result for result in again if isinstance(result, Score)]
    assert [score.value for score in rescored] == [True] * len(items), again
    reused = {score.observation_ids[0] for score in rescored} & stored
    assert len(reused) == len(items) - len(undetermined)


def test_sigterm_of_the_driver_cancels_every_run_and_leaves_nothing_on_any_node(
    cluster: tuple[Cluster, list[Any]], config: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    head, _ = cluster
    batch = tmp_path / "sleepers.jsonl"
    with batch.open("w") as lines:
        for index in range(SIGTERM_ITEMS):
            item = sleeper(index, 8.0)
            line = {
                "id": item.item_id,
                "program": item.scorable.value,
                "expectation": json.loads(item.expectation._json()),
            }
            lines.write(json.dumps(line) + "\n")
    driver = subprocess.Popen(
        [sys.executable, "-m", "progscore.ray", "score", str(batch), "--address", head.address, "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Wait until both nodes run programs in containers.
        while True:
            assert driver.poll() is None, driver.communicate()
            stats = asyncio.run(_stats_when_started(driver))
            owners = [s.docker_owner for s in stats]
            if len(stats) == 2 and all(owner and containers(owner, "status=running") for owner in owners):
                break
        workspaces = [s.docker_workspaces for s in stats]
        driver.send_signal(signal.SIGTERM)
        stdout, stderr = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 128 + signal.SIGTERM, stderr
    # What finished before the signal stands; the rest was cancelled.
    finished = verdicts_of(stdout)
    assert set(finished.values()) <= {"true"}, finished
    assert f"SIGTERM: {SIGTERM_ITEMS - len(finished)} item(s) not scored" in stderr, stderr
    assert len(finished) < SIGTERM_ITEMS
    assert "Traceback" not in stderr, stderr
    for owner, workspace in zip(owners, workspaces):
        assert owner is not None and containers(owner) == []
        # Emptied by the cancelled runs, removed with the runtime itself.
        assert workspace is not None and (not os.path.exists(workspace) or os.listdir(workspace) == [])
    asyncio.run(runtimes_gone())
    # What is stored is whole runs only: the finished items', and a run that
    # ended just as the signal came (its evidence stands, reused by a rerun);
    # nothing of a cancelled run.
    with sqlite3.connect(tmp_path / "evidence.db") as db:
        runs = [json.loads(row[0]) for row in db.execute("SELECT run FROM observations")]
    assert len(runs) >= len(finished)
    for run in runs:
        assert [(e["outcome"], e.get("exit_code"), e["stdout"]["data"]) for e in run["events"]] == [("exited", 0, "ok\n")], run


def test_a_driver_killed_outright_leaves_no_runtime_once_its_runs_have_ended(
    cluster: tuple[Cluster, list[Any]], config: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    head, _ = cluster
    batch = tmp_path / "sleepers.jsonl"
    with batch.open("w") as lines:
        for index in range(6):
            item = sleeper(200 + index, 3.0)
            entry = {"id": item.item_id, "program": item.scorable.value, "expectation": json.loads(item.expectation._json())}
            lines.write(json.dumps(entry) + "\n")
    driver = subprocess.Popen(
        [sys.executable, "-m", "progscore.ray", "score", str(batch), "--address", head.address, "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while True:
            assert driver.poll() is None, driver.communicate()
            stats = asyncio.run(_stats_when_started(driver))
            owners = [s.docker_owner for s in stats]
            if len(stats) == 2 and all(owner and containers(owner, "status=running") for owner in owners):
                break
        driver.kill()
        driver.wait()
    finally:
        if driver.poll() is None:
            driver.kill()
    # Nobody detaches, nobody runs `stop`: the runtimes see their driver's
    # job dead and end by themselves, after its runs.
    asyncio.run(runtimes_gone())
    logs = pathlib.Path(ray._private.worker._global_node.get_session_dir_path()) / "logs"
    ended: dict[str, str] = {}
    for log in logs.glob("worker-*.out"):
        for line in log.read_text(errors="replace").splitlines():
            if "progscore.ray runtime on node " in line and ": ended: " in line:
                node = line.split("progscore.ray runtime on node ")[1].split(":")[0]
                ended[node] = line
    assert len(ended) == 2, ended
    for before in stats:
        line = ended[before.node_id[:12]]
        assert "no live driver holds it" in line, line
        # Every run in flight when the driver died was served to its end.
        served = int(line.split("served ")[1].split(",")[0])
        assert "running 0" in line and served >= before.served + before.running, (line, before)
        assert before.docker_owner is not None and containers(before.docker_owner) == []


async def _stats_when_started(driver: subprocess.Popen[str] | None = None) -> list[NodeStats]:
    """The node runtimes' figures once the driver has placed them."""
    while True:
        assert driver is None or driver.poll() is None, "the driver ended before it placed the node runtimes"
        try:
            stats = await stats_of_every_node()
        except ValueError:
            stats = []
        if stats:
            return stats
        await asyncio.sleep(0.1)


async def test_two_drivers_at_once_share_one_cap(
    cluster: tuple[Cluster, list[Any]], config: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    head, _ = cluster
    batches = []
    for driver in range(2):
        batch = tmp_path / f"batch-{driver}.jsonl"
        with batch.open("w") as lines:
            for index in range(10):
                item = sleeper(100 * driver + index, 1.0)
                line = {
                    "id": item.item_id,
                    "program": item.scorable.value,
                    "expectation": json.loads(item.expectation._json()),
                }
                lines.write(json.dumps(line) + "\n")
        batches.append(batch)
    # This process places the runtimes (JOBS_PER_NODE each) and holds them
    # to read their figures; the two drivers ask for more.
    async with RayScorer(config=config, jobs_per_node=JOBS_PER_NODE) as holder:
        outputs = await asyncio.gather(
            *(asyncio.to_thread(run_cli, config, head.address, batch, "--jobs-per-node", "8") for batch in batches)
        )
        for done in outputs:
            assert done.returncode == 0, done.stderr
            assert set(verdicts_of(done.stdout).values()) == {"true"}
        stats = await holder.node_stats()
    assert len(stats) == 2
    # Each driver keeps the cluster's whole capacity in flight (it asked for
    # 8 per node, the runtimes already had 2): the two together offer twice
    # the cap, and the nodes never ran more than it.
    assert all(s.capacity == JOBS_PER_NODE and s.peak <= JOBS_PER_NODE for s in stats), stats
    assert max(s.peak for s in stats) == JOBS_PER_NODE, stats
    assert sum(s.served for s in stats) >= 20


def test_a_node_that_cannot_run_a_profile_gets_none_of_its_programs(
    cluster: tuple[Cluster, list[Any]], config: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    head, _ = cluster
    with_cpu_limits(config)
    # A bad line is named and the good ones are scored (as `progscore score`).
    batch = tmp_path / "batch.jsonl"
    shutil.copytree(REPO / "examples" / "programs", tmp_path / "programs")
    lines = (REPO / "examples" / "batch.jsonl").read_text().splitlines()
    lines.insert(3, '{"id": "bad", "program": "print(1)", "expectation": {"conditions": [{"program_behaves": {"profile": "nope", "cases": []}}]}}')
    batch.write_text("\n".join(lines) + "\n")
    text = config.read_text()
    image = text.split("[profiles.python]", 1)[1].split('image = "', 1)[1].split('"', 1)[0]
    missing = image.split("@", 1)[0] + "@sha256:" + "0" * 64
    broken = tmp_path / "broken-node.toml"
    broken.write_text(text.replace(image, missing))
    third = head.add_node(num_cpus=1, env_vars={NODE_CONFIG_ENV: str(broken)})
    head.wait_for_nodes()
    result = run_cli(config, head.address, batch)
    assert result.returncode == 2, result.stderr
    assert f"progscore: {batch}:4: field `expectation." in result.stderr, result.stderr
    assert "  bad lines            1" in result.stderr, result.stderr
    assert unproven_timeouts_aside(result.stdout)[0] == expected_verdicts()
    short = third.node_id[:12]
    assert f"node {short} cannot run profile `python`" in result.stderr, result.stderr
    assert "not present" in result.stderr

    # The synchronous twin, in this process, on the same cluster.
    from progscore.ray import score_many

    results = score_many([sleeper(0, 0.1), sleeper(1, 0.1)], config=config)
    assert [r.value for r in results if isinstance(r, Score)] == [True, True], results


def test_a_failed_store_stops_the_batch_once_as_progscore_score_does(
    cluster: tuple[Cluster, list[Any]], config: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    head, _ = cluster
    store = tmp_path / "evidence.db"
    EvidenceStore(store)  # the store's tables, as the driver would make them
    # The store stops taking scores, as a full or failing disk would.
    with sqlite3.connect(store) as db:
        db.execute("CREATE TRIGGER test_store_fails BEFORE INSERT ON scores BEGIN SELECT RAISE(FAIL, 'disk I/O error'); END")
    batch = tmp_path / "batch.jsonl"
    batch.write_text("".join(json.dumps({
        "id": f"item-{i}", "program": f"print({i})",
        "expectation": {"conditions": [{"program_behaves": {"profile": "python", "cases": [
            {"invocation": {"args": []}, "expected": {"exit_code": 0}}]}}]},
    }) + "\n" for i in range(40)))
    result = run_cli(config, head.address, batch)
    assert result.returncode == 2, result.stderr
    # Said once, and the batch stopped: the items left were not run.
    assert result.stderr.count("disk I/O error") == 1, result.stderr
    assert "stopped: the evidence store failed" in result.stderr, result.stderr
    assert result.stdout == "", "no result line without its score stored"
    # The items never started are counted as not scored, not run.
    not_scored = [line for line in result.stderr.splitlines() if line.strip().startswith("not scored")]
    assert not_scored and int(not_scored[0].split()[-1]) > 30, result.stderr


DOUBLER = "import sys\nn = int(open(sys.argv[1]).read())\nprint(n, flush=True)\nok = sys.stdin.readline().strip() == str(2 * n)\nsys.exit(0 if ok else 1)\n"


async def test_an_interactive_item_runs_whole_on_a_node(
    cluster: tuple[Cluster, list[Any]], config: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """The program and its interactor travel together: one node runs both
    sides and the driver judges the conversation."""
    head, _ = cluster
    lines = []
    for item_id, program in (("right", "print(2 * int(input()), flush=True)\n"), ("wrong", "print(int(input()))\n")):
        behaves = {
            "profile": "python",
            "interactor": {"profile": "python", "source": DOUBLER},
            "cases": [{"invocation": {"stdin": "21"}, "expected": {"exit_code": 0}}],
        }
        lines.append(json.dumps({"id": item_id, "program": program, "expectation": {"conditions": [{"program_behaves": behaves}]}}))
    batch = tmp_path / "interactive.jsonl"
    batch.write_text("\n".join(lines) + "\n")
    done = await asyncio.to_thread(run_cli, config, head.address, batch)
    assert done.returncode == 0, done.stderr
    assert verdicts_of(done.stdout) == {"right": "true", "wrong": "false"}, done.stdout
    await runtimes_gone()
