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

# A fresh clone (no `target` folder, no CARGO_TARGET_DIR) builds in a
# target folder kept in the machine's cache, so that the dependencies an
# earlier run compiled (wasmtime and cranelift at opt-level 3, SQLite, ...:
# most of a cold build) are compiled once per machine, like the images. The
# workspace's own crates are compiled afresh every run: their artifacts are
# removed first (a clone elsewhere names them differently, so they would
# only pile up), and incremental compilation is off (a whole build gains
# nothing from it and writes gigabytes). One run at a time uses the folder.
SHARED_TARGET=/var/cache/progscore/cargo-target
SHARED_TARGET_LOCK=/var/cache/progscore/cargo-target.run-lock
SHARED_GUESTS_TARGET=/var/cache/progscore/guests-target
if [[ -z "${CARGO_TARGET_DIR:-}" && ! -e target && ! -L target ]]; then
    mkdir -p "$SHARED_TARGET"
    if [[ "${PROGSCORE_SHARED_TARGET_HELD:-}" != 1 ]]; then
        if ! flock -n "$SHARED_TARGET_LOCK" true; then
            echo "[test] another test run holds $SHARED_TARGET: waiting for it" >&2
        fi
        # The run again, under the lock, which flock holds until the run
        # ends; `-o` keeps its descriptor out of the run's processes, so an
        # engine this run starts (and leaves running) never holds it after.
        PROGSCORE_SHARED_TARGET_HELD=1 exec flock -o "$SHARED_TARGET_LOCK" \
            bash "$REPO_ROOT/scripts/test.sh" "$@"
    fi
    ln -s "$SHARED_TARGET" target
    export CARGO_INCREMENTAL=0
    python3 scripts/prune-target.py "$SHARED_TARGET/debug" >&2
    # The guests' own workspace (their unit tests, beside the tests) alike.
    if [[ ! -e guests/target && ! -L guests/target ]]; then
        mkdir -p "$SHARED_GUESTS_TARGET"
        ln -s "$SHARED_GUESTS_TARGET" guests/target
        (cd guests && python3 ../scripts/prune-target.py "$SHARED_GUESTS_TARGET/debug" >&2)
    fi
fi

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
# Everything is compiled once, here: the binaries the end-to-end tests
# drive, the libraries (the Python extension among them) and the test
# binaries, with the features the tests resolve (the whole workspace, all
# features, dev-dependencies included: building the binaries alone resolves
# other features, and the test build then compiled much of the graph a
# second time).
phase --required "build (binaries, libraries and tests, once)" \
    cargo build --locked --workspace --all-features --bins --lib --tests
