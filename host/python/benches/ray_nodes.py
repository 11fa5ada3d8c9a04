"""The same batch on one Ray node and on two, beside ``progscore score``.

One Ray cluster on this machine: a head without CPUs, one worker node with
every CPU (resource ``one-node``), and two worker nodes with half the CPUs
each (resource ``two-nodes``). Each round scores the same distinct programs
three ways, each on a fresh store and timed as a whole command: ``progscore
score``, ``python -m progscore.ray score --node-resource one-node``, and the
same with ``two-nodes``. The sides alternate their order per round (the
machine is shared and noisy); the ratios per round and their medians are
printed. No speed-up is possible on one machine: two nodes must cost at most
10% over one. Every verdict must be True, or the run does not count.

    pip install './host/python[ray]'
    cargo build -p progscore          # the CLI beside it (or --binary)
    python host/python/benches/ray_nodes.py [--programs 120] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from ray.cluster_utils import Cluster

REPO = pathlib.Path(__file__).resolve().parents[3]


def batch_text(count: int) -> str:
    """Distinct programs (nothing is reused), each with one case."""
    lines = []
    for i in range(count):
        expectation = {
            "conditions": [
                {
                    "program_behaves": {
                        "profile": "python",
                        "cases": [{"invocation": {"args": []}, "expected": {"stdout": {"equals": str(i * i)}}}],
                    }
                }
            ]
        }
        program = f"print({i} * {i})  # {i}\n"
        lines.append(json.dumps({"id": f"item-{i}", "program": program, "expectation": expectation}))
    return "\n".join(lines) + "\n"


def fresh_config(folder: pathlib.Path) -> pathlib.Path:
    generated = pathlib.Path(os.environ.get("PROGSCORE_CONFIG", REPO / "progscore.toml")).read_text()
    folder.mkdir()
    config = folder / "progscore.toml"
    assert 'path = "progscore.db"' in generated, "the generated config no longer names its store"
    config.write_text(generated.replace('path = "progscore.db"', f'path = "{folder / "bench.db"}"'))
    return config


def timed(command: list[str], programs: int) -> float:
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[:4])} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    true = sum(1 for line in done.stdout.splitlines() if json.loads(line).get("value") is True)
    if true != programs:
        sys.exit(f"{' '.join(command[:4])}: {true} of {programs} verdicts were True; the run does not count")
    return elapsed


def default_binary() -> pathlib.Path:
    release = REPO / "target" / "release" / "progscore"
    return release if release.is_file() else REPO / "target" / "debug" / "progscore"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--programs", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--binary", type=pathlib.Path, default=default_binary())
    args = parser.parse_args()

    cpus = os.cpu_count() or 2
    half = max(1, cpus // 2)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    cluster.add_node(num_cpus=cpus, resources={"one-node": 1})
    for _ in range(2):
        cluster.add_node(num_cpus=half, resources={"two-nodes": 1})
    cluster.wait_for_nodes()
    print(
        f"{args.programs} programs per side; one node of {cpus} CPUs vs two of {half}; "
        f"`progscore score` ({args.binary.relative_to(REPO) if args.binary.is_relative_to(REPO) else args.binary})"
    )
    ratios: dict[str, list[float]] = {"two/one": [], "one/cli": [], "two/cli": []}
    try:
        with tempfile.TemporaryDirectory() as scratch:
            root = pathlib.Path(scratch)
            for round_index in range(args.rounds):
                sides: dict[str, list[str]] = {}
                for side in ("cli", "one", "two"):
                    config = fresh_config(root / f"{side}-{round_index}")
                    batch = config.parent / "batch.jsonl"
                    batch.write_text(batch_text(args.programs))
                    if side == "cli":
                        sides[side] = [str(args.binary), "--config", str(config), "score", str(batch)]
                    else:
                        resource = "one-node" if side == "one" else "two-nodes"
                        sides[side] = [
                            sys.executable, "-m", "progscore.ray", "score", str(batch),
                            "--address", cluster.address, "--config", str(config), "--node-resource", resource,
                        ]
                order = ["cli", "one", "two"]
                order = order[round_index % 3:] + order[: round_index % 3]
                seconds = {side: timed(sides[side], args.programs) for side in order}
                ratios["two/one"].append(seconds["two"] / seconds["one"])
                ratios["one/cli"].append(seconds["one"] / seconds["cli"])
                ratios["two/cli"].append(seconds["two"] / seconds["cli"])
                print(
                    f"round {round_index + 1}: cli {seconds['cli']:6.2f} s   one node {seconds['one']:6.2f} s   "
                    f"two nodes {seconds['two']:6.2f} s   two/one {ratios['two/one'][-1]:.3f}   "
                    f"one/cli {ratios['one/cli'][-1]:.3f}"
                )
    finally:
        cluster.shutdown()  # type: ignore[no-untyped-call]
    medians = {name: statistics.median(values) for name, values in ratios.items()}
    print(
        f"median two/one {medians['two/one']:.3f} (overhead {100 * (medians['two/one'] - 1):+.1f}%, target <= +10%); "
        f"one/cli {medians['one/cli']:.3f}; two/cli {medians['two/cli']:.3f}"
    )


if __name__ == "__main__":
    main()
