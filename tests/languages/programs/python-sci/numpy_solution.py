"""A judge-style solution that uses numpy: the sum of squares of the numbers
on stdin, and a 2x2 solve. Prints "ok"."""
import sys

import numpy as np

values = np.array([int(x) for x in sys.stdin.read().split()], dtype=np.int64)
assert int((values**2).sum()) == 14
solution = np.linalg.solve(np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([3.0, 5.0]))
assert np.allclose(solution, [0.8, 1.4])
print("ok")
