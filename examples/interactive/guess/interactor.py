#!/usr/bin/env python3
"""Guess the number: the same judge as interactor.cpp, in Python 3.

Run as `python3 interactor.py INPUT OUTPUT ANSWER`. INPUT: "n q secret";
ANSWER: the secret again. Exit codes: 0 accepted, 1 wrong answer,
2 presentation error, 3 FAIL; the message goes to stderr.
"""
import os
import re
import signal
import sys

AC, WA, PE, FAIL = 0, 1, 2, 3
WORD = {AC: "ok", WA: "wrong answer", PE: "presentation error", FAIL: "FAIL"}
MAX_LINE = 4096
INT = re.compile(r"0|-?[1-9][0-9]{0,17}")  # the same strict integers as interact.h


def quit(verdict, msg):
    sys.stderr.write(f"{WORD[verdict]} {msg}\n")
    sys.stderr.flush()
    os._exit(verdict)


def file_ints(path, what):
    try:
        with open(path) as f:
            return [int(t) for t in f.read().split()]
    except (OSError, ValueError) as e:
        quit(FAIL, f"cannot read {what}: {e}")


def send(line):
    # Unbuffered write, so nothing is left to flush (and fail) at exit. A
    # closed pipe (program gone) is ignored: the next read_line sees EOF.
    try:
        os.write(1, (line + "\n").encode())
    except BrokenPipeError:
        pass


def read_line():
    raw = sys.stdin.buffer.readline(MAX_LINE + 1)
    if not raw:
        quit(WA, "unexpected end of the program's output")
    if not raw.endswith(b"\n") and len(raw) > MAX_LINE:
        quit(PE, f"line longer than {MAX_LINE} characters")
    return raw.rstrip(b"\n").decode("latin-1")  # any byte decodes; odd ones fail parsing below


def quoted(line):
    # Cut short, bytes outside printable ASCII shown as "." (as interact.h).
    s = "".join(c if " " <= c <= "~" else "." for c in line[:40])
    return '"' + s + ("..." if len(line) > 40 else "") + '"'


def main():
    # Python already turns SIGPIPE into BrokenPipeError; say so explicitly.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    if len(sys.argv) != 4:
        quit(FAIL, "usage: interactor INPUT OUTPUT ANSWER")
    inp = file_ints(sys.argv[1], "INPUT")
    ans = file_ints(sys.argv[3], "ANSWER")
    if len(inp) < 3 or not ans:
        quit(FAIL, "INPUT needs n q secret, ANSWER the secret")
    n, q, secret = inp[:3]
    if not (1 <= n <= 10**18 and 1 <= q <= 10**6 and 1 <= secret <= n):
        quit(FAIL, "INPUT out of range")
    if ans[0] != secret:
        quit(FAIL, "INPUT and ANSWER disagree on the secret")

    send(f"{n} {q}")
    k = 0  # queries answered so far
    while True:
        line = read_line()
        t = [s for s in re.split(r"[ \t\r]+", line) if s]
        if len(t) != 2 or t[0] not in ("?", "!") or not INT.fullmatch(t[1]):
            quit(PE, f'expected "? x" or "! x", got {quoted(line)}')
        x = int(t[1])
        if t[0] == "!":
            if x != secret:
                quit(WA, f"claimed {x}, the secret is {secret}")
            quit(AC, f"found {x} with {k} queries")
        k += 1
        if k > q:
            quit(WA, f"query limit exceeded: query {k}, limit {q}")
        if not 1 <= x <= n:
            quit(WA, f"query {x} is out of [1, {n}]")
        send("<" if secret < x else ">" if secret > x else "=")


main()
