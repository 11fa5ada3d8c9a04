# Binary search that stops early, once at most 3 candidates are left, and
# claims the smallest: wrong answer (2 or 3 candidates remain; halving s >= 4
# never jumps straight to 1, so this happens on every test with n >= 2).
n = int(input())
lo, hi = 1, n
while hi - lo + 1 > 3:
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
