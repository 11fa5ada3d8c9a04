"""A string where a sequence of strings is meant is refused, naming the
field: iterated, ``"10"`` would run the program with ``["1", "0"]``."""

from __future__ import annotations

import pytest

from progscore import (
    DockerRuntimeProfile,
    Equals,
    ProgramBehaves,
    ProgramCase,
    ProgramInvocation,
    ProgramResult,
    ScoringExpectation,
)

IMAGE = "127.0.0.1:5000/python-sandbox@sha256:" + "0" * 64


def test_arguments_given_as_a_string_are_a_type_error_naming_the_field() -> None:
    with pytest.raises(TypeError, match=r"ProgramInvocation\.arguments .*not a single str \('10'\); write \['10'\]"):
        ProgramInvocation(arguments="10")
    with pytest.raises(TypeError, match=r"ProgramInvocation\.arguments"):
        ProgramInvocation(arguments=b"10")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ProgramInvocation\.arguments\[1\] must be a string, not int"):
        ProgramInvocation(arguments=["1", 0])  # type: ignore[list-item]
    assert ProgramInvocation(arguments="10".split())._json()["args"] == ["10"]
    assert ProgramInvocation(arguments=["1", "0"])._json()["args"] == ["1", "0"]
    # An iterator is kept whole, not used up by the check.
    iterator = (a for a in ["3", "4"])
    assert ProgramInvocation(arguments=iterator)._json()["args"] == ["3", "4"]  # type: ignore[arg-type]


def test_command_and_compile_given_as_strings_are_type_errors_naming_the_field() -> None:
    with pytest.raises(TypeError, match=r"DockerRuntimeProfile\.command .*'python3'"):
        DockerRuntimeProfile(image=IMAGE, command="python3")
    with pytest.raises(TypeError, match=r"DockerRuntimeProfile\.compile .*or None"):
        DockerRuntimeProfile(image=IMAGE, command=["./main"], compile="gcc -o /build/main /sandbox/main.c")
    spec = DockerRuntimeProfile(image=IMAGE, command=["./main"], compile=["gcc", "main.c"])._spec()
    assert spec["command"] == ["./main"] and spec["compile"] == ["gcc", "main.c"]
    assert "compile" not in DockerRuntimeProfile(image=IMAGE, command=["python3"])._spec()


def test_a_single_case_or_condition_where_a_sequence_is_meant_is_a_type_error() -> None:
    case = ProgramCase(ProgramInvocation(["3"]), ProgramResult(stdout=Equals("9")))
    with pytest.raises(TypeError, match=r"ProgramBehaves\.cases must be a sequence of ProgramCase"):
        ProgramBehaves("python", case)  # type: ignore[arg-type]
    behaves = ProgramBehaves("python", [case])
    with pytest.raises(TypeError, match=r"ScoringExpectation\.conditions must be a sequence"):
        ScoringExpectation(behaves)  # type: ignore[arg-type]
    assert '"args": ["3"]' in ScoringExpectation([behaves])._json()
