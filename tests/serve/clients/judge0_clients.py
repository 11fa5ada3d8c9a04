"""The published Judge0 client, unmodified, against `progscore serve`.

Usage: python judge0_clients.py ENDPOINT

Runs the `judge0` SDK's Client pointed at the server: single submissions
(the SDK's own create-then-poll, and a plain wait=true request), batch
submissions, test cases with expected output, on correct, wrong, crashing,
looping, compile-error and memory-hog programs in Python and C++; checks
the status each gets. Prints one line per check and exits non-zero on the
first wrong conclusion.
"""

import base64
import sys

import httpx
import judge0
from judge0 import Client, Status, Submission

from programs import CPP, PY

ENDPOINT = sys.argv[1]
client = Client(ENDPOINT)

# Judge0 CE 1.13.1's ids, which the server's /about version selects.
PROGRAMS = {71: PY, 54: CPP}

# What Judge0 says of each kind of program, stdin "3", expected "9".
EXPECTED = {
    "correct": {Status.ACCEPTED},
    "wrong": {Status.WRONG_ANSWER},
    # std::abort() ends in SIGABRT, or SIGSEGV under gVisor's hardened profile.
    "crash": {Status.RUNTIME_ERROR_NZEC, Status.RUNTIME_ERROR_SIGABRT,
              Status.RUNTIME_ERROR_SIGSEGV},
    "loop": {Status.TIME_LIMIT_EXCEEDED},
    "memory_hog": {Status.RUNTIME_ERROR_OTHER},
}


def unproven_timeout(submission):
    """Judge0's Internal Error for a timeout the machine was too busy to
    prove (the retried form, never a verdict): the loop's honest answer on
    a loaded machine."""
    message = submission.message or ""
    try:
        message = base64.b64decode(message, validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        pass
    return submission.status == Status.INTERNAL_ERROR and "timeout is not proven" in message


def concludes(submission, language, kind):
    if submission.status in expected_status(language, kind):
        return True
    return kind == "loop" and unproven_timeout(submission)


def expected_status(language, kind):
    if kind == "compile_error":
        # Python has no build step: its syntax error is a run that exits 1.
        return {Status.COMPILATION_ERROR} if language == 54 else {Status.RUNTIME_ERROR_NZEC}
    return EXPECTED[kind]


def check(what, ok, detail):
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        sys.exit(1)


check("client sees the served languages",
      client.is_language_supported(71) and client.is_language_supported(54)
      and client.is_language_supported(judge0.PYTHON) and client.is_language_supported(judge0.CPP),
      client.languages)

# The SDK's run (create, then poll until done), one program at a time.
for language, programs in PROGRAMS.items():
    for kind, code in programs.items():
        submission = judge0.run(client=client, source_code=code, language=language,
                                stdin="3\n", expected_output="9\n")
        check(f"sdk run {language} {kind}", concludes(submission, language, kind),
              (submission.status, submission.stdout, submission.stderr, submission.message,
               submission.compile_output))
        if kind == "correct":
            check(f"sdk run {language} {kind} output",
                  submission.stdout.strip() == "9" and submission.time is not None
                  and submission.wall_time is not None and submission.memory is not None,
                  submission)
        if kind == "compile_error" and language == 54:
            check(f"sdk run {language} compile output", "error" in submission.compile_output,
                  submission.compile_output)

# Test cases: one program, several inputs, as a batch of submissions.
square = PY["correct"]
cases = [("3\n", "9\n"), ("4\n", "16\n"), ("5\n", "26\n")]
results = judge0.run(client=client, source_code=square, language=71, test_cases=cases)
check("sdk test cases in a batch",
      [r.status for r in results] == [Status.ACCEPTED, Status.ACCEPTED, Status.WRONG_ANSWER],
      [(r.status, r.stdout) for r in results])

# Batch creation, then the SDK's batch polling.
submissions = [Submission(source_code=code, language=language, stdin="3\n", expected_output="9\n")
               for language, programs in PROGRAMS.items() for code in programs.values()]
kinds = [(language, kind) for language, programs in PROGRAMS.items() for kind in programs]
submissions = judge0.async_run(client=client, submissions=submissions)
check("batch gives every submission a token", all(s.token for s in submissions), submissions)
submissions = judge0.wait(client=client, submissions=submissions)
for (language, kind), submission in zip(kinds, submissions):
    check(f"batch {language} {kind}", concludes(submission, language, kind),
          (submission.status, submission.message))

# Additional files (the SDK zips them): beside the program, read by a
# relative path, and a C++ header the compile includes.
from judge0 import File, Filesystem  # noqa: E402

reader = "print(int(open('data/n.txt').read()) ** 2)\n"
for content, expected in (("7\n", "49\n"), ("8\n", "64\n")):
    submission = judge0.run(client=client, source_code=reader, language=71,
                            additional_files=Filesystem(content=[File(name="data/n.txt",
                                                                      content=content)]),
                            expected_output=expected)
    check(f"sdk additional files {content.strip()}", submission.status == Status.ACCEPTED,
          (submission.status, submission.stdout, submission.stderr))
header = '#include <cstdio>\n#include "square.h"\nint main() { std::printf("%d\\n", square(3)); }\n'
submission = judge0.run(client=client, source_code=header, language=54,
                        additional_files=Filesystem(content=[File(
                            name="square.h", content="int square(int x) { return x * x; }\n")]),
                        expected_output="9\n")
check("sdk additional files: a header the compile includes", submission.status == Status.ACCEPTED,
      (submission.status, submission.compile_output))
reply = httpx.post(f"{ENDPOINT}/submissions", json={"source_code": "x", "language_id": 71,
                                                    "additional_files": "bm90IGEgemlw"})
check("additional files that are not a zip are refused naming the field",
      reply.status_code == 422 and "additional_files" in reply.json(), reply.text)

# The same HTTP API without the SDK: wait=true, plain text, and a refusal.
reply = httpx.post(f"{ENDPOINT}/submissions", params={"wait": "true", "fields": "*"},
                   json={"source_code": PY["correct"], "language_id": 71, "stdin": "6\n",
                         "expected_output": "36"})
body = reply.json()
check("wait=true answers the finished submission",
      reply.status_code == 201 and body["status"]["id"] == 3 and body["stdout"] == "36\n"
      and reply.headers.get("x-progscore-observation"), (reply.status_code, body))
again = httpx.get(f"{ENDPOINT}/submissions/{body['token']}", params={"fields": "status,stdout"})
check("a token is answered by GET", again.json() == {"status": {"id": 3, "description": "Accepted"},
                                                    "stdout": "36\n"}, again.text)
reply = httpx.post(f"{ENDPOINT}/submissions", json={"source_code": "x", "language_id": 9999})
check("an unknown language is refused naming language_id",
      reply.status_code == 422 and "language_id" in reply.json(), reply.text)

print("all clients agree", flush=True)
