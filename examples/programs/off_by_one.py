import sys

# Meant to print 1..n, but stops one short.
n = int(sys.argv[1])
print(" ".join(str(i) for i in range(1, n)))
