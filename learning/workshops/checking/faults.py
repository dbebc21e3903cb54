"""Checker faults: an exception in the checker's own code is the checker's, never the student's.

A case whose checks raised fails with the kind `internal-error`: it builds no hint, the check
command exits 3, and a notebook test cell raises `CheckerFault`, whose message says so.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path

from learning.workshops.checking.records import Case, CaseResult, Failure, Verdict
from learning.workshops.checking.untrusted import class_name, text, traceback_of

INTERNAL_ERROR = Failure.INTERNAL_ERROR.value
"""A case's failure when its checks raised, and the status of a test they raised in."""
INTERNAL_EXIT = 3
"""The exit status of a command whose checker failed: the check, a hidden or timing child."""
REPORT_IT = "Please report it with this output; your other results stand."
ROOT = Path(__file__).resolve().parents[3]
OWN_CODE = ("learning", "grader")


class CheckerFault(Exception):
    """The checker's own code failed, not the student's; the message says so and names it."""


class StudentRaised(AssertionError):
    """The student's function raised: a failed check, with the exception as its cause."""


GRID_GLOSS = (
    " (CUDA refuses a launch this way when its grid is over the limits: at most 65535 "
    "programs on grid axes 1 and 2; put the rows on axis 0, or loop over them)"
)
"""Said after a CUDA 'invalid argument' from a launch, whose own message names no cause."""


def call_student(name: str, fn: Callable, *args, **kwargs):
    """`fn(*args, **kwargs)`, the student's `name`; what it raises becomes StudentRaised."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        said = describe(exc)
        if said.endswith("[CUDA]: invalid argument"):
            said += GRID_GLOSS
        raise StudentRaised(f"{name} raised {said}") from exc


def fault_site(exc: BaseException) -> str:
    """`path:line` of the innermost frame in learning/ or grader/ (else the innermost)."""
    frames = traceback.extract_tb(traceback_of(exc))
    own = [f for f in frames if _own(f.filename)]
    frame = (own or frames or [None])[-1]
    if frame is None:
        return "an unknown place"
    path = Path(frame.filename).resolve()
    shown = path.relative_to(ROOT) if _own(frame.filename) else path
    return f"{shown}:{frame.lineno}"


def describe(exc: BaseException) -> str:
    """'ExcType: first line of its message', or 'ExcType' when it has none; read past the
    exception's own hooks (`untrusted`), since the student's code may have made it."""
    lines = text(exc).strip().splitlines()
    return class_name(exc) + (f": {lines[0][:300]}" if lines else "")


def fault_text(exc: BaseException) -> str:
    """'ExcType: first line of its message at path:line', one line."""
    return f"{describe(exc)} at {fault_site(exc)}"


def internal_result(case: Case, text: str) -> CaseResult:
    """The failed result of a case whose checks raised; `text` says what and where."""
    return CaseResult.of(case, Verdict(Failure.INTERNAL_ERROR, text))


def internal_message(details: list[str]) -> str:
    """What a student reads about checker faults: one line each, then what to do."""
    lines = [f"Internal error in the checker (not your code): {d}." for d in details]
    return "\n".join([*lines, REPORT_IT])


def _own(filename: str) -> bool:
    try:
        parts = Path(filename).resolve().relative_to(ROOT).parts
    except ValueError:
        return False
    return bool(parts) and parts[0] in OWN_CODE
