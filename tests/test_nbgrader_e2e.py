"""nbgrader end to end on CPU: the shared course (tests/shared_course.py), autograded for
real once; each test reads what nbgrader made of one kind of submission."""

from __future__ import annotations

import html
import re

import nbformat
import pytest
import torch
from notebook_cells import lost_cells
from shared_course import SAME_LOSSES, SHAPES_GRADED, grade_id

from grader import course
from grader.grading.grading_log import read_record
from grader.grading.hidden import hidden_cases
from grader.grading.hidden_regions import split_hidden_tests
from grader.grading.trusted import draw_for
from grader.sample_cohort import members
from grader.seeding import course_secret
from grader.zoo import BUGS
from learning.workshops.checking.cases import OPS
from learning.workshops.checking.views import geometry

pytestmark = pytest.mark.nbgrader

BUGGY = {
    m.student: next(b for b in BUGS if b.edits == m.edits)
    for m in members()
    if m.kind == "bug" and m.student not in SAME_LOSSES
}
"""The shared course's buggy students and their bugs (every bug: tests/test_cell_losses.py)."""
GPU_CELLS = set() if torch.cuda.is_available() else {"hidden_timing"}
"""Cells that cannot score without a GPU: every submission loses them here."""
AUTOGRADED = 15
EXTRA_CREDIT = ("hidden_inplace", "hidden_backward")
"""The optional exercises' hidden cells: 0 points of their own, 1 point of extra credit each."""
SMOKE_FAILS = "bug-pads-with-zero"
"""A student whose bug fails the hidden cells' quick checks too: the hidden cases must
still run."""


@pytest.fixture(scope="module")
def graded(shared_course):
    """The shared course: its folder, nbgrader's run and every student's cell scores."""
    return shared_course.root, shared_course.run, shared_course.scores


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


def test_optional_exercises_earn_extra_credit_only(graded):
    """Does passing an optional exercise add its extra credit to the score but not to the
    maximum, and does leaving it out cost nothing?"""
    _, _, scores = graded
    for cell in EXTRA_CREDIT:
        assert scores["solution"][cell] == (1.0, 0.0)
        assert scores["untouched"][cell] == (0.0, 0.0)
        assert scores["bug-ignores-column-stride"][cell] == (1.0, 0.0)  # its own code is right


def test_untouched_release_scores_zero(graded):
    """Does the untouched release score zero on every test cell?"""
    _, _, scores = graded
    assert len(scores["untouched"]) == AUTOGRADED + 1  # nbgrader scores an empty answer 0
    assert all(score == 0 for score, _ in scores["untouched"].values())


def test_stderr_and_warnings_do_not_zero_a_cell(graded):
    """Does a right solution that warns and writes to stderr still score full marks?"""
    _, _, scores = graded
    assert lost(scores["noisy"]) == set()


@pytest.mark.parametrize("shape", SHAPES_GRADED)
def test_every_decomposition_scores_full_marks(graded, shape):
    """Does a correct kernel decomposed another way (another grid axis, a persistent loop,
    several rows or column tiles per program, a compiled handle, autotune, heuristics)
    score every point of every correctness cell, hidden ones included?"""
    _, _, scores = graded
    assert len(scores[f"shape-{shape}"]) == AUTOGRADED + 1
    assert lost(scores[f"shape-{shape}"]) == set()


@pytest.mark.parametrize("student", sorted(BUGGY))
def test_bug_loses_exactly_its_cells(graded, student, tmp_path):
    """Does each buggy submission lose exactly the cells that test its bug, and the cells
    the direct checks say it loses on its own draw (so that those stand for nbgrader for
    every bug)?"""
    root, _, scores = graded
    assert lost(scores[student]) == set(BUGGY[student].loses)
    submitted = root / "submitted" / student / course.ASSIGNMENT / course.NOTEBOOK
    solution = root / "submitted" / "solution" / course.ASSIGNMENT / course.NOTEBOOK
    draw = draw_for(f"sqlite:///{root / 'gradebook.db'}", course.ASSIGNMENT, student, root)
    isolated = BUGGY[student].hint in ("crash", "memory", "timeout")
    assert lost_cells(submitted, draw, isolated, like=solution) == lost(scores[student])


def test_crashing_submission_does_not_stop_the_others(graded):
    """When a submission kills the kernel, is it reported and is everyone else graded?"""
    root, run, scores = graded
    assert set(run.failed) == {"crasher", "invalid-json"}
    assert not (root / "autograded" / "crasher" / course.ASSIGNMENT).exists()
    assert sum(score or 0 for score, _ in scores["crasher"].values()) == 0
    graded_students = {s for s, cells in scores.items() if len(cells) == AUTOGRADED + 1}
    expected = {"solution", "untouched", "noisy", *BUGGY}
    assert expected | {f"shape-{s}" for s in SHAPES_GRADED} <= graded_students


def total(cells: dict) -> float:
    return sum(score or 0 for score, _ in cells.values())


