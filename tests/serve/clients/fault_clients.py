"""The peers' clients while running containers are struck from outside.

Usage: python fault_clients.py ENDPOINT SERVER_PID VERL_UTILS_PY

A striker thread `docker kill`s or `docker rm -f`s, every 3 s (12 times at
most), a running container of the server with pid SERVER_PID (as an OOM
reaper, a node drain or an operator would: a fault now and then, not a
siege that no rerun could outlast), while verl's `check_correctness`, the sandbox-fusion
SDK, the judge0 SDK and a Piston client that retries as open-r1's
`PistonClient` does (any status but 200, with backoff) score correct and
wrong programs in Python and C++. A struck run proves nothing: the server
runs it again, and what still proves nothing goes out in the form each
client retries. So: no correct program is ever scored as failing, and a
wrong one is still wrong. Prints one line per check and "all clients agree".
"""

import importlib.util
import subprocess
import sys
import threading
import time

import httpx
import judge0
import sandbox_fusion
from judge0 import Client, Status
from sandbox_fusion import RunCodeRequest, RunStatus, run_code

ENDPOINT, SERVER_PID, VERL_UTILS = sys.argv[1], sys.argv[2], sys.argv[3]
sandbox_fusion.set_endpoint(ENDPOINT)

# Each program lives long enough to be struck: it sleeps, then answers.
PY = {
    "correct": "import time\ntime.sleep(0.6)\nn = int(input())\nprint(n * n)\n",
    "wrong": "import time\ntime.sleep(0.6)\nn = int(input())\nprint(n * n + 1)\n",
}
CPP = {
    "correct": "#include <iostream>\n#include <unistd.h>\n"
               "int main(){usleep(600000); long n; std::cin>>n; std::cout<<n*n<<std::endl;}\n",
    "wrong": "#include <iostream>\n#include <unistd.h>\n"
             "int main(){usleep(600000); long n; std::cin>>n; std::cout<<n*n+1<<std::endl;}\n",
}
PROGRAMS = {"python": PY, "cpp": CPP}


def check(what, ok, detail):
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        stop.set()
        sys.exit(1)


def server_containers():
    """Running containers whose owner tag is the server's."""
    listed = subprocess.run(
        ["docker", "ps", "--filter", "label=progscore.owner",
         "--format", '{{.ID}} {{.Label "progscore.owner"}}'],
        capture_output=True, text=True, check=False).stdout
    return [line.split()[0] for line in listed.splitlines()
            if len(line.split()) == 2 and line.split()[1].startswith(f"progscore-docker-{SERVER_PID}-")]


stop = threading.Event()
strikes = []


def striker():
    how = [["docker", "kill"], ["docker", "rm", "-f"]]
    while len(strikes) < 12 and not stop.wait(3.0):
        running = server_containers()
        if running:
            command = how[len(strikes) % 2]
            subprocess.run(command + [running[0]], capture_output=True, check=False)
            strikes.append(" ".join(command))


threading.Thread(target=striker, daemon=True).start()

# verl's reward function, from its wheel's module file: three tests each.
spec = importlib.util.spec_from_file_location("verl_sandbox_fusion_utils", VERL_UTILS)
verl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(verl)
for round_ in range(2):
    for language, programs in PROGRAMS.items():
        for kind, code in programs.items():
            code = f"{'#' if language == 'python' else '//'} round {round_}\n{code}"
            in_outs = {"inputs": ["3\n", "4\n", "5\n"], "outputs": ["9\n", "16\n", "25\n"]}
            results, metadata = verl.check_correctness(
                f"{ENDPOINT}/run_code", in_outs, code, timeout=5, language=language)
            expected = [True] * 3 if kind == "correct" else [False] * 3
            check(f"verl check_correctness {language} {kind} round {round_}",
                  results == expected, (results, metadata))

# The sandbox-fusion SDK (it retries any status but 200).
for language, programs in PROGRAMS.items():
    for kind, code in programs.items():
        response = run_code(RunCodeRequest(code=f"{code}\n", language=language, stdin="6\n",
                                           run_timeout=5), max_attempts=5)
        want = "36" if kind == "correct" else "37"
        check(f"sdk run_code {language} {kind}",
              response.status == RunStatus.Success and response.run_result.stdout.strip() == want,
              response)

# The judge0 SDK: an infrastructure fault is Internal Error (resubmitted),
# never a verdict on the program.
client = Client(ENDPOINT)
for language, programs in {71: PY, 54: CPP}.items():
    for kind, code in programs.items():
        for attempt in range(3):
            submission = judge0.run(client=client, source_code=f"{code}\n\n", language=language,
                                    stdin="7\n", expected_output="49\n")
            if submission.status != Status.INTERNAL_ERROR:
                break
        want = Status.ACCEPTED if kind == "correct" else Status.WRONG_ANSWER
        check(f"judge0 run {language} {kind}", submission.status == want,
              (submission.status, submission.message))


# A Piston client as open-r1's behaves: any status but 200 is retried, with
# backoff; a 200 is the answer.
def piston_execute(language, code, stdin):
    for attempt in range(6):
        reply = httpx.post(f"{ENDPOINT}/api/v2/execute", timeout=60, json={
            "language": language, "version": "*", "files": [{"content": code}],
            "stdin": stdin, "run_timeout": 5000, "compile_timeout": 10000,
            "run_memory_limit": -1, "compile_memory_limit": -1})
        if reply.status_code == 200:
            return reply.json()
        time.sleep(min(2 ** attempt * 0.5, 4))
    return None


for language, programs in PROGRAMS.items():
    for kind, code in programs.items():
        answer = piston_execute(language, f"{code}\n\n\n", "8\n")
        want = "64" if kind == "correct" else "65"
        check(f"piston execute {language} {kind}",
              answer is not None and answer["run"]["code"] == 0
              and answer["run"]["stdout"].strip() == want, answer)

stop.set()
check("containers were struck while the clients ran", len(strikes) >= 3, strikes)
print(f"{len(strikes)} containers struck from outside", flush=True)
print("all clients agree", flush=True)
