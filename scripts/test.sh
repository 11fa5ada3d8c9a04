#!/usr/bin/env bash
# Runs every test against the real parts: brings the environment up first
# (scripts/setup.sh is idempotent and quick when everything is there).
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"
bash scripts/setup.sh
export PROGSCORE_CONFIG="$REPO_ROOT/progscore.toml"
# The end-to-end tests drive the built binary.
cargo build --locked -p progscore
cargo test --workspace --all-features --locked --no-fail-fast "$@"
