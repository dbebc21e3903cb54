"""nbgrader end to end on CPU: a scratch course, a cohort of submissions, real autograding."""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch

from grader import course
from grader.zoo import BUGS, SHAPES

pytestmark = pytest.mark.nbgrader

KILLS_KERNEL = ("segfaults", "never-returns")
"""Bugs that kill or hang the grading kernel in a visible test cell (in-process by design:
students run those on their live code), so nbgrader grades nothing for them."""
GRADED = [b for b in BUGS if b.base == "reference" and b.name not in KILLS_KERNEL]
"""The solved notebook is built from the reference, so only its bugs apply to it."""
GPU_CELLS = set() if torch.cuda.is_available() else {"hidden_timing"}
"""Cells that cannot score without a GPU: every submission loses them here."""
AUTOGRADED = 11
CRASHING = next(b for b in BUGS if b.name == "segfaults")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Autograde the solution, the untouched release, a noisy solution, the zoo and every
    correct decomposition in grader/shapes/, once."""
    root = course.new_course(tmp_path_factory.mktemp("course"))
    course.submit(root, "solution", course.solved_notebook(root))
    course.submit_release(root, "untouched")
    course.submit(root, "noisy", course.solved_notebook(root, course.NOISY))
    course.submit(root, "crasher", course.solved_notebook(root, CRASHING.edits))
    for bug in GRADED:
        course.submit(root, bug.name, course.solved_notebook(root, bug.edits))
    for shape in SHAPES:
        course.submit(root, f"shape-{shape}", course.shape_notebook(root, shape))
    run = course.autograde(root)
    scores = defaultdict(dict)
    for cell in course.cell_scores(root):
        scores[cell.student][cell.cell] = (cell.score, cell.max_score)
    return root, run, scores


def lost(cells: dict) -> set[str]:
    """The autograded cells that scored below their points, GPU-only cells aside."""
    return {
        name
        for name, (score, max_score) in cells.items()
        if score is not None and score < max_score and name not in GPU_CELLS
    }


def test_solution_scores_full_marks(graded):
    """Does the reference solution score every point of every test cell?"""
    _, _, scores = graded
    assert len(scores["solution"]) == AUTOGRADED + 1  # and the prediction, graded by hand
    assert lost(scores["solution"]) == set()
    assert scores["solution"]["prediction"][0] is None


def test_untouched_release_scores_zero(graded):
    """Does the untouched release score zero on every test cell?"""
    _, _, scores = graded
    assert len(scores["untouched"]) == AUTOGRADED + 1  # nbgrader scores an empty answer 0
    assert all(score == 0 for score, _ in scores["untouched"].values())


def test_stderr_and_warnings_do_not_zero_a_cell(graded):
    """Does a right solution that warns and writes to stderr still score full marks?"""
    _, _, scores = graded
    assert lost(scores["noisy"]) == set()


@pytest.mark.parametrize("shape", SHAPES)
def test_every_decomposition_scores_full_marks(graded, shape):
    """Does a correct kernel decomposed another way (another grid axis, a persistent loop,
    several rows or column tiles per program, a compiled handle, autotune, heuristics)
    score every point of every correctness cell, hidden ones included?"""
    _, _, scores = graded
    assert len(scores[f"shape-{shape}"]) == AUTOGRADED + 1
    assert lost(scores[f"shape-{shape}"]) == set()


@pytest.mark.parametrize("bug", GRADED, ids=[b.name for b in GRADED])
def test_bug_loses_exactly_its_cells(graded, bug):
    """Does each buggy submission lose exactly the cells that test its bug?"""
    _, _, scores = graded
    assert lost(scores[bug.name]) == set(bug.loses)


def test_crashing_submission_does_not_stop_the_others(graded):
    """When a submission kills the kernel, is it reported and is everyone else graded?"""
    root, run, scores = graded
    assert run.failed == ("crasher",)
    assert not (root / "autograded" / "crasher" / course.ASSIGNMENT).exists()
    assert sum(score or 0 for score, _ in scores["crasher"].values()) == 0
    graded_students = {s for s, cells in scores.items() if len(cells) == AUTOGRADED + 1}
    expected = {"solution", "untouched", "noisy"} | {b.name for b in GRADED}
    assert expected | {f"shape-{s}" for s in SHAPES} <= graded_students
