"""The published clients' own limits, applied by `progscore serve`.

Usage: python limits_clients.py ENDPOINT VERL_UTILS_PY

The server under test serves the python profile with a 2 s wall-clock limit
and 256 MiB of memory. Each limit is checked both ways, so that a server
that ignored it fails one of the two:

- the `sandbox-fusion` SDK's `run_timeout`: a program that sleeps 3 s times
  out under run_timeout=1, and finishes under run_timeout=6 (past the
  profile's 2 s);
- `memory_limit_MB` (sent by verl's call_sandbox_api; the SDK's model has
  no such field): a program holding ~200 MB is killed at 64, and passes
  under the profile's 256 MiB (-1);
- the `judge0` SDK's `cpu_time_limit`: a loop that burns 1.5 s of CPU is
  Time Limit Exceeded under 0.5 s, and Accepted under 5 s (with
  wall_time_limit=10 both times, past the profile's 2 s).

Prints one line per check; exits non-zero on the first wrong conclusion.
"""

import importlib.util
import sys

import judge0
import sandbox_fusion
from judge0 import Client, Status
from sandbox_fusion import RunCodeRequest, RunStatus, run_code
from sandbox_fusion.models import CommandRunStatus

ENDPOINT, VERL_UTILS = sys.argv[1], sys.argv[2]
sandbox_fusion.set_endpoint(ENDPOINT)

SLEEPS = "import time\ntime.sleep(3)\nprint('woke')\n"
# ~200 MB, every page touched.
HOLDS = ("x = bytearray(200 * 1000 * 1000)\n"
         "for i in range(0, len(x), 4096):\n    x[i] = 1\nprint(len(x))\n")
BURNS = "import time\nwhile time.process_time() < 1.5:\n    pass\nprint('done')\n"


def check(what, ok, detail):
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        sys.exit(1)


# The SDK's run_timeout, below and above the profile's 2 s.
short = run_code(RunCodeRequest(code=SLEEPS, language="python", run_timeout=1), max_attempts=1)
check("sdk run_timeout=1 on a 3 s sleep is a time limit",
      short.status == RunStatus.Failed
      and short.run_result.status == CommandRunStatus.TimeLimitExceeded, short)
long = run_code(RunCodeRequest(code=SLEEPS, language="python", run_timeout=6), max_attempts=1)
check("sdk run_timeout=6 on a 3 s sleep finishes",
      long.status == RunStatus.Success
      and long.run_result.status == CommandRunStatus.Finished
      and long.run_result.stdout.strip() == "woke", long)

# memory_limit_MB, as verl sends it.
spec = importlib.util.spec_from_file_location("verl_sandbox_fusion_utils", VERL_UTILS)
verl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(verl)
url = f"{ENDPOINT}/run_code"
small, error = verl.call_sandbox_api(url, HOLDS, None, 10, 10, 64, "python")
check("verl memory_limit_MB=64 on ~200 MB is a memory kill",
      error is None and small["status"] == "Failed"
      and small["run_result"]["status"] == "Finished"
      and small["run_result"]["return_code"] == 137, (small, error))
default, error = verl.call_sandbox_api(url, HOLDS, None, 10, 10, -1, "python")
check("verl memory_limit_MB=-1 on ~200 MB runs under the profile's 256 MiB",
      error is None and default["status"] == "Success"
      and default["run_result"]["stdout"].strip() == "200000000", (default, error))
default = run_code(RunCodeRequest(code=HOLDS, language="python", run_timeout=10), max_attempts=1)
check("sdk without memory_limit_MB on ~200 MB passes",
      default.status == RunStatus.Success, default)

# The Judge0 SDK's cpu_time_limit, below and above the program's CPU time.
client = Client(ENDPOINT)
tight = judge0.run(client=client, source_code=BURNS, language=71,
                   cpu_time_limit=0.5, wall_time_limit=10)
check("judge0 cpu_time_limit=0.5 on 1.5 s of CPU is Time Limit Exceeded",
      tight.status == Status.TIME_LIMIT_EXCEEDED, (tight.status, tight.message, tight.time))
loose = judge0.run(client=client, source_code=BURNS, language=71,
                   cpu_time_limit=5, wall_time_limit=10)
check("judge0 cpu_time_limit=5 on 1.5 s of CPU is Accepted",
      loose.status == Status.ACCEPTED and loose.stdout.strip() == "done",
      (loose.status, loose.message, loose.stderr, loose.time))

print("all clients agree", flush=True)
