"""A course folder tied to the code that grades it: the checkout, its version and commit.

`python -m grader.make_course` writes RECORD into the course folder: the checkout that holds
the running `grader` package, its version (pyproject.toml's, else the installed package's),
its git commit (none without git) and the Python that made the course. The grading commands
(`grader.parallel`, `grader.recheck`, and nbgrader's autograde through the course's
nbgrader_config.py) then refuse, in one line that names both and the fix, to grade that
course with another checkout or version: a `pip install -e` of another checkout mid-term
cannot change the grading code silently. `python -m grader.make_course --retie FOLDER`
records the running checkout instead, on purpose, and says what changed.

Another commit of the same checkout and version (a `git pull` of the instructor's own
checkout) is graded, with a one-line note that names both commits: the instructor updated
that checkout themselves, and a refusal would block the fix a regrade is run for; the note
keeps it from passing unseen. A folder without the record (the repository root, which the
demo and the tests grade, and courses made before the record) is graded as before.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

import grader

RECORD = "i1_course.json"
"""The course folder's record of its checkout (not student data: fine to commit)."""
SCHEMA = "i1-course/1"
PACKAGE = "i1-strided-softmax"


class CourseTieError(Exception):
    """The course is tied to other code, or its record is unreadable; the message says the
    fix, in one line."""


@dataclass(frozen=True)
class Tie:
    """The code a course is graded with: checkout folder, version, git commit (or "")."""

    checkout: str
    version: str
    commit: str
    python: str = ""

    def named(self) -> str:
        """The checkout as one phrase: its folder, version and short commit."""
        commit = f", commit {self.commit[:12]}" if self.commit else ""
        return f"{self.checkout} (version {self.version}{commit})"


def running_checkout() -> Path:
    """The repository that holds the running `grader` package."""
    return Path(grader.__file__).resolve().parent.parent


def checkout_version(checkout: Path) -> str:
    """The version in `checkout`'s pyproject.toml, else the installed package's, else "?"."""
    try:
        return tomllib.loads((checkout / "pyproject.toml").read_text())["project"]["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        pass
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "?"


def checkout_commit(checkout: Path) -> str:
    """`checkout`'s git commit; "" without git or outside a git repository."""
    if shutil.which("git") is None:
        return ""
    done = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--verify", "-q", "HEAD"],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def this_code(checkout: Path | None = None) -> Tie:
    """The code at `checkout` (default: the running one) and the Python running now."""
    checkout = Path(checkout or running_checkout()).resolve()
    python = os.path.abspath(sys.executable)
    return Tie(str(checkout), checkout_version(checkout), checkout_commit(checkout), python)


def read_tie(course: Path) -> Tie | None:
    """The course's record, or None when it has none; CourseTieError when unreadable."""
    path = Path(course) / RECORD
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CourseTieError(f"{path} is unreadable ({exc}); {_retie(course)}") from None
    if not isinstance(data, dict) or data.pop("schema", None) != SCHEMA:
        raise CourseTieError(f"{path} is not a course record ({SCHEMA}); {_retie(course)}")
    try:
        return Tie(**data)
    except TypeError:
        raise CourseTieError(f"{path} has fields a course record lacks; {_retie(course)}") from None


def write_tie(course: Path, tie: Tie) -> None:
    """Record `tie` in the course folder."""
    text = json.dumps({"schema": SCHEMA, **asdict(tie)}, indent=2) + "\n"
    (Path(course) / RECORD).write_text(text)


def _retie(course: Path) -> str:
    return (
        "to grade it with this checkout on purpose: "
        f"python -m grader.make_course --retie {Path(course).absolute()}"
    )


def refusal(course: Path, tied: Tie, running: Tie, command: str) -> str | None:
    """Why `running` may not grade the course tied to `tied`, with the fix, in one line; None
    when it may (same checkout and version)."""
    if (tied.checkout, tied.version) == (running.checkout, running.version):
        return None
    course = Path(course).absolute()
    said = f"{course} is tied to {tied.named()}, but this is {running.named()}"
    if tied.checkout != running.checkout and tied.python == running.python:
        fix = f'this Python now imports another checkout: pip install -e "{tied.checkout}[course]"'
    elif tied.checkout != running.checkout:
        python = tied.python or f"{tied.checkout}/.venv/bin/python"
        fix = f"run it with that checkout's Python: {python} -m {command} ..."
    else:
        fix = f"check out version {tied.version} again (git -C {tied.checkout} checkout ...)"
    return f"{said}; {fix}, or, {_retie(course)}"


def note(course: Path, tied: Tie, running: Tie) -> str | None:
    """A line for another commit of the tied checkout and version; None otherwise."""
    same_code = (tied.checkout, tied.version) == (running.checkout, running.version)
    if not same_code or tied.commit == running.commit:
        return None
    return (
        f"note: {Path(course).absolute()} was tied to commit {tied.commit[:12] or 'none'} of "
        f"{tied.checkout}, which is now at {running.commit[:12] or 'none'} (same version "
        f"{tied.version}): grades may differ from earlier ones; "
        f"python -m grader.make_course --retie {Path(course).absolute()} records this commit"
    )


def check_tie(course: Path, command: str) -> str | None:
    """Before grading the course: CourseTieError (one line, the fix) when it is tied to
    other code; a note when tied to another commit of this checkout; else None. `command`
    is the module the fix tells to run, e.g. grader.parallel."""
    tied = read_tie(course)
    if tied is None:
        return None
    running = this_code()
    problem = refusal(course, tied, running, command)
    if problem:
        raise CourseTieError(problem)
    return note(course, tied, running)


def retie(course: Path, checkout: Path | None = None) -> str:
    """Tie the course to the code at `checkout` (default: the running one); what changed, in
    one line."""
    try:
        tied = read_tie(course)
    except CourseTieError:
        tied = None
    running = this_code(checkout)
    write_tie(course, running)
    if tied is None:
        return f"Tied {Path(course).absolute()} to {running.named()} (it had no record)."
    changes = [
        f"{name} {old or 'none'} -> {new or 'none'}"
        for name, old, new in (
            ("checkout", tied.checkout, running.checkout),
            ("version", tied.version, running.version),
            ("commit", tied.commit[:12], running.commit[:12]),
            ("Python", tied.python, running.python),
        )
        if old != new
    ]
    said = "; ".join(changes) if changes else "nothing changed"
    return f"Re-tied {Path(course).absolute()} to {running.named()}: {said}."


def refuse_other_code() -> None:
    """Make nbgrader's Autograde in this process refuse to grade a course tied to other code
    (`check_tie` on its CourseDirectory.root), with nbgrader's one-line error, and note
    another commit once. Called from the course's nbgrader_config.py; calling it again
    changes nothing."""
    from nbgrader.converters import Autograde, NbGraderException

    original = Autograde.start
    if getattr(original, "_checks_tie", False):
        return
    noted: set[str] = set()

    @functools.wraps(original)
    def start(self) -> None:
        try:
            line = check_tie(Path(self.coursedir.root), "nbgrader autograde")
        except CourseTieError as exc:
            self.log.error("%s", exc)
            raise NbGraderException(str(exc)) from None
        if line and line not in noted:
            noted.add(line)
            self.log.warning("%s", line)
        original(self)

    start._checks_tie = True
    Autograde.start = start
