# Linear scan from 1: needs `secret` queries, so it passes only when the
# secret is at most q (test 01) and exceeds the query limit otherwise.
n, q = map(int, input().split())
for x in range(1, n + 1):
    print("?", x, flush=True)
    if input().strip() == "=":  # EOFError (exit 1) once the judge has quit
        print("!", x)
        break
