"""The standard library a judge's preamble imports (verl, LiveCodeBench):
json, statistics, heapq, decimal, fractions, zoneinfo with its zone data,
collections, bisect, functools, itertools, re, math. Prints "ok"."""
import bisect
import collections
import datetime
import decimal
import fractions
import functools
import heapq
import itertools
import json
import math
import re
import statistics
import zoneinfo

assert json.loads(json.dumps({"a": [1, 2]})) == {"a": [1, 2]}
assert statistics.median([3, 1, 2]) == 2
assert heapq.nsmallest(2, [5, 1, 4]) == [1, 4]
assert decimal.Decimal("0.1") + decimal.Decimal("0.2") == decimal.Decimal("0.3")
assert fractions.Fraction(1, 3) * 3 == 1
paris = datetime.datetime(2024, 7, 1, 12, tzinfo=zoneinfo.ZoneInfo("Europe/Paris"))
assert paris.utcoffset() == datetime.timedelta(hours=2)
assert bisect.bisect([1, 2, 4], 3) == 2
assert collections.Counter("aab")["a"] == 2
assert functools.reduce(lambda a, b: a * b, range(1, 6)) == math.factorial(5)
assert list(itertools.accumulate([1, 2, 3])) == [1, 3, 6]
assert re.fullmatch(r"\d+", "123")
print("ok")
