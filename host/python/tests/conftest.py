"""Shared fixtures: the image scripts/setup.sh pinned, the generated config,
and the containers a test leaves (counted through the engine)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import tomllib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]


def generated_config() -> pathlib.Path:
    return pathlib.Path(os.environ.get("PROGSCORE_CONFIG", REPO / "progscore.toml"))


@pytest.fixture(scope="session")
def image() -> str:
    """The python image as scripts/setup.sh pinned it (repo@sha256:...)."""
    with open(generated_config(), "rb") as config:
        profiles = tomllib.load(config)["profiles"]
    return str(profiles["python"]["image"])


@pytest.fixture(scope="session")
def c_image() -> str:
    """The C/C++ image as scripts/setup.sh pinned it (repo@sha256:...)."""
    with open(generated_config(), "rb") as config:
        profiles = tomllib.load(config)["profiles"]
    return str(profiles["c"]["image"])


@pytest.fixture
def config(tmp_path: pathlib.Path) -> pathlib.Path:
    """The generated config with its store moved into this test's folder."""
    text = generated_config().read_text()
    assert 'path = "progscore.db"' in text, "the generated config no longer names its store: update this fixture"
    text = text.replace('path = "progscore.db"', f'path = "{tmp_path / "evidence.db"}"')
    path = tmp_path / "progscore.toml"
    path.write_text(text)
    return path


def containers(owner: str, *filters: str) -> list[str]:
    """Names of the containers labelled with this owner, running or not
    (other progscore processes may share the engine)."""
    selection = ["--filter", f"label=progscore.owner={owner}"]
    for extra in filters:
        selection += ["--filter", extra]
    output = subprocess.run(
        ["docker", "ps", "-a", *selection, "--format", "{{.Names}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [line for line in output.splitlines() if line]
