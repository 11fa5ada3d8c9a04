# Asks one query, then crashes (SIGABRT, 134, as crash.cpp) without reading
# the answer: the judge's answer may meet a closed pipe, then it sees EOF.
import os

input()
print("? 1", flush=True)  # os.abort() does not flush
os.abort()
