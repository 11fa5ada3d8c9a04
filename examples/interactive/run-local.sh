#!/usr/bin/env bash
# Runs each (interactor, submission, test) pair of the expected tables on the
# host, no sandbox: the two processes joined by plain pipes (two FIFOs), each
# under a 5 s timeout. Exits 1 if any pair's interactor exit code (or program
# exit code, or the start of the interactor's message, where the table gives
# them) differs from the table, or a pair takes 2 s or more.
#
# Tables, per problem: expected.tsv for interactor.cpp and interactor.py,
# expected.<name>.tsv for <name>.cpp (e.g. expected.interactor-crash.tsv).
# Columns: submission, test, interactor exit, program exit ('*' = any),
# optionally what the interactor's stderr starts with.
set -u
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ulimit -c 0  # crash tests abort(); leave no core files
SLOW_MS=2000

# Compile every .cpp at once: g++ -O2 -std=c++17.
srcs=() pids=()
for src in "$here"/*/*.cpp "$here"/*/submissions/*.cpp; do
    rel=${src#"$here"/}
    mkdir -p "$work/bin/$(dirname "$rel")"
    g++ -O2 -std=c++17 -I "$here" -o "$work/bin/${rel%.cpp}" "$src" 2>"$work/bin/${rel%.cpp}.log" &
    srcs+=("$rel") pids+=($!)
done
for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
        echo "compile failed: ${srcs[$i]}"; cat "$work/bin/${srcs[$i]%.cpp}.log"; exit 1
    fi
done

cmd_of() {  # the command line running a source (path relative to $here) -> CMD
    case $1 in
        *.py) CMD=(python3 "$here/$1") ;;
        *.cpp) CMD=("$work/bin/${1%.cpp}") ;;
    esac
}

pairs=0 bad=() slowest=0 slowest_pair=
run_pair() {  # problem interactor submission test want_ic want_pc want_msg
    local p=$1 inter=$2 sub=$3 t=$4 want_ic=$5 want_pc=$6 want_msg=$7
    local d="$work/run" icmd pcmd ipid ppid ic pc start ms msg line problems=
    rm -rf "$d" && mkdir "$d" && mkfifo "$d/to_prog" "$d/to_inter"
    cmd_of "$p/$inter"; icmd=("${CMD[@]}")
    cmd_of "$p/submissions/$sub"; pcmd=("${CMD[@]}")
    start=$(date +%s%N)
    # Opening a FIFO blocks until its other end opens, so both sides open
    # to_inter first, then to_prog; the shell keeps no end open, so each side
    # sees EOF (or SIGPIPE) as soon as the other exits.
    timeout -k 1 5 "${pcmd[@]}" >"$d/to_inter" <"$d/to_prog" 2>"$d/prog.err" &
    ppid=$!
    timeout -k 1 5 "${icmd[@]}" "$here/$p/tests/$t.in" /dev/null "$here/$p/tests/$t.ans" \
        <"$d/to_inter" >"$d/to_prog" 2>"$d/inter.err" &
    ipid=$!
    wait "$ipid" 2>/dev/null; ic=$?  # 2>/dev/null: no "Aborted" notice from bash
    wait "$ppid" 2>/dev/null; pc=$?
    ms=$((($(date +%s%N) - start) / 1000000))
    msg=$(head -n 1 "$d/inter.err")

    [[ $ic == "$want_ic" ]] || problems+=" interactor exit $ic, want $want_ic;"
    [[ $want_pc == '*' || $pc == "$want_pc" ]] || problems+=" program exit $pc, want $want_pc;"
    [[ -z $want_msg || $msg == "$want_msg"* ]] || problems+=" message, want \"$want_msg...\";"
    ((ms < SLOW_MS)) || problems+=" took $ms ms;"
    line=$(printf '%-8s %-16s %s (%s): interactor %3d, program %3d, %4d ms: %s' \
        "$p" "$sub" "$t" "$inter" "$ic" "$pc" "$ms" "$msg")
    echo "$line${problems:+  <-- MISMATCH:$problems}"
    [[ -z $problems ]] || bad+=("$line  <--$problems")
    ((pairs++))
    ((ms <= slowest)) || { slowest=$ms; slowest_pair="$p $sub $t ($inter)"; }
}

for pdir in "$here"/*/; do
    p=$(basename "$pdir")
    for isrc in "$pdir"interactor*.cpp "$pdir"interactor*.py; do
        [[ -e $isrc ]] || continue
        inter=$(basename "$isrc") name=${inter%.*}
        [[ $name == interactor ]] && table="$pdir/expected.tsv" || table="$pdir/expected.$name.tsv"
        [[ -f $table ]] || { echo "no table $table for $p/$inter"; exit 1; }
        while IFS=$'\t' read -r sub t want_ic want_pc want_msg; do
            [[ -z $sub || $sub == \#* ]] && continue
            run_pair "$p" "$inter" "$sub" "$t" "$want_ic" "$want_pc" "${want_msg:-}"
        done <"$table"
    done
done

echo
echo "summary: $pairs pairs, ${#bad[@]} mismatches; slowest $slowest ms: $slowest_pair"
for b in "${bad[@]}"; do echo "  $b"; done
((${#bad[@]} == 0))
