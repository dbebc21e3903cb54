"""The one graded course the end-to-end tests share, built and autograded once a session.

A full `nbgrader autograde` costs tens of seconds a submission on 2 cores, so every
submission here serves several test modules, and a fact that needs no nbgrader is proven
below it (which cells each bug loses: tests/test_cell_losses.py). The cohort:

- the sample cohort (`grader.sample_cohort`): the solution, a late one, five of its eight
  bugs (one for each set of cells a bug of the cohort loses; the other three are proven
  directly, SAME_LOSSES), the copy-first shortcut, the untouched release, a crasher, a
  student who sent nothing;
- submissions nbgrader itself must handle: a noisy solution (stderr, warnings), deleted and
  moved cells, a deleted solution cell, a file that is not JSON, and an autotuned kernel
  (a decorator over the kernel, loaded from the notebook).

Hostile submissions (tampering from the kernel, probes of the sandbox) are graded once, in
the attack suite's course (tests/exploits/), beside honest and fair-wrong baselines.
"""

from __future__ import annotations

import copy
import shutil
from dataclasses import dataclass
from pathlib import Path

import nbformat

from grader import course, sample_cohort

SAME_LOSSES = ("bug-adds-storage-offset", "bug-output-like-input", "bug-launches-for-zero-rows")
"""Sample students left out here: each loses the cells another bug graded here loses
(ignores-column-stride, no-validation), and which cells each loses is proven without
nbgrader (tests/test_cell_losses.py), which the graded bugs show nbgrader agrees with."""
SHAPES_GRADED = ("autotuned",)
"""Decompositions graded through nbgrader too (all of them: tests/test_cell_losses.py)."""


def grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def without(notebook, *grade_ids: str):
    """`notebook` with the cells of `grade_ids` deleted."""
    notebook = copy.deepcopy(notebook)
    notebook.cells = [c for c in notebook.cells if grade_id(c) not in grade_ids]
    return notebook


def rearranged(notebook):
    """The solution with a visible and a hidden test cell deleted, a test cell and a
    solution cell moved to the end, a markdown cell moved to the top, and a cell added."""
    notebook = without(notebook, "test_pass1", "hidden_pass3")
    cells = notebook.cells
    for moved in ("test_pass2", "worksheet_solution"):
        cell = next(c for c in cells if grade_id(c) == moved)
        cells.remove(cell)
        cells.append(cell)
    markdown = next(c for c in cells if c.source.startswith("## 4."))
    cells.remove(markdown)
    cells.insert(0, markdown)
    cells.insert(5, nbformat.v4.new_code_cell("print('a cell of my own')"))
    return notebook


@dataclass(frozen=True)
class SharedCourse:
    """The graded course: its folder, nbgrader's run, and every (student, cell) score."""

    root: Path
    run: course.AutogradeRun
    scores: dict[str, dict[str, tuple[float | None, float]]]


def _on_time(path: Path) -> None:
    (path.parent / "timestamp.txt").write_text(sample_cohort.ON_TIME + "\n")


def _submit(root: Path, student: str, notebook) -> Path:
    path = course.submit(root, student, notebook)
    _on_time(path)
    return path


def build(root: Path) -> None:
    """Every submission of the shared course, in the course at `root`."""
    sample_cohort.build(root)
    for student in SAME_LOSSES:
        shutil.rmtree(root / "submitted" / student)
    solved = course.solved_notebook(root)
    _submit(root, "noisy", course.solved_notebook(root, course.NOISY))
    _submit(root, "rearranged", rearranged(solved))
    _submit(root, "no-addresses", without(solved, "addresses"))
    _submit(root, "invalid-json", solved).write_text("{not json")
    for shape in SHAPES_GRADED:
        _submit(root, f"shape-{shape}", course.shape_notebook(root, shape))


def graded(root: Path) -> SharedCourse:
    """Build the shared course at `root` and autograde it with nbgrader's own command."""
    build(root)
    run = course.autograde(root)
    scores: dict[str, dict] = {}
    for cell in course.cell_scores(root):
        scores.setdefault(cell.student, {})[cell.cell] = (cell.score, cell.max_score)
    return SharedCourse(root, run, scores)
