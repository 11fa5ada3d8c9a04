# Binary search: at most floor(log2 n) + 1 queries, within q = ceil(log2 n) + 1.
n, q = map(int, input().split())
lo, hi = 1, n
while True:
    mid = (lo + hi) // 2
    print("?", mid, flush=True)  # the judge waits for the whole line
    r = input().strip()
    if r == "=":
        print("!", mid)
        break
    if r == "<":
        hi = mid - 1
    else:
        lo = mid + 1
