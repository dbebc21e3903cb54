"""Call the function under test, and say what it raised: the error, and where in the
student's code it came from.

A kernel that fails under Triton's interpreter raises through an `InterpreterError`; one that
Triton's compiler refuses raises a `CompilationError` whose own first line is only "at 10:34:".
Either way the student reads the error itself and the line of their code it came from, the
same on every case it stops. A bad input must be refused with a ValueError or TypeError that
names the problem (`refusal_verdict`). What the student's code made is read through
`untrusted`: an exception whose message cannot be read, or a returned object that lies about
its class, is the student's failure, said as such, never an error of the checker's.
"""

from __future__ import annotations

import re
import sys
import sysconfig
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
from triton.compiler.errors import CompilationError
from triton.runtime.errors import InterpreterError

from learning.workshops.checking.records import CaseResult, Failure, Verdict
from learning.workshops.checking.untrusted import (
    cause_of,
    class_name,
    made,
    plain_text,
    text,
    traceback_of,
    unreadable,
)

ROOT = Path(__file__).resolve().parents[3]
"""The folder that holds `learning/` (and, in the course repo, `grader/`)."""
CHECKERS = tuple(str(ROOT / part) for part in ("learning", "grader"))
LIBRARIES = tuple(
    {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    | {sys.prefix, sys.base_prefix, sys.exec_prefix}
)
"""Where code that is not the student's lives: the checker, Python, and installed packages."""


BUILTIN_VALUES = (bool, int, float, complex, str, bytes, list, tuple, dict, set, type(None))
"""Returned values the checks read as they are (by their class's name): Python's own types."""


class Returned:
    """Stands in for a returned object of a class the checks do not read (the student's own,
    a tensor subclass): a class of its name, and nothing of the object's that could run."""


def called(fn: Callable, *args, num_warps: int) -> object:
    """What `fn(*args, num_warps=...)` returned (as `returned` gives it), or the exception
    it raised."""
    try:
        out = fn(*args, num_warps=num_warps)
    except Exception as exc:  # the student's error is the evidence
        return exc
    return returned(out)


def returned(value: object) -> object:
    """A returned value the checks can read without running the student's code: a tensor as
    a fresh alias of it (nothing set on the object comes along), an exception or a value of
    Python's own types as it is, anything else (a tensor subclass, a tensor no check can
    read) as a `Returned` of its class's name or of what the tensor is."""
    if type(value) is torch.Tensor:
        unread = unreadable_tensor(value)
        if unread is not None:
            return type(unread, (Returned,), {})()
        with torch._C._DisableTorchDispatch():  # no dispatch mode of the checks sees this
            return torch.Tensor.detach(value)
    if made(value, BaseException) or type(value) in BUILTIN_VALUES:
        return value
    return type(class_name(value), (Returned,), {})()


def unreadable_tensor(t: torch.Tensor) -> str | None:
    """What `t` is when no check can read its elements (a nested or sparse tensor, one on
    the meta device), or None for a strided tensor on the CPU or a GPU."""
    if t.is_nested:
        return "a nested tensor"
    if t.layout != torch.strided:
        return f"a {str(t.layout).removeprefix('torch.')} tensor"
    if t.device.type not in ("cpu", "cuda"):
        return f"a tensor on {t.device.type}"
    return None


def exception_kind(exc: BaseException) -> Failure:
    """MEMORY when the call ran out of host or device memory, else EXCEPTION."""
    said = text(exc).lower()
    if made(exc, MemoryError) or "can't allocate memory" in said or "out of memory" in said:
        return Failure.MEMORY
    return Failure.EXCEPTION


def raised_text(exc: BaseException) -> str:
    """'raised Name: first line of its message', or 'raised Name' when it has none (or
    'raised Name (its message could not be read: ...)'), then where in the student's code it
    came from, when a frame of theirs is on its way."""
    exc = unwrapped(exc)
    if made(exc, CompilationError):
        return f"raised {class_name(exc)}: {compile_error(exc)}"
    message = first_line(exc)[:200]
    said = f"raised {class_name(exc)}"
    if message:
        said += f" {message}" if unreadable(message) else f": {message}"
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


MAX_WRAPS = 64
"""InterpreterErrors unwrapped at most: a chain of causes the student built can be a loop."""


def unwrapped(exc: BaseException) -> BaseException:
    """What the kernel itself raised: Triton's interpreter wraps it in an InterpreterError
    (once per nested @triton.jit call) whose __cause__ it is."""
    for _ in range(MAX_WRAPS):
        cause = cause_of(exc) if made(exc, InterpreterError) else None
        if cause is None:
            break
        exc = cause
    return exc


def student_line(exc: BaseException) -> str | None:
    """ "file line N: `source`" of the innermost frame of `exc` in the student's code (not
    the checker's, not Python's or a package's), or None when there is none."""
    frames = [f for f in traceback.extract_tb(traceback_of(exc)) if _students(f.filename)]
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
    """Where Triton refused the kernel and why; its own first line is only "at 10:34:".
    A class of the student's own made from CompilationError is read by its message alone."""
    try:
        said = _compile_error(exc)
        return plain_text(said) if made(said, str) else first_line(exc)
    except Exception:  # its attributes are the student's: they raised
        return first_line(exc)


def _compile_error(exc: CompilationError) -> str:
    why = exc.error_message or (first_line(exc.__cause__) if exc.__cause__ else "")
    lineno = getattr(exc.node, "lineno", None)
    lines = (exc.src or "").splitlines()
    if lineno is None or not 0 < lineno <= len(lines):
        return why[:300]
    return f"kernel line {lineno}, `{lines[lineno - 1].strip()}`: {why}"[:300]


def first_line(exc: BaseException) -> str:
    lines = text(exc).strip().splitlines()
    return lines[0][:300] if lines else ""


def refusal_facts(exc: BaseException) -> dict:
    """What a refusal is judged by: the exception's name, whether it is the ValueError or
    TypeError a bad input must raise (subclasses included), and its message."""
    refusal = next((k.__name__ for k in (ValueError, TypeError) if made(exc, k)), None)
    return {"raised": class_name(exc), "refusal": refusal, "message": text(exc)}


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
    if made(out, BaseException):
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
