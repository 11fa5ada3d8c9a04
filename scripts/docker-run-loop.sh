#!/usr/bin/env bash
# The benchmarks' baseline: one hardened `docker run` per program, with the
# same limits as progscore's default profile, JOBS at a time, output captured.
#   docker-run-loop.sh IMAGE JOBS LIST OUTDIR
# LIST has one "PROGRAM_PATH ARG INDEX" per line; outputs go to OUTDIR/out-INDEX.
set -euo pipefail
image="$1" jobs="$2" list="$3" outdir="$4"
export image outdir
xargs -P "$jobs" -L 1 sh -c '
docker run --rm --network none --log-driver none --user 65534:65534 \
  --cap-drop ALL --security-opt no-new-privileges --read-only \
  --tmpfs /tmp:rw,nosuid,nodev,size=16m --memory 256m --memory-swap 256m \
  --cpus 1 --pids-limit 64 --label progscore.owner=bench-cli-loop \
  -v "$0":/sandbox/program:ro --entrypoint python3 "$image" -I /sandbox/program "$1" \
  > "$outdir/out-$2" 2> "$outdir/err-$2"' < "$list"
