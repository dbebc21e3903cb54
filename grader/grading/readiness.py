"""What must hold before any grading starts: the course's config grades through the
sandbox, the course has a secret, and bubblewrap runs here, unless the instructor passed
`--unsafe-no-sandbox`. The grader's commands (`course`, `parallel`, `demo`, `recheck`)
call `ready_to_grade` first; each refusal says what to do. It also notes, without refusing,
a Python that would import torch from source in every grading process."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from grader.course_folder import not_a_course
from grader.isolation.sandbox import (
    UNSAFE_ENV,
    UNSAFE_FLAG,
    SandboxUnavailable,
    require_bwrap,
    unsafe_requested,
)


def add_unsafe_option(parser) -> None:
    """The grader commands' `--unsafe-no-sandbox`, loudly named and explained."""
    parser.add_argument(
        UNSAFE_FLAG,
        action="store_true",
        help="grade WITHOUT the bubblewrap sandbox: student code can then read the gradebook, "
        "the hidden tests and the course secret (for a machine where bwrap cannot run)",
    )


def ready_to_grade(root: Path, unsafe: bool = False) -> None:
    """Before any grading of the course at `root`: raise SandboxUnavailable, saying what to
    do, when its nbgrader_config.py would not be loaded as written or the course has no
    secret (`grader.seeding`); with `unsafe`, mark this process and its children as grading
    unsandboxed; otherwise raise it unless bubblewrap is here."""
    from grader.seeding import MissingSecret, course_secret

    require_course_config(root)
    try:
        course_secret(root)
    except MissingSecret as exc:
        raise SandboxUnavailable(str(exc)) from None
    if unsafe:
        os.environ[UNSAFE_ENV] = "1"
    if not unsafe_requested():
        require_bwrap()
    note = torch_bytecode_note()
    if note:
        print(note, file=sys.stderr)


def torch_bytecode_note() -> str | None:
    """A line for the instructor when this Python writes no bytecode (PYTHONDONTWRITEBYTECODE)
    and torch was installed without it: every grading process (a submission starts about
    five) then compiles torch from source, 4-5 s each on the H200 host. None otherwise."""
    spec = importlib.util.find_spec("torch")
    if not sys.dont_write_bytecode or spec is None or spec.origin is None:
        return None
    if Path(importlib.util.cache_from_source(spec.origin)).exists():
        return None
    packages = Path(spec.origin).parent.parent
    return (
        "note: this Python writes no bytecode (PYTHONDONTWRITEBYTECODE) and torch has none, so "
        "every grading process compiles torch from source, seconds each; compile it once: "
        f"python -m compileall -q -j 0 {packages}"
    )


def require_course_config(root: Path) -> None:
    """Raise SandboxUnavailable when the course's nbgrader_config.py fails to load or does
    not grade through SandboxedExecute: nbgrader would then only log the error and grade
    with its default Execute, running the hidden tests beside the student's code."""
    from traitlets.config.loader import PyFileConfigLoader

    from grader.grading.execute import SandboxedExecute

    path = Path(root) / "nbgrader_config.py"
    problem = not_a_course(Path(root))
    if problem:
        raise SandboxUnavailable(problem)
    try:
        config = PyFileConfigLoader(path.name, path=str(path.parent)).load_config()
    except SyntaxError as exc:
        raise SandboxUnavailable(
            f"{path}, line {exc.lineno}: syntax error ({exc.msg}); fix the course's config."
        ) from None
    except Exception as exc:  # whatever the file raised is the instructor's to fix
        raise SandboxUnavailable(
            f"{path} does not load ({type(exc).__name__}: {exc}); nbgrader would grade "
            "without the sandbox. Fix it and grade again."
        ) from None
    steps = config.Autograde.get("autograde_preprocessors", [])
    if not any(isinstance(s, type) and issubclass(s, SandboxedExecute) for s in steps):
        raise SandboxUnavailable(
            f"{path} does not list grader.grading.execute.SandboxedExecute in "
            "c.Autograde.autograde_preprocessors, so the hidden tests would run beside the "
            "student's code. Put it back (see the repository's nbgrader_config.py)."
        )
