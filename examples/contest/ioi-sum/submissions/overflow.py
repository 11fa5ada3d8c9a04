n = int(input())
s = sum(map(int, input().split()[:n])) & 0xFFFFFFFF
print(s - (1 << 32) if s >= 1 << 31 else s)
