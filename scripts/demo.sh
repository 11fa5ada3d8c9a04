#!/usr/bin/env bash
# One command on a fresh machine: set everything up, build progscore, and
# score the example batch (results on stdout, summary on stderr).
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"
bash scripts/setup.sh
cargo build --release --locked -p progscore
exec ./target/release/progscore --config progscore.toml score examples/batch.jsonl "$@"
