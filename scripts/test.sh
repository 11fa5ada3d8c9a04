#!/usr/bin/env bash
# Runs every test against the real parts: brings the environment up first
# (scripts/setup.sh is idempotent and quick when everything is there).
# Prints how long each phase took.
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

phase() {
    local name="$1"
    shift
    local started=$SECONDS
    echo "[test] ${name}..." >&2
    "$@"
    echo "[test] ${name}: $((SECONDS - started)) s" >&2
}

phase "setup" bash scripts/setup.sh
export PROGSCORE_CONFIG="$REPO_ROOT/progscore.toml"
# The end-to-end tests drive the built binary.
phase "build" cargo build --locked -p progscore
phase "tests" cargo test --workspace --all-features --locked --no-fail-fast "$@"
# The guests' own unit tests (their workspace is apart: it builds for wasm32-wasip2).
phase "guest unit tests" cargo test --locked --manifest-path guests/Cargo.toml --workspace
