"""A process that ends right after its last await ends cleanly.

progscore's threads must not call into Python: one that does while the
interpreter shuts down is ended in the middle of Rust code, and the process
aborts. Completing asyncio futures from those threads did exactly that at
exit, about one run in ten of this script."""

from __future__ import annotations

import pathlib
import subprocess
import sys

SCRIPT = """
import asyncio, sys
from progscore import EvidenceStore

async def main() -> None:
    store = EvidenceStore(sys.argv[1])
    for _ in range(20):
        await asyncio.gather(*(store.get_scores_async() for _ in range(20)))

asyncio.run(main())
"""


def test_exiting_right_after_the_last_await_never_aborts(tmp_path: pathlib.Path) -> None:
    script = tmp_path / "exit_after_await.py"
    script.write_text(SCRIPT)
    store = tmp_path / "evidence.db"
    failures = []
    for attempt in range(100):
        ended = subprocess.run([sys.executable, str(script), str(store)], capture_output=True, text=True)
        if ended.returncode != 0:
            failures.append((attempt, ended.returncode, ended.stderr[-300:]))
    assert failures == []
