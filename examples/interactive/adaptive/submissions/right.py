# Binary search, claiming as soon as one candidate is left: each query keeps
# at most floor(s / 2) of s candidates, so floor(log2 n) <= m queries.
n = int(input())
lo, hi = 1, n
while lo < hi:
    mid = (lo + hi) // 2
    print("?", mid, flush=True)
    r = input().strip()
    if r == "=":
        lo = hi = mid
    elif r == "<":
        hi = mid - 1
    else:
        lo = mid + 1
print("!", lo)
