import sys

words = sys.stdin.read().split()
print(" ".join(reversed(words)))
