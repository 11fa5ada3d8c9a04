#!/usr/bin/env python3
"""Removes the workspace's own build artifacts from a cargo target profile
folder (`target/debug`), keeping the compiled dependencies.

Used by scripts/test.sh on the target folder it shares between clones: a
clone at another path gives the workspace's crates other hashes, so their
artifacts would pile up; the dependencies' are the same for every clone.
Removing an artifact only ever makes cargo compile it again.
"""

import json
import pathlib
import shutil
import subprocess
import sys


def workspace_names() -> tuple[set[str], set[str]]:
    """The workspace's package names and its targets' artifact stems."""
    metadata = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
            check=True,
            capture_output=True,
        ).stdout
    )
    packages = {package["name"] for package in metadata["packages"]}
    targets = {
        target["name"].replace("-", "_")
        for package in metadata["packages"]
        for target in package["targets"]
    }
    return packages, targets


def stem(name: str) -> str:
    """`libprogscore_sandbox-1a2b.rlib` -> `progscore_sandbox`."""
    base = name.split(".", 1)[0]
    if base.startswith("lib"):
        base = base[3:]
    return base.rsplit("-", 1)[0]


def main() -> int:
    profile = pathlib.Path(sys.argv[1])
    if not profile.is_dir():
        return 0
    packages, targets = workspace_names()
    removed = 0
    for folder, names in ((".fingerprint", packages), ("build", packages)):
        for entry in (profile / folder).glob("*"):
            if entry.name.rsplit("-", 1)[0] in names:
                shutil.rmtree(entry, ignore_errors=True)
                removed += 1
    for entry in (profile / "deps").glob("*"):
        if stem(entry.name) in targets:
            entry.unlink(missing_ok=True)
            removed += 1
    shutil.rmtree(profile / "incremental", ignore_errors=True)
    print(f"[test] shared target folder: {removed} artifacts of the workspace's own crates removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