language_images() {
    if ! wait "$languages_pid"; then
        cat "$languages_log" >&2
        return 1
    fi
    grep -E 'built|ready|second-engine\]' "$languages_log" >&2 || true
}
phase --required "language images and the second engine (beside the build)" language_images
# The caches the tests share, warmed once before them: `doctor` compiles
# the WASI module into progscore's cache and unpacks the OCI images (quick
# once done; on a fresh machine this is the one compile of the module,
# where test processes starting together would each compile it). A failure
# here is the tests' to report.
caches() {
    target/debug/progscore doctor > "$1" 2>&1 || echo "[test] progscore doctor: $(tail -5 "$1")" >&2
}
phase "caches (progscore doctor)" caches "$(mktemp)"
# Beside the tests: the lints (a check build of their own, the same target
# folder) and the guests' unit tests (a workspace and target folder of
# their own). They only add CPU load, which no test may depend on the
# absence of (a timeout that load leaves unproven is undetermined, never
# wrong), but load still costs time: they start with the Python package's
# tests, which mostly wait (34 s of CPU in 148 s, and no cargo lock), not
# with the language batch, which keeps both CPUs busy for six minutes.
# Their phases are printed when the tests are done.
beside_log="$(mktemp)"
beside_failed="$(mktemp)"
beside_pid=""
start_beside() {
    [[ -n "$beside_pid" ]] && return
    (
        failed=()
        # Lints: every target, warnings are errors.
        phase "clippy" cargo clippy --workspace --all-targets --all-features --locked -- -D warnings
        # The guests' own unit tests (their workspace is apart: it builds for wasm32-wasip2).
        phase "guest unit tests" cargo test --locked --manifest-path guests/Cargo.toml --workspace
        printf '%s\n' "${failed[@]}" > "$beside_failed"
    ) > "$beside_log" 2>&1 &
    beside_pid=$!
}
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
    # The package as it is installed (its Python files and the extension),
    # put together from the workspace's build: the extension is the build's
    # own `lib_native.so` (the `--lib` of the build phase, features as the
    # workspace resolves them), so nothing is compiled again for it. The
    # venv finds it through a .pth file; an installed wheel is removed first.
    local package="$REPO_ROOT/target/python-package" site
    rm -rf "$package" && mkdir -p "$package" || return
    cp -r host/python/python/progscore "$package/" || return
    cp target/debug/lib_native.so "$package/progscore/_native.so" || return
    site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" || return
    "$venv/bin/pip" uninstall -q -y progscore 2>/dev/null || true
    echo "$package" > "$site/progscore-workspace.pth" || return
    (cd host/python && "$venv/bin/python" -m pytest -q -p no:cacheprovider) || return
    (cd host/python && "$venv/bin/python" -m mypy --strict --cache-dir /var/cache/progscore/mypy tests benches)
}
# The test binaries run in TEST_LANES lanes side by side (1 by default:
# on this 2-core machine a fresh-clone run with 3 lanes, load average ~25,
# left loops' timeouts unproven and verl's 20 s reads timed out, each the
# honest answer of an overloaded machine but not the tests' point; the
# Python package's tests beside the language batch, tried, took 583 s
# instead of 137), the longest first, each
# binary's output kept in a log of its own and printed when it ends (whole
# when it failed). The Python package's tests are one of them. The outage
# tests stop the engines themselves, so they run alone, after the others.
# With arguments (a test's name, `-- --ignored`...), one `cargo test` with
# them, as before.
TEST_LANES="${TEST_LANES:-1}"
CARGO_TEST=(cargo test --workspace --all-features --locked --no-fail-fast)
# Longest first (seconds on a fresh clone of the 2-core machine, roughly):
# the order only decides how evenly the lanes end.
TEST_JOBS=(
    "e2e (languages, pipes, signals, kills):--test e2e -- languages:: pipes:: signals:: kills::"
    "e2e (the rest):--test e2e -- --skip languages:: --skip pipes:: --skip signals:: --skip kills::"
    "serve:--test serve"
    "python package:python"
    "conformance:--test conformance"
    "load:--test load"
    "docker engine:--test engine"
    "wasi:--test wasi"
    "behaviour:--test behaviour"
    "oci:--test oci"
    "unit tests:--lib --bins"
    "doc tests:--doc"
    "oci image:--test image"
    "comparators:--test all --test wasm_comparators"
    "scoring and evidence:--test scoring --test evidence --test gather"
)
test_job() {
    local spec="$1"
    if [[ "$spec" == python ]]; then
        python_package
    else
        # shellcheck disable=SC2086 # the spec is cargo's target flags
        "${CARGO_TEST[@]}" $spec
    fi
}
tests_in_lanes() {
    local logs
    logs="$(mktemp -d)"
    local -A started=() names=()
    local status=0 index=0 running=0 pid job name
    report() {
        local pid="$1" code="$2" name="${names[$1]}"
        local took=$((SECONDS - started[$1]))
        if ((code == 0)); then
            # With any test that ran over a minute, named (libtest says so).
            grep -E 'running for over' "$logs/$pid.log" >&2 || true
            grep -E '^test result:|passed|failed' "$logs/$pid.log" | tail -3 >&2 || true
            echo "[test] tests: ${name}: ${took} s ($(grep -E '^\[cpu\]' "$logs/$pid.log" | tail -1 | cut -c7-))" >&2
        else
            cat "$logs/$pid.log" >&2
            echo "[test] tests: ${name}: FAILED (status ${code}) after ${took} s" >&2
            status=1
        fi
    }
    start_job() {
        job="$1"
        name="${job%%:*}"
        if [[ "${job#*:}" == python ]]; then
            start_beside
        fi
        # The CPU its own processes used (containers' not counted: the
        # engine runs them), printed with its time to tell waiting from work.
        (
            TIMEFORMAT='[cpu] %U s user, %S s system'
            time test_job "${job#*:}"
        ) > "$logs/next.log" 2>&1 &
        pid=$!
        mv "$logs/next.log" "$logs/$pid.log"
        started[$pid]=$SECONDS
        names[$pid]="$name"
        echo "[test] tests: ${name}: started" >&2
    }
    while ((index < ${#TEST_JOBS[@]} || running > 0)); do
        while ((index < ${#TEST_JOBS[@]} && running < TEST_LANES)); do
            start_job "${TEST_JOBS[$index]}"
            index=$((index + 1))
            running=$((running + 1))
        done
        # Only this pool's jobs (the lints beside are another's).
        local code=0 done_pid=""
        wait -n -p done_pid "${!names[@]}" || code=$?
        running=$((running - 1))
        report "$done_pid" "$code"
        unset "names[$done_pid]"
    done
    echo "[test] tests: outage (alone): started" >&2
    local alone=$SECONDS
    if "${CARGO_TEST[@]}" --test outage > "$logs/outage.log" 2>&1; then
        grep -E '^test result:' "$logs/outage.log" >&2 || true
        echo "[test] tests: outage: $((SECONDS - alone)) s" >&2
    else
        cat "$logs/outage.log" >&2
        echo "[test] tests: outage: FAILED after $((SECONDS - alone)) s" >&2
        status=1
    fi
    rm -rf "$logs"
    return "$status"
}
if (($# > 0)); then
    start_beside
    phase "tests" "${CARGO_TEST[@]}" "$@"
    phase "python package" python_package
else
    phase "tests (${TEST_LANES} lanes)" tests_in_lanes
fi
beside() {
    start_beside
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
echo "[test] total: $SECONDS s" >&2
if ((${#failed[@]} > 0)); then
    echo "[test] failed phases: ${failed[*]}" >&2
    exit 1
fi
