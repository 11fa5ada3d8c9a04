"""Scoring programs from Python beside ``progscore score`` on the same programs.

Each side is a whole command, timed from start to exit on a fresh store: the
CLI on a JSONL batch, and a Python process that imports progscore, builds the
items and awaits ``score_many_async`` at the CLI's default parallelism. The
two run in alternating pairs (the machine is shared and noisy); each pair's
ratio is printed, and the median. Every verdict must be True, or the run
does not count.

    pip install ./host/python        # a release build, like the CLI's
    cargo build --release -p progscore
    python host/python/benches/score_many.py [--programs 100] [--pairs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from progscore import (
    ContentScorable,
    DockerSandboxClient,
    Equals,
    EvidenceStore,
    ProgramBehaves,
    ProgramCase,
    ProgramExecutionScorer,
    ProgramExecutionSource,
    ProgramInvocation,
    ProgramResult,
    Score,
    ScoringExpectation,
    ScoringItem,
)

REPO = pathlib.Path(__file__).resolve().parents[3]


def programs(count: int) -> list[tuple[str, str, str]]:
    """(item id, program, expected stdout): distinct programs, so nothing is reused."""
    return [(f"item-{i}", f"import sys\nprint({i} * {i})  # {i}\n", str(i * i)) for i in range(count)]


def expectation(expected: str) -> ScoringExpectation:
    case = ProgramCase(invocation=ProgramInvocation(arguments=()), expected=ProgramResult(stdout=Equals(value=expected)))
    return ScoringExpectation(conditions=(ProgramBehaves(runtime_profile_name="python", cases=(case,)),))


async def score_from_python(config: pathlib.Path, count: int) -> int:
    """The Python side (run in its own process): how many verdicts were True."""
    client = DockerSandboxClient.from_config(config)
    scorer = ProgramExecutionScorer(
        source=ProgramExecutionSource(sandbox=client), memory=EvidenceStore(config.parent / "bench.db")
    )
    items = [
        ScoringItem(scorable=ContentScorable(value=program), expectation=expectation(expected), item_id=item_id)
        for item_id, program, expected in programs(count)
    ]
    results = await scorer.score_many_async(items)
    return sum(1 for result in results if isinstance(result, Score) and result.get_value() is True)


def fresh_config(folder: pathlib.Path) -> pathlib.Path:
    generated = pathlib.Path(os.environ.get("PROGSCORE_CONFIG", REPO / "progscore.toml")).read_text()
    folder.mkdir()
    config = folder / "progscore.toml"
    assert 'path = "progscore.db"' in generated, "the generated config no longer names its store"
    config.write_text(generated.replace('path = "progscore.db"', 'path = "bench.db"'))
    return config


def timed(command: list[str], cwd: pathlib.Path) -> tuple[float, str]:
    started = time.monotonic()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"{command[0]} failed ({done.returncode}):\n{done.stderr}\n{done.stdout}")
    return elapsed, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=100)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--binary", type=pathlib.Path, default=REPO / "target" / "release" / "progscore")
    parser.add_argument("--python-side", type=pathlib.Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.python_side is not None:
        print(asyncio.run(score_from_python(args.python_side, args.programs)))
        return

    jobs = 3 * (os.cpu_count() or 2)
    print(f"{args.programs} programs: Python score_many_async vs `progscore score`, both at {jobs} in flight")
    with tempfile.TemporaryDirectory() as scratch:
        root = pathlib.Path(scratch)
        ratios = []
        for pair in range(args.pairs):
            # The CLI's batch: the same programs and expectations.
            cli_config = fresh_config(root / f"cli-{pair}")
            batch = cli_config.parent / "batch.jsonl"
            batch.write_text("".join(
                json.dumps({"id": item_id, "program": program, "expectation": json.loads(expectation(expected)._json())}) + "\n"
                for item_id, program, expected in programs(args.programs)
            ))
            python_config = fresh_config(root / f"python-{pair}")
            cli = [str(args.binary), "--config", str(cli_config), "score", str(batch), "--jobs", str(jobs)]
            python = [sys.executable, __file__, "--programs", str(args.programs), "--python-side", str(python_config)]
            # Alternate which side goes first.
            order = [("cli", cli, cli_config), ("python", python, python_config)]
            if pair % 2:
                order.reverse()
            seconds = {}
            for side, command, config in order:
                elapsed, stdout = timed(command, config.parent)
                true = (
                    sum(1 for line in stdout.splitlines() if json.loads(line).get("value") is True)
                    if side == "cli"
                    else int(stdout.strip())
                )
                if true != args.programs:
                    sys.exit(f"{side}: {true} of {args.programs} verdicts were True; the run does not count")
                seconds[side] = elapsed
            ratio = seconds["python"] / seconds["cli"]
            ratios.append(ratio)
            print(
                f"pair {pair + 1}: python {seconds['python']:6.2f} s ({args.programs / seconds['python']:5.1f}/s)"
                f"   cli {seconds['cli']:6.2f} s ({args.programs / seconds['cli']:5.1f}/s)   python/cli {ratio:.3f}"
            )
        median = statistics.median(ratios)
        print(f"median python/cli {median:.3f}: overhead {100 * (median - 1):+.1f}% (target < +10%)")


if __name__ == "__main__":
    main()
