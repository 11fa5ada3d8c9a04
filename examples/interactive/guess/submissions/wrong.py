# Finds the secret by binary search, then reports it off by one: wrong answer.
n, q = map(int, input().split())
lo, hi = 1, n
while True:
    mid = (lo + hi) // 2
    print("?", mid, flush=True)  # the judge waits for the whole line
    r = input().strip()
    if r == "=":
        print("!", mid + 1)
        break
    if r == "<":
        hi = mid - 1
    else:
        lo = mid + 1
