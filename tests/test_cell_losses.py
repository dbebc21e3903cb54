"""Which cells each bug in the zoo loses, and that every correct decomposition loses none:
the graded cells' checks run directly on each submission (tests/notebook_cells.py), with
no nbgrader. The shared course's autograde shows nbgrader takes the same cells
(tests/test_nbgrader_e2e.py)."""

from __future__ import annotations

import nbformat
import pytest
from notebook_cells import SOURCE, graded_cells, lost_cells

from grader import course
from grader.grading.hidden import course_draw
from grader.zoo import BUGS
from grader.zoo.bug import DECOMPOSITIONS

KILLS_KERNEL = ("segfaults", "never-returns")
"""Bugs that kill or hang the kernel in a visible cell (as they would this process): nbgrader
grades nothing of theirs, which the shared course's crasher shows."""
CRASHES_CHILDREN = ("crash", "memory", "timeout")
ONLY_REPLAY_SHOWS = ("not-from-kernel", "held")
"""Hints of bugs whose hidden cases crash or exhaust their process, and of bugs only the clean
room's replay of a child's launches shows: they run isolated, as the grader runs them."""
GRADED = [b for b in BUGS if b.base == "reference" and b.name not in KILLS_KERNEL]
"""The solved notebook is built from the reference, so only its bugs apply to it."""
OPTIONAL_CELLS = frozenset({"test_inplace", "hidden_inplace", "test_backward", "hidden_backward"})
OPTIONAL_FUNCTIONS = frozenset(
    {
        "softmax_inplace_kernel",
        "strided_softmax_",
        "softmax_backward_kernel",
        "strided_softmax_backward",
    }
)
"""The optional exercises' cells (extra credit), and the only functions they run: what a
bug that edits none of these loses is counted without them (`Bug.loses` leaves them out)."""


def _submitted(tmp_path, notebook):
    path = tmp_path / course.NOTEBOOK
    nbformat.write(notebook, path)
    return path


@pytest.fixture(scope="module")
def solution(tmp_path_factory):
    """The solved notebook, which loses no cell (checked below): a submission's cells whose
    code is the solution's are not run again (`notebook_cells.same_cells`), about 3 s of
    hidden cases saved for a bug of the wrapper."""
    return _submitted(tmp_path_factory.mktemp("solution"), course.solved_notebook(course.REPO))


@pytest.mark.parametrize("bug", GRADED, ids=[b.name for b in GRADED])
def test_bug_loses_exactly_its_cells(bug, solution, tmp_path):
    """Does each buggy submission lose exactly the cells that test its bug?"""
    path = _submitted(tmp_path, course.solved_notebook(course.REPO, bug.edits))
    isolated = bug.hint in CRASHES_CHILDREN + ONLY_REPLAY_SHOWS
    optional = any(edit.function in OPTIONAL_FUNCTIONS for edit in bug.edits)
    skip = frozenset() if optional else OPTIONAL_CELLS
    assert lost_cells(path, course_draw(), isolated, skip, like=solution) == set(bug.loses)


@pytest.mark.parametrize("shape", DECOMPOSITIONS)
def test_every_decomposition_loses_nothing(shape, solution, tmp_path):
    """Does a correct kernel decomposed another way (another grid axis, a persistent loop,
    several rows or column tiles per program, a compiled handle, autotune, heuristics)
    pass every correctness cell it reaches, hidden ones included?"""
    path = _submitted(tmp_path, course.shape_notebook(course.REPO, shape))
    assert lost_cells(path, course_draw(), like=solution) == set()


def test_a_cell_runs_again_where_the_submission_differs(solution, tmp_path):
    """Does `same_cells` leave out only the cells whose code the submission shares with the
    solution: for a wrapper's bug the pass-3 cells run again, for the kernel's the pass-2
    and pass-3 cells, and for a copy of the solution none?"""
    from notebook_cells import same_cells

    every = {grade_id for grade_id, _ in graded_cells(nbformat.read(SOURCE, as_version=4))}
    wrapper = next(b for b in GRADED if b.name == "no-validation")
    kernel = next(b for b in GRADED if b.name == "pads-with-zero")
    runs = {}
    for bug in (wrapper, kernel):
        (tmp_path / bug.name).mkdir()
        path = _submitted(tmp_path / bug.name, course.solved_notebook(course.REPO, bug.edits))
        runs[bug.name] = every - same_cells(path, solution)
    pass3 = {"test_pass3", "hidden_pass3", "hidden_timing"}
    assert runs == {wrapper.name: pass3, kernel.name: pass3 | {"test_pass2", "hidden_pass2"}}
    assert same_cells(solution, solution) == every


def test_the_solution_loses_nothing_and_the_release_everything(tmp_path):
    """Do the direct checks pass the solution and fail every cell of the untouched release
    (so they can fail, and can pass)?"""
    solution = _submitted(tmp_path, course.solved_notebook(course.REPO))
    assert lost_cells(solution, course_draw()) == set()
    release = tmp_path / "release" / course.NOTEBOOK
    release.parent.mkdir()
    release.write_bytes(
        (course.REPO / "release" / course.ASSIGNMENT / course.NOTEBOOK).read_bytes()
    )
    cells = graded_cells(nbformat.read(SOURCE, as_version=4))
    graded = {grade_id for grade_id, source in cells if "timing_points" not in source}
    assert lost_cells(release, course_draw()) == graded