def test_deleted_and_moved_cells_are_put_back(graded):
    """With a visible and a hidden test cell deleted and cells moved, does the notebook
    score what the intact one scores, and does the grading log say what was put back?"""
    root, _, scores = graded
    assert len(scores["rearranged"]) == AUTOGRADED + 1
    assert total(scores["rearranged"]) == total(scores["solution"])
    record = read_record(root, course.ASSIGNMENT, "rearranged")
    assert record.outcome == ("graded", "")
    put_back = " ".join(record.restored)
    for cell in ("test_pass1 (deleted", "hidden_pass3 (deleted", "test_pass2 (moved"):
        assert cell in put_back
    assert read_record(root, course.ASSIGNMENT, "solution").restored == []


def test_a_deleted_solution_cell_costs_only_its_tests(graded):
    """With a solution cell deleted, does its stub come back and the rest grade normally?"""
    root, _, scores = graded
    assert lost(scores["no-addresses"]) == {"test_addresses", "hidden_addresses"}
    restored = read_record(root, course.ASSIGNMENT, "no-addresses").restored
    assert restored == ["addresses (deleted: its stub put back)"]


def test_an_invalid_notebook_is_ungradable_with_its_cause(graded):
    """Is a notebook that is not JSON recorded as ungradable, saying so, not as a zero?"""
    root, run, _ = graded
    assert "invalid-json" in run.failed
    status, cause = read_record(root, course.ASSIGNMENT, "invalid-json").outcome
    assert status == "ungradable" and cause.startswith("invalid notebook strided_softmax.ipynb")
    status, cause = read_record(root, course.ASSIGNMENT, "crasher").outcome
    assert status == "ungradable" and cause.startswith("dead kernel")


def test_a_failed_quick_check_does_not_hide_the_hidden_cases(graded):
    """When a hidden cell's quick check fails, do its hidden cases still run and say so?"""
    root, _, _ = graded
    path = root / "autograded" / SMOKE_FAILS / course.ASSIGNMENT / course.NOTEBOOK
    cell = next(c for c in nbformat.read(path, 4).cells if grade_id(c) == "hidden_pass2")
    text = "\n".join(o.get("text", "") + o.get("evalue", "") for o in cell.outputs)
    assert "The quick check before the hidden tests failed" in text
    assert "hidden cases fail" in text and "Hint [padding]" in text


@pytest.fixture(scope="module")
def feedback(graded):
    """`nbgrader generate_feedback` over the whole graded cohort: student -> (files, text)."""
    root, _, _ = graded
    course.nbgrader(root, "generate_feedback", course.ASSIGNMENT, "--force")
    found = {}
    for folder in (root / "feedback").iterdir():
        files = sorted(p.name for p in (folder / course.ASSIGNMENT).iterdir())
        page = (folder / course.ASSIGNMENT / "strided_softmax.html").read_text()
        page = re.sub(r"<style.*?</style>", "", page, flags=re.S)  # nbgrader's own CSS
        found[folder.name] = (files, html.unescape(re.sub(r"<[^>]+>", "", page)))
    return found


def leaks(root, student: str) -> list[str]:
    """What must never reach a student: hidden tests' lines and markers, grader names and
    paths, sidecar names, the secret, and every hidden case's name and view."""
    source = nbformat.read(root / "source" / course.ASSIGNMENT / course.NOTEBOOK, 4)
    regions = [split_hidden_tests(c.source)[1] or "" for c in source.cells]
    lines = [line.strip() for region in regions for line in region.splitlines()]
    words = [line for line in lines if len(line) > 12]
    words += ["BEGIN HIDDEN", "END HIDDEN", "grader.", "grader/", "/course/", "i1_hints"]
    words += ["i1_timing", "Instructor notes", course_secret(root)]
    draw = draw_for(f"sqlite:///{root / 'gradebook.db'}", course.ASSIGNMENT, student, root)
    for op in OPS:
        for case in hidden_cases(op, draw):
            words.append(case.name)
            if not case.bad_input:
                g = geometry(case.layout, case.rows, case.cols)
                words.append(f"({case.rows}, {case.cols}) view, strides {g.strides}")
    return words


def test_feedback_shows_no_hidden_test(graded, feedback):
    """Does no student's feedback hold a hidden test's source or markers, a grader module
    or path, a sidecar, the secret, or any of their hidden cases? (What the student wrote
    comes back as written, and is not counted. Hostile feedback: tests/exploits/.)"""
    root, _, _ = graded
    hits = {}
    for student, (files, text) in feedback.items():
        assert set(files) - {"timestamp.txt"} == {"strided_softmax.html"}, student
        own = (root / "submitted" / student / course.ASSIGNMENT / course.NOTEBOOK).read_text()
        found = [word for word in leaks(root, student) if word in text and word not in own]
        if found:
            hits[student] = found
    graded_ones = (root / "autograded").glob(f"*/{course.ASSIGNMENT}/{course.NOTEBOOK}")
    assert set(feedback) == {path.parents[1].name for path in graded_ones}
    assert hits == {}


def test_feedback_says_what_failed_and_why(feedback):
    """Does a failing hidden cell's feedback give the kinds of view, the hint and a freshly
    drawn example, and a correct one say its hidden cases pass?"""
    _, text = feedback[SMOKE_FAILS]
    assert "hidden cases fail. The kinds of input that failed:" in text and "Hint [padding]" in text
    assert "An example that fails the same way" in text
    assert "hidden cases pass" in feedback["solution"][1]
