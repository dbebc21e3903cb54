"""The zoo: the bugs students make, each as a small edit of a correct solution.

Each member names the hint `check --hint` must give for it and the nbgrader cells it must
lose. Edits apply inside one function, so the same table builds a buggy `.py` for the
check command and a buggy notebook submission for the autograder.

Most members edit the reference (`grader/reference.py`, one program per row). Students also
copy public kernels decomposed in other ways, so members may edit one of the correct
shapes in `grader/shapes/` instead (`Bug.base`, listed in `DECOMPOSITIONS`): the same bug must get
the same hint whichever way the rows are split among programs.
"""

from __future__ import annotations

from pathlib import Path

from grader.edits import apply
from grader.zoo.bug import Bug, base_source
from grader.zoo.follow_on_bugs import FOLLOW_ON_BUGS
from grader.zoo.reference_bugs import REFERENCE_BUGS
from grader.zoo.shape_bugs import SHAPE_BUGS

BUGS: tuple[Bug, ...] = REFERENCE_BUGS + SHAPE_BUGS + FOLLOW_ON_BUGS
"""Every bug: the reference's, the shapes', then the optional exercises'."""


def write_bug(bug: Bug, folder: Path) -> Path:
    """Write `bug`'s implementation as `<folder>/<name>.py` and return the path."""
    path = folder / f"{bug.name.replace('-', '_')}.py"
    path.write_text(apply(base_source(bug.base), bug.edits))
    return path
