n = int(input())
print(*((0, 0) if n == 0 else (1, n - 1)))
