#!/usr/bin/env bash
# The benchmarks' baseline for compiled languages: per program one hardened
# `docker run` that compiles it into a fresh build folder, then one hardened
# `docker run` per case with that folder read-only, JOBS programs at a time.
# Sources, commands and limits are those of the language's profile in the
# progscore.toml scripts/setup.sh writes.
#   docker-compile-run-loop.sh LANG IMAGE JOBS LIST OUTDIR
# LANG: c, cpp, rust, go, java or javascript (nothing to compile: cases only).
# LIST has one "PROGRAM_PATH INDEX ARG..." per line: one case per ARG (that
# one argument, empty stdin). Outputs: OUTDIR/compile-INDEX (compiler's
# stdout+stderr and exit code), OUTDIR/out-INDEX-K and err-INDEX-K per case.
set -euo pipefail
lang="$1" image="$2" jobs="$3" list="$4" outdir="$5"
export lang image outdir

compile_and_run() {
    local program="$1" index="$2"
    shift 2
    local source compile=() command=() c_mem c_pids c_tmp c_timeout r_mem r_pids
    r_mem=256m r_pids=64
    case "$lang" in
        c) source=main.c
           compile=(gcc -O2 -std=c17 -o /build/main /sandbox/main.c -lm)
           command=(/build/main); c_mem=512m c_pids=32 c_tmp=64m c_timeout=30 ;;
        cpp) source=main.cpp
           compile=(g++ -O2 -std=c++17 -o /build/main /sandbox/main.cpp)
           command=(/build/main); c_mem=512m c_pids=32 c_tmp=64m c_timeout=30 ;;
        rust) source=main.rs
           compile=(rustc --edition 2021 -O -C codegen-units=1 -o /build/main /sandbox/main.rs)
           command=(/build/main); c_mem=512m c_pids=32 c_tmp=64m c_timeout=60 ;;
        go) source=main.go
           compile=(env GOMAXPROCS=1 GOCACHE=/tmp/go-cache HOME=/tmp CGO_ENABLED=0
                    go build -o /build/main /sandbox/main.go)
           command=(env GOMAXPROCS=1 /build/main); c_mem=512m c_pids=64 c_tmp=64m c_timeout=60 ;;
        java) source=Main.java
           compile=(javac -J-XX:+UseSerialGC -J-XX:TieredStopAtLevel=1 -J-Xmx256m -J-Xss8m
                    -J-XX:-UsePerfData -d /build /sandbox/Main.java)
           command=(java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xmx128m -Xss8m
                    -XX:-UsePerfData -XX:ActiveProcessorCount=1 -cp /build Main)
           c_mem=512m c_pids=32 c_tmp=64m c_timeout=60 ;;
        javascript) source=main.js
           command=(node --max-old-space-size=128 /sandbox/main.js) ;;
        *) echo "unknown language: $lang" >&2; return 2 ;;
    esac
    # --rm on timeout is not enough: a stopped `timeout` leaves the container
    # running, so every container is named and killed when its time is up.
    harden=(--rm --network none --log-driver none --user 65534:65534
            --cap-drop ALL --security-opt no-new-privileges --read-only
            --cpus 1 --label progscore.owner=bench-cli-loop
            -v "$program":/sandbox/$source:ro)
    local build
    build="$(mktemp -d "$outdir/build-$index-XXXXXX")"
    chown 65534:65534 "$build" 2>/dev/null || chmod 0777 "$build"
    if [ "${#compile[@]}" -gt 0 ]; then
        local name="bench-compile-$index-$$"
        timeout -k 2 "$c_timeout" docker run "${harden[@]}" --name "$name" \
            --tmpfs /tmp:rw,nosuid,nodev,size=$c_tmp --memory $c_mem --memory-swap $c_mem \
            --pids-limit $c_pids -v "$build":/build --entrypoint "${compile[0]}" \
            "$image" "${compile[@]:1}" < /dev/null > "$outdir/compile-$index" 2>&1
        local rc=$?
        [ $rc -lt 124 ] || docker kill "$name" >/dev/null 2>&1
        echo "exit $rc" >> "$outdir/compile-$index"
        if [ $rc -ne 0 ]; then
            rm -rf "$build"
            return 0
        fi
    fi
    local k=0 arg
    for arg in "$@"; do
        k=$((k + 1))
        local name="bench-run-$index-$k-$$"
        timeout -k 2 10 docker run "${harden[@]}" --name "$name" \
            --tmpfs /tmp:rw,nosuid,nodev,size=16m --memory $r_mem --memory-swap $r_mem \
            --pids-limit $r_pids -v "$build":/build:ro --entrypoint "${command[0]}" \
            "$image" "${command[@]:1}" "$arg" \
            < /dev/null > "$outdir/out-$index-$k" 2> "$outdir/err-$index-$k" \
            || { [ $? -lt 124 ] || docker kill "$name" >/dev/null 2>&1; }
    done
    rm -rf "$build"
}
export -f compile_and_run

xargs -P "$jobs" -L 1 bash -c 'set +e; compile_and_run "$@"' _ < "$list"
