"""A sample cohort for demos and tests: a dozen submissions in a scratch course.

The solution, buggy variants from the zoo, the copy-first shortcut, an untouched release,
one that crashes its kernel, one submitted late, and a student on the roster who submitted
nothing. Built from the source notebook in a course folder of its own, never the real one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grader import course
from grader.edits import Edit
from grader.zoo import BUGS
from grader.zoo.bug import COPY_FIRST

DUE = "2026-12-01 17:00:00 UTC"
LATE = "2026-12-02 09:30:00 UTC"
ON_TIME = "2026-12-01 12:00:00 UTC"

KILLS_THE_KERNEL = Edit(
    "strided_softmax",
    "\n    return y",
    "\n    return y\n\n\n__import__('ctypes').string_at(0)  # the cell itself kills the kernel",
)
"""The crasher's edit: the cell defining `strided_softmax` dereferences a null pointer as it
runs, so the notebook's kernel dies there (nbgrader then grades that student not at all)."""

_BUGGY = (
    "ignores-column-stride",
    "adds-storage-offset",
    "pads-with-zero",
    "no-max-subtraction",
    "output-like-input",
    "launches-for-zero-rows",
    "no-validation",
    "address-without-offset",
)


@dataclass(frozen=True)
class Member:
    """One student of the sample cohort and what their submission is."""

    student: str
    kind: str  # solution, bug, shortcut, untouched, crash, late, missing
    edits: tuple[Edit, ...] = ()


def members() -> list[Member]:
    """The sample cohort, in a stable order."""
    bugs = {b.name: b for b in BUGS}
    cohort = [Member("solution", "solution"), Member("late-solution", "late")]
    cohort += [Member(f"bug-{name}", "bug", bugs[name].edits) for name in _BUGGY]
    cohort += [
        Member("copy-first", "shortcut", COPY_FIRST),
        Member("untouched", "untouched"),
        Member("crasher", "crash", (KILLS_THE_KERNEL,)),
        Member("no-submission", "missing"),
    ]
    return cohort


def build(root: Path) -> list[Member]:
    """Generate the assignment in a new course at `root` and submit the sample cohort."""
    course.new_course(root)
    course.nbgrader(root, "db", "assignment", "add", course.ASSIGNMENT, f"--duedate={DUE}")
    cohort = members()
    for member in cohort:
        if member.kind == "missing":
            course.nbgrader(root, "db", "student", "add", member.student)
            continue
        if member.kind == "untouched":
            path = course.submit_release(root, member.student)
        else:
            path = course.submit(root, member.student, course.solved_notebook(root, member.edits))
        stamp = LATE if member.kind == "late" else ON_TIME
        (path.parent / "timestamp.txt").write_text(stamp + "\n")
    return cohort
