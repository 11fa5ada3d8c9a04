"""The published SandboxFusion clients, unmodified, against `progscore serve`.

Usage: python sandbox_fusion_clients.py ENDPOINT VERL_UTILS_PY

Runs the `sandbox-fusion` SDK (run_code, run_code_async, run_concurrent) and
verl's check_correctness (its module file, imported from the downloaded
wheel) on correct, wrong, crashing, looping, compile-error and memory-hog
programs in Python and C++, and checks what each client concludes. Prints
one line per check and exits non-zero on the first wrong conclusion.
"""

import asyncio
import base64
import importlib.util
import sys

import sandbox_fusion
from sandbox_fusion import (RunCodeRequest, RunStatus, run_code, run_code_async,
                            run_concurrent)
from sandbox_fusion.models import CommandRunStatus

from programs import CPP, PY

ENDPOINT, VERL_UTILS = sys.argv[1], sys.argv[2]
sandbox_fusion.set_endpoint(ENDPOINT)

PROGRAMS = {"python": PY, "cpp": CPP}


def check(what, ok, detail):
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        sys.exit(1)


UNPROVEN = "timeout is not proven"


def sdk_call(call, request, **options):
    """The SDK's answer, or the error it gave up with when the server said
    (504, the form verl and the SDK retry) that a timeout could not be
    proven on this loaded machine: never a verdict."""
    try:
        return call(request, **options)
    except Exception as error:  # noqa: BLE001 - the SDK raises a bare Exception
        if UNPROVEN in str(error):
            return error
        raise


def sdk_expectation(language, kind, response):
    """What the SDK's response must say for each kind of program (a loop
    may come back as a timeout the machine could not prove)."""
    if isinstance(response, BaseException):
        return kind == "loop" and UNPROVEN in str(response)
    run = response.run_result
    if kind == "correct":
        return response.status == RunStatus.Success and run.stdout.strip() == "9"
    if kind == "wrong":
        return response.status == RunStatus.Success and run.stdout.strip() == "10"
    if kind == "crash":
        return (response.status == RunStatus.Failed and run.status == CommandRunStatus.Finished
                and run.return_code != 0)
    if kind == "loop":
        return (response.status == RunStatus.Failed
                and run.status == CommandRunStatus.TimeLimitExceeded
                and run.execution_time is not None and run.execution_time < 10)
    if kind == "compile_error":
        if language == "cpp":
            return (response.status == RunStatus.Failed and run is None
                    and response.compile_result.return_code != 0
                    and "error" in response.compile_result.stderr)
        return (response.status == RunStatus.Failed and run.return_code == 1
                and "SyntaxError" in run.stderr)
    if kind == "memory_hog":
        return response.status == RunStatus.Failed and run.return_code == 137
    raise ValueError(kind)


def requests_for(language):
    return [(kind, RunCodeRequest(code=code, language=language, stdin="3\n", run_timeout=5))
            for kind, code in PROGRAMS[language].items()]


# The SDK, one request at a time.
for language in PROGRAMS:
    for kind, request in requests_for(language):
        response = sdk_call(run_code, request, max_attempts=1)
        check(f"sdk run_code {language} {kind}", sdk_expectation(language, kind, response),
              response)


# Files beside the program: read by a relative path (the program starts in
# its folder), and included by the C++ compile; other content, another run.
def with_files(language, code, files):
    encoded = {name: base64.b64encode(data).decode() for name, data in files.items()}
    return run_code(RunCodeRequest(code=code, language=language, files=encoded, run_timeout=5),
                    max_attempts=1)


for content in (b"7\n", b"8\n"):
    read = with_files("python", "print(int(open('data/n.txt').read()) ** 2)",
                      {"data/n.txt": content})
    check(f"sdk run_code python files {content!r}",
          read.status == RunStatus.Success
          and read.run_result.stdout.strip() == str(int(content) ** 2), read)
included = with_files(
    "cpp", '#include <cstdio>\n#include "square.h"\nint main() { printf("%d\\n", square(3)); }\n',
    {"square.h": b"int square(int x) { return x * x; }\n"})
check("sdk run_code cpp files (a header beside the program)",
      included.status == RunStatus.Success and included.run_result.stdout.strip() == "9", included)


# The SDK's asyncio client, all at once.
async def all_async():
    pending = [(language, kind, run_code_async(request, max_attempts=1))
               for language in PROGRAMS for kind, request in requests_for(language)]
    results = await asyncio.gather(*(p[2] for p in pending), return_exceptions=True)
    for (language, kind, _), response in zip(pending, results):
        check(f"sdk run_code_async {language} {kind}", sdk_expectation(language, kind, response),
              response)


asyncio.run(all_async())

# The SDK's thread pool helper.
pairs = [(language, kind, request) for language in PROGRAMS
         for kind, request in requests_for(language)]
responses = run_concurrent(lambda request: sdk_call(run_code, request),
                           args=[[p[2]] for p in pairs], concurrency=8)
for (language, kind, _), response in zip(pairs, responses):
    check(f"sdk run_concurrent {language} {kind}", sdk_expectation(language, kind, response),
          response)

# verl's reward function, imported from the wheel's module file alone.
spec = importlib.util.spec_from_file_location("verl_sandbox_fusion_utils", VERL_UTILS)
verl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(verl)
VERL_EXPECTED = {
    "correct": True,
    "wrong": False,
    "crash": -2,
    "loop": -3,
    "memory_hog": -2,
}
for language in PROGRAMS:
    for kind, code in PROGRAMS[language].items():
        # Several test cases of one program, sent as separate requests.
        in_outs = {"inputs": ["3\n", "3\n", "3\n"], "outputs": ["9\n", "9\n", "9\n"]}
        results, metadata = verl.check_correctness(
            f"{ENDPOINT}/run_code", in_outs, code, timeout=5, language=language)
        if kind == "compile_error":
            expected = -4 if language == "cpp" else -2
        else:
            expected = VERL_EXPECTED[kind]
        # A loop's timeout the machine could not prove stays undetermined
        # through verl's retries (-1, never a pass).
        allowed = {expected, -1} if kind == "loop" else {expected}
        check(f"verl check_correctness {language} {kind}",
              len(results) == 3 and set(results) <= allowed, (results, metadata))

print("all clients agree", flush=True)
