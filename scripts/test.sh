#!/usr/bin/env bash
# Runs every test against the real parts: brings the environment up first
# (scripts/setup.sh is idempotent and quick when everything is there).
# Prints how long each phase took.
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

# A phase that fails is reported and the others still run (one failing test
# must not hide the Python package's results); the script fails at the end.
# `phase --required` stops everything: nothing after it can run without it.
failed=()
phase() {
    local required=false
    if [[ "$1" == "--required" ]]; then
        required=true
        shift
    fi
    local name="$1"
    shift
    local started=$SECONDS
    echo "[test] ${name}..." >&2
    if "$@"; then
        echo "[test] ${name}: $((SECONDS - started)) s" >&2
    else
        local status=$?
        echo "[test] ${name}: FAILED (status ${status}) after $((SECONDS - started)) s" >&2
        failed+=("${name}")
        if [[ "$required" == true ]]; then
            exit "$status"
        fi
    fi
}

phase --required "setup" bash scripts/setup.sh
export PROGSCORE_CONFIG="$REPO_ROOT/progscore.toml"
# The language tests need every language's image: built (mostly downloads
# and unpacking) while cargo compiles, then the config names them all. The
# engine-pool tests need a second engine beside the first, holding every
# image the config pins (quick when it is up; left running at the end, like
# the first).
export PROGSCORE_SECOND_ENGINE=unix:///run/docker-second.sock
languages_log="$(mktemp)"
{ bash scripts/setup.sh --languages all && bash scripts/second-engine.sh start; } \
    > "$languages_log" 2>&1 &
languages_pid=$!
# Formatting first: it takes a second and says at once what to fix.
phase "format" cargo fmt --all --check
# The end-to-end tests drive the built binary. Built with the features the
# tests resolve (the whole workspace, all features): `-p progscore` alone
# resolves others and compiles much of the graph a second time.
phase --required "build" cargo build --locked --workspace --all-features --bins
language_images() {
    if ! wait "$languages_pid"; then
        cat "$languages_log" >&2
        return 1
    fi
    grep -E 'built|ready|second-engine\]' "$languages_log" >&2 || true
}
phase --required "language images and the second engine (beside the build)" language_images
# The caches the tests share, warmed once beside the test build: `doctor`
# compiles the WASI module into progscore's cache and unpacks the OCI
# images (quick once done; on a fresh machine this is the one compile of
# the module, where test processes starting together would each compile
# it). A failure here is the tests' to report.
doctor_log="$(mktemp)"
target/debug/progscore doctor > "$doctor_log" 2>&1 &
doctor_pid=$!
# The test binaries are compiled first, alone: cargo holds the target
# folder's lock while it compiles, and releases it while the tests run.
phase "test build" cargo test --workspace --all-features --locked --no-run
caches() {
    wait "$doctor_pid" || echo "[test] progscore doctor: $(tail -5 "$doctor_log")" >&2
}
phase "caches (progscore doctor, beside the test build)" caches
# Beside the tests, which mostly wait on containers: the lints (a check
# build of their own, the same target folder, whose lock is free while the
# tests run) and the guests' unit tests (a workspace and target folder of
# their own). They only add CPU load, which no test may depend on the
# absence of (a timeout that load leaves unproven is undetermined, never
# wrong). Their phases are printed when the tests are done.
beside_log="$(mktemp)"
beside_failed="$(mktemp)"
(
    failed=()
    # Lints: every target, warnings are errors.
    phase "clippy" cargo clippy --workspace --all-targets --all-features --locked -- -D warnings
    # The guests' own unit tests (their workspace is apart: it builds for wasm32-wasip2).
    phase "guest unit tests" cargo test --locked --manifest-path guests/Cargo.toml --workspace
    printf '%s\n' "${failed[@]}" > "$beside_failed"
) > "$beside_log" 2>&1 &
beside_pid=$!
phase "tests" cargo test --workspace --all-features --locked --no-fail-fast "$@"
beside() {
    wait "$beside_pid" || true
    cat "$beside_log" >&2
    local name
    while IFS= read -r name; do
        if [[ -n "$name" ]]; then
            failed+=("$name")
        fi
    done < "$beside_failed"
}
# Its time is what the tests' end still waited for them.
phase "clippy and guest unit tests (beside the tests): the wait after them" beside
# The Python package: built into a cached virtual environment (with the
# workspace's dev build, so nothing is compiled twice), tested with pytest
# against the real engine; its example, tests and benchmark checked by mypy --strict.
python_package() {
    # Each step checked by hand: `set -e` does not apply inside a phase's test.
    local venv=/var/cache/progscore/venv
    if ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
        python3 -c 'import ensurepip, venv' 2>/dev/null ||
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv >/dev/null ||
            return
        rm -rf "$venv"
        python3 -m venv "$venv" || return
    fi
    "$venv/bin/pip" install -q -r host/python/requirements-test.txt || return
    PATH="$venv/bin:$PATH" MATURIN_PEP517_ARGS="--profile dev" \
        "$venv/bin/pip" install -q --no-build-isolation --force-reinstall --no-deps ./host/python ||
        return
    (cd host/python && "$venv/bin/python" -m pytest -q -p no:cacheprovider) || return
    (cd host/python && "$venv/bin/python" -m mypy --strict --cache-dir /var/cache/progscore/mypy tests benches)
}
phase "python package" python_package
echo "[test] total: $SECONDS s" >&2
if ((${#failed[@]} > 0)); then
    echo "[test] failed phases: ${failed[*]}" >&2
    exit 1
fi
