# pair-sum's checker, Codeforces' conventions as open-r1 runs them:
# checker.py INPUT ANSWER OUTPUT, prints 1 (right) or 0 (wrong).
import sys

def numbers(path):
    with open(path) as f:
        return f.read().split()

n = int(numbers(sys.argv[1])[0])
output = numbers(sys.argv[3])
right = (
    len(output) == 2
    and all(t.isdigit() for t in output)
    and int(output[0]) + int(output[1]) == n
)
print(1 if right else 0)
