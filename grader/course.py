"""Scratch nbgrader courses: build one, fill it with submissions, autograde, read scores.

A scratch course is a folder of its own (config, source, gradebook), so tests and demos
never touch the real course's students. Submissions are the release notebook with its
solution cells filled in from the source notebook, optionally with a zoo bug's edits.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from grader.edits import Edit, apply, function_span
from grader.gradebook import alembic_on_path, gradebook_url, open_gradebook
from grader.seeding import new_secret
from grader.zoo.bug import base_source
from learning.workshops.checking.child import child_env

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENT = "i1_strided_softmax"
NOTEBOOK = "strided_softmax.ipynb"
_MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")

NOISY = (
    Edit(
        "strided_softmax",
        "    M, N = matrix(x)\n",
        "    import sys\n    import warnings\n\n"
        "    warnings.warn('a warning from the student')\n"
        "    sys.stderr.write('a line on stderr\\n')\n"
        "    sys.stderr.flush()\n"
        "    M, N = matrix(x)\n",
    ),
)
"""Edits that keep the solution right but write to stderr: it must still score full marks.
(Plainly: a raw descriptor or a dynamic import would hold the grade for review, by the
source screen.)"""


class CourseError(Exception):
    """An nbgrader step failed; the message holds its output."""


@dataclass(frozen=True)
class CellScore:
    """One autograded test cell of one student."""

    student: str
    cell: str
    score: float | None  # None: waiting for manual grading
    max_score: float


def nbgrader(
    root: Path, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run `nbgrader <args>` in the course at `root` (with `env` added to this process's
    environment); with `check`, raise CourseError on failure."""
    alembic_on_path()  # nbgrader runs `alembic` when it creates the gradebook
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=root,
        env=child_env(**(env or {})),
        capture_output=True,
        text=True,
    )
    if check and done.returncode != 0:
        raise CourseError(f"nbgrader {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


SCRATCH_MARK = ".i1-scratch-course"
"""A file that marks a folder as a scratch course this module made (and may replace)."""


def new_course(root: Path) -> Path:
    """A course at `root` with this repository's config and source, a fresh release and a
    fresh course secret of its own (`grader.seeding`).

    An earlier scratch course at `root` is replaced; any other non-empty folder is refused,
    so a mistyped path can never wipe a real course or its students' work.
    """
    if root.exists() and any(root.iterdir()):
        if not (root / SCRATCH_MARK).is_file():
            raise CourseError(
                f"{root} exists and is not a scratch course; choose an empty or new folder."
            )
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / SCRATCH_MARK).write_text("made by grader.course.new_course; safe to delete\n")
    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    new_secret(root)
    shutil.copytree(REPO / "source" / ASSIGNMENT, root / "source" / ASSIGNMENT)
    nbgrader(root, "generate_assignment", ASSIGNMENT, "--force")
    return root


def solved_notebook(root: Path, edits: tuple[Edit, ...] = ()) -> nbformat.NotebookNode:
    """The release notebook with every solution cell solved, then `edits` applied."""
    source = nbformat.read(root / "source" / ASSIGNMENT / NOTEBOOK, as_version=4)
    release = nbformat.read(root / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    solutions = {
        cell.metadata["nbgrader"]["grade_id"]: cell.source
        for cell in source.cells
        if cell.metadata.get("nbgrader", {}).get("solution")
    }
    for cell in release.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in solutions:
            text = "\n".join(
                line for line in solutions[grade_id].splitlines() if not _MARKER.match(line)
            )
            cell.source = apply(text, edits, skip_absent=True) if cell.cell_type == "code" else text
    return release


SETUP_IMPORTS = (
    "import torch",
    "import triton",
    "import triton.language as tl",
    "from learning.workshops.contracts import device_context, matrix, warps",
)
"""Imports the notebook's setup cell already makes: a shape's cells leave them out."""


def shape_cells(source: str) -> dict[str, str]:
    """A shape module (`grader/shapes/`) split as a student would fill the notebook: the
    kernels and helpers into pass 2, `launch_softmax` into its launcher cell, and
    `strided_softmax` into pass 3."""
    launcher = slice(*function_span(source, "launch_softmax"))
    wrapper = slice(*function_span(source, "strided_softmax"))
    body = source[: launcher.start]
    docstring = ast.get_docstring(ast.parse(source), clean=False)
    if docstring is not None:
        body = body.split('"""', 2)[2]
    kept = [line for line in body.splitlines() if line.strip() not in SETUP_IMPORTS]
    return {
        "pass2": "\n".join(kept).strip() + "\n",
        "launch_softmax": source[launcher].strip() + "\n",
        "pass3": source[wrapper].strip() + "\n",
    }


def shape_notebook(root: Path, shape: str) -> nbformat.NotebookNode:
    """The solved notebook with its softmax written as `grader/shapes/<shape>.py` writes it."""
    notebook = solved_notebook(root)
    cells = shape_cells(base_source(shape))
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in cells:
            cell.source = cells[grade_id]
        elif cell.cell_type == "code" and cell.source.startswith("def launch_softmax("):
            cell.source = cells["launch_softmax"]
    return notebook


def submit(root: Path, student: str, notebook: nbformat.NotebookNode) -> Path:
    """Place `notebook` as `student`'s submission in the course at `root`."""
    folder = root / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / NOTEBOOK
    nbformat.write(notebook, path)
    return path


def submit_release(root: Path, student: str) -> Path:
    """Submit the untouched release notebook for `student`."""
    return submit(root, student, nbformat.read(root / "release" / ASSIGNMENT / NOTEBOOK, 4))


@dataclass(frozen=True)
class AutogradeRun:
    """What `nbgrader autograde` did: its log, and the students it could not grade."""

    log: str
    failed: tuple[str, ...]


def autograde(root: Path, *extra: str, env: dict[str, str] | None = None) -> AutogradeRun:
    """Autograde every submission in the course at `root`.

    nbgrader exits non-zero when any one student fails (a dead kernel, say) and grades the
    rest anyway; those students are listed in `failed`, not raised.
    """
    from grader.grading.readiness import ready_to_grade
    from grader.isolation.sandbox import SandboxUnavailable

    try:
        ready_to_grade(root)
    except SandboxUnavailable as exc:
        raise CourseError(str(exc)) from None
    done = nbgrader(root, "autograde", ASSIGNMENT, "--force", *extra, check=False, env=env)
    log = done.stdout + done.stderr
    failed = tuple(_FAILED_STUDENT.findall(log))
    if done.returncode != 0 and not failed:
        raise CourseError(f"nbgrader autograde failed:\n{log}")
    return AutogradeRun(log, failed)


_FAILED_STUDENT = re.compile(r"error processing assignment '[^']+' for student '([^']+)'")


def cell_scores(root: Path, url: str | None = None) -> list[CellScore]:
    """Every autograded test cell's score, per student, from the course's gradebook (or the
    one at `url`)."""
    from nbgrader.api import MissingEntry

    scores = []
    with open_gradebook(gradebook_url(root, url)) as gradebook:
        for student in gradebook.students:
            try:
                submission = gradebook.find_submission_notebook(
                    NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, student.id
                )
            except MissingEntry:  # nothing was graded for this student
                continue
            for grade in submission.grades:
                ungraded = grade.auto_score is None and grade.manual_score is None
                score = None if ungraded else float(grade.score)  # nbgrader says 0.0
                scores.append(CellScore(student.id, grade.name, score, float(grade.max_score)))
    return scores
