"""Call the function under test, and say what it raised: the error, and where in the
student's code it came from.

A kernel that fails under Triton's interpreter raises through an `InterpreterError`; one that
Triton's compiler refuses raises a `CompilationError` whose own first line is only "at 10:34:".
Either way the student reads the error itself and the line of their code it came from, the
same on every case it stops. A bad input must be refused with a ValueError or TypeError that
names the problem (`refusal_verdict`).
"""

from __future__ import annotations

import re
import sys
import sysconfig
import traceback
from collections.abc import Callable
from pathlib import Path

from triton.compiler.errors import CompilationError
from triton.runtime.errors import InterpreterError

from learning.workshops.checking.records import CaseResult, Failure, Verdict

ROOT = Path(__file__).resolve().parents[3]
"""The folder that holds `learning/` (and, in the course repo, `grader/`)."""
CHECKERS = tuple(str(ROOT / part) for part in ("learning", "grader"))
LIBRARIES = tuple(
    {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    | {sys.prefix, sys.base_prefix, sys.exec_prefix}
)
"""Where code that is not the student's lives: the checker, Python, and installed packages."""


def called(fn: Callable, *args, num_warps: int) -> object:
    """What `fn(*args, num_warps=...)` returned, or the exception it raised."""
    try:
        return fn(*args, num_warps=num_warps)
    except Exception as exc:  # the student's error is the evidence
        return exc


def exception_kind(exc: BaseException) -> Failure:
    """MEMORY when the call ran out of host or device memory, else EXCEPTION."""
    text = str(exc).lower()
    if isinstance(exc, MemoryError) or "can't allocate memory" in text or "out of memory" in text:
        return Failure.MEMORY
    return Failure.EXCEPTION


def raised_text(exc: BaseException) -> str:
    """'raised Name: first line of its message', or 'raised Name' when it has none, then
    where in the student's code it came from, when a frame of theirs is on its way."""
    exc = unwrapped(exc)
    if isinstance(exc, CompilationError):
        return f"raised {type(exc).__name__}: {compile_error(exc)}"
    message = first_line(exc)[:200]
    said = f"raised {type(exc).__name__}" + (f": {message}" if message else "")
    place = student_line(exc)
    return f"{said} ({place})" if place else said


def raised_part(text: str) -> str | None:
    """The part of a verdict's text from "raised" on (what an exception case says, less the
    view it ran on), or None when the text reports no exception."""
    if text.startswith("raised "):
        return text
    at = text.find(": raised ")
    return text[at + 2 :] if at >= 0 else None


def raised_again(results: list[CaseResult]) -> dict[str, list[str]]:
    """The cases that raised, in the same words, an error an earlier case raised: each such
    case's name maps to the names of all of them after the first, where the report tells
    them in one line, and to [] where that line is already told. A typo is said once."""
    seen: dict[str, list[str]] = {}
    for r in results:
        said = raised_part(r.verdict.text) if r.failure == Failure.EXCEPTION else None
        if said is not None:
            seen.setdefault(said, []).append(r.name)
    again: dict[str, list[str]] = {}
    for names in seen.values():
        for i, name in enumerate(names[1:]):
            again[name] = names[1:] if i == 0 else []
    return again


_NOT_IMPLEMENTED = re.compile(r"NotImplementedError(?:: (?P<message>.*))?")


def is_stub(text: str) -> bool:
    """Whether `text` reports a stub: a NotImplementedError that says nothing, or says
    "not written yet" as the course's stubs do (or the compiler refusing a kernel stub's
    `raise` on a GPU). Other NotImplementedErrors are not the stub's: Triton 3.9 raises one
    for block pointers."""
    if "AST node type: Raise" in text:
        return True
    found = _NOT_IMPLEMENTED.search(text)
    if found is None:
        return False
    return not found["message"] or found["message"].startswith("not written yet")


def unwrapped(exc: BaseException) -> BaseException:
    """What the kernel itself raised: Triton's interpreter wraps it in an InterpreterError
    (once per nested @triton.jit call) whose __cause__ it is."""
    while isinstance(exc, InterpreterError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def student_line(exc: BaseException) -> str | None:
    """ "file line N: `source`" of the innermost frame of `exc` in the student's code (not
    the checker's, not Python's or a package's), or None when there is none."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _students(f.filename)]
    if not frames:
        return None
    frame = frames[-1]
    from learning.workshops.checking.loader import place

    where = place(frame.filename, frame.lineno)
    line = (frame.line or "").strip()
    return f"{where}: `{line[:120]}`" if line else where


def _students(filename: str) -> bool:
    if filename.startswith("<") or filename.startswith(CHECKERS):
        return False
    return not filename.startswith(LIBRARIES)


def compile_error(exc: CompilationError) -> str:
    """Where Triton refused the kernel and why; its own first line is only "at 10:34:"."""
    why = exc.error_message or (first_line(exc.__cause__) if exc.__cause__ else "")
    lineno = getattr(exc.node, "lineno", None)
    lines = (exc.src or "").splitlines()
    if lineno is None or not 0 < lineno <= len(lines):
        return why[:300]
    return f"kernel line {lineno}, `{lines[lineno - 1].strip()}`: {why}"[:300]


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def refusal_facts(exc: BaseException) -> dict:
    """What a refusal is judged by: the exception's name, whether it is the ValueError or
    TypeError a bad input must raise (subclasses included), and its message."""
    refusal = next((k.__name__ for k in (ValueError, TypeError) if isinstance(exc, k)), None)
    return {"raised": type(exc).__name__[:100], "refusal": refusal, "message": str(exc)}


def expect_refusal(
    fn, args: tuple, num_warps: int, what: str, words: tuple[str, ...], seen=None
) -> Verdict:
    """`fn(*args)` must raise ValueError or TypeError with one of `words` in its message;
    `what` describes the input in the verdict; `seen` (an `exchange.Observation`) records
    the call for a parent to judge."""
    out = called(fn, *args, num_warps=num_warps)
    if seen is not None:
        seen.saw(out, [])
    return refusal_verdict(out, what, words)


def refusal_verdict(out: object, what: str, words: tuple[str, ...]) -> Verdict:
    """The verdict on a bad input's call from what it returned or raised (`out`, or its
    wire form: a dict with "raised" and "message")."""
    if isinstance(out, BaseException):
        out = refusal_facts(out)
    if not isinstance(out, dict) or "raised" not in out:
        return Verdict(
            Failure.NOT_RAISED, f"{what}: accepted; it must raise ValueError or TypeError"
        )
    name, message = str(out["raised"]), str(out.get("message", ""))
    if out.get("refusal") in ("ValueError", "TypeError"):
        if any(word in message for word in words):
            return Verdict(None, f"{what}: refused ({name})")
        first = message.strip().splitlines()[0][:300] if message.strip() else ""
        return Verdict(
            Failure.UNCLEAR_ERROR,
            f"{what}: raised {name}({first!r}), which does not name "
            f"the problem (expected one of {', '.join(map(repr, words))} in the message)",
        )
    return Verdict(
        Failure.UNCLEAR_ERROR, f"{what}: raised {name}, expected ValueError or TypeError"
    )
