"""A compiled language from Python: the profile's compile step, its evidence,
and a program that does not compile scored false, not undetermined."""

from __future__ import annotations

import pathlib

from progscore import (
    ContentScorable,
    DockerRuntimeProfile,
    DockerSandboxClient,
    Equals,
    EvidenceStore,
    ProgramBehaves,
    ProgramCase,
    ProgramExecutionScorer,
    ProgramExecutionSource,
    ProgramInvocation,
    ProgramResult,
    ScoringExpectation,
)

SQUARE_C = '#include <stdio.h>\n#include <stdlib.h>\nint main(int c, char **v) { long n = atol(v[1]); printf("%ld\\n", n * n); return 0; }\n'


def c_client(image: str) -> DockerSandboxClient:
    return DockerSandboxClient(profiles={
        "c": DockerRuntimeProfile(
            image=image,
            source="main.c",
            compile=("gcc", "-O2", "-std=c17", "-o", "/build/main", "/sandbox/main.c"),
            compile_limits={"timeout": "30s", "memory": "512MiB"},
            command=("/build/main",),
        ),
    })


def square_expectation(arg: str, stdout: str) -> ScoringExpectation:
    case = ProgramCase(
        invocation=ProgramInvocation(arguments=(arg,)),
        expected=ProgramResult(stdout=Equals(value=stdout)),
    )
    return ScoringExpectation(conditions=(ProgramBehaves(runtime_profile_name="c", cases=(case,)),))


async def test_a_c_program_is_compiled_once_and_its_build_recorded(c_image: str) -> None:
    client = c_client(c_image)
    run = await client.execute_async(
        program=SQUARE_C,
        runtime_profile_name="c",
        invocations=(ProgramInvocation(arguments=("3",)), ProgramInvocation(arguments=("12",))),
    )
    assert run.compile is not None and run.compile.succeeded
    assert run.compile.artifact_sha256 is not None and len(run.compile.artifact_sha256) == 64
    assert run.compile.event.provenance is not None
    assert run.compile.event.provenance["command"][0] == "gcc"
    assert [event.stdout for event in run.events] == ["9\n", "144\n"]


async def test_a_program_that_does_not_compile_scores_false(c_image: str, tmp_path: pathlib.Path) -> None:
    client = c_client(c_image)
    scorer = ProgramExecutionScorer(
        source=ProgramExecutionSource(sandbox=client), memory=EvidenceStore(tmp_path / "evidence.db")
    )
    broken = "int main(void) { return missing_function(; }\n"
    score = (await scorer.score_async(
        scorable=ContentScorable(value=broken), expectation=square_expectation("3", "9")
    ))[0]
    assert score.get_value() is False
    assert "did not compile" in score.score_rationale
    observation = (await EvidenceStore(tmp_path / "evidence.db").get_observations_async(
        observation_ids=score.observation_ids
    ))[0]
    assert observation.run.compile is not None
    assert not observation.run.compile.succeeded
    assert "error" in observation.run.compile.event.stderr
    assert observation.run.events[0].outcome == "compile_error"
