"""Restoring the course's cells before grading: deleted ones back, the source's order kept,
the course's metadata on its cells and none on the student's, no hidden region of the student's."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from traitlets.config.loader import PyFileConfigLoader

from grader import course
from grader.grading.course_cells import CourseCell, read_course_cells
from grader.grading.grading_log import read_record
from grader.grading.restore import in_source_order, out_of_place


def _source(gid: str, *, points: float | None = None, solution: bool = False) -> CourseCell:
    text = "# YOUR CODE HERE\nraise NotImplementedError()" if solution else f"check_{gid}()"
    return CourseCell(gid, "code", text, not solution, "abc", points, solution)


SOURCE = [
    _source("setup"),
    _source("pass1", solution=True),
    _source("test_pass1", points=1),
    _source("hidden_pass1", points=2),
    _source("pass2", solution=True),
    _source("test_pass2", points=1),
]


def _cell(gid: str | None, text: str = "") -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(text or f"student_{gid}()")
    if gid:
        cell.metadata["nbgrader"] = {"grade_id": gid}
    return cell


def _ids(cells) -> list[str]:
    return [c.metadata.get("nbgrader", {}).get("grade_id") or c.source for c in cells]


def test_an_intact_notebook_is_unchanged():
    """Does a submission with every cell in place come out as it went in?"""
    cells = [_cell(s.grade_id) for s in SOURCE]
    cells.insert(2, _cell(None, "mine"))
    ordered, missing, moved = in_source_order(cells, SOURCE)
    assert ordered == cells and missing == [] and moved == []


def test_deleted_cells_come_back_in_their_place():
    """Does a deleted test cell come back whole after its solution, and a deleted solution
    cell as its stub, each marked as put back?"""
    cells = [_cell(g) for g in ("setup", "hidden_pass1", "pass2", "test_pass2")]
    ordered, missing, moved = in_source_order(cells, SOURCE)
    assert _ids(ordered) == [s.grade_id for s in SOURCE]
    assert missing == ["pass1", "test_pass1"] and moved == []
    stub, test = ordered[1], ordered[2]
    assert "raise NotImplementedError()" in stub.source and stub.metadata.nbgrader["solution"]
    assert "check_test_pass1()" in test.source and test.metadata.nbgrader["points"] == 1
    assert test.metadata.nbgrader["locked"] and test.metadata["editable"] is False
    assert "Put back by the grader" in test.source.splitlines()[0]


def test_moved_cells_go_back_and_extra_cells_travel_with_their_cell():
    """Is a test cell moved to the end put back in place, and does each of the student's own
    cells stay after the course cell it followed?"""
    order = ["mine-first", "setup", "pass1", "mine-after-pass1", "hidden_pass1", "pass2"]
    order += ["test_pass2", "test_pass1", "mine-at-end"]
    cells = [_cell(None, o) if o.startswith("mine") else _cell(o) for o in order]
    ordered, missing, moved = in_source_order(cells, SOURCE)
    assert _ids(ordered) == [
        "mine-first",
        "setup",
        "pass1",
        "mine-after-pass1",
        "test_pass1",
        "mine-at-end",
        "hidden_pass1",
        "pass2",
        "test_pass2",
    ]
    assert missing == [] and moved == ["test_pass1"]


def test_out_of_place_names_the_fewest_moves():
    """Are only the cells outside the longest in-order run called moved?"""
    order = list("abcdef")
    assert out_of_place(list("abcdef"), order) == []
    assert out_of_place(list("fabcde"), order) == ["f"]
    assert out_of_place(list("badcfe"), order) in (["a", "c", "e"], ["b", "d", "f"])


# The course's metadata, from a scratch course's gradebook: the sanitize steps of the
# course's own nbgrader_config.py, run here on a submission as `nbgrader autograde` runs them.

FAKE_REGION = (
    "### BEGIN HIDDEN TESTS\n"
    "print('FAKE REGION RAN')\n"
    'expect_hidden("x")\n'
    "### END HIDDEN TESTS\n"
    "print('a cell of my own')"
)
"""A hidden-test region a student writes into a cell of their own."""


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A scratch course with a generated assignment (its gradebook holds the source cells)."""
    return course.new_course(tmp_path_factory.mktemp("restore") / "course")


def _sanitized(root: Path, nb, student: str):
    """`nb` after the course's sanitize preprocessors, and the student's restored notes."""
    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    config.CourseDirectory.root = str(root)
    resources = {
        "nbgrader": {
            "db_url": _gradebook(root)[0],
            "assignment": course.ASSIGNMENT,
            "notebook": _gradebook(root)[2],
            "student": student,
        }
    }
    for step in config.Autograde.sanitize_preprocessors:
        nb, resources = step(config=config).preprocess(nb, resources)
    record = read_record(root, course.ASSIGNMENT, student)  # none: nothing was restored
    return nb, record.restored if record else []


def _by_id(nb) -> dict:
    return {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells if "nbgrader" in c.metadata}


FLAGS = ("grade", "solution", "locked", "points", "grade_id")


def test_an_honest_solution_is_restored_without_a_note(scratch):
    """Does a plain solution come through the sanitize steps with nothing noted and its
    cells' flags as the release has them?"""
    release = _by_id(course.solved_notebook(scratch))
    nb, notes = _sanitized(scratch, course.solved_notebook(scratch), "honest")
    assert notes == []
    for gid, cell in _by_id(nb).items():
        assert {f: cell.metadata.nbgrader.get(f) for f in FLAGS} == {
            f: release[gid].metadata.nbgrader.get(f) for f in FLAGS
        }


def test_flipped_flags_are_put_back_from_the_course(scratch):
    """Is a submission whose course cells' grade, solution, locked and points flags were
    flipped graded with the course's flags (not refused as corrupted), each change in the
    grading log?"""
    nb = course.solved_notebook(scratch)
    cells = _by_id(nb)
    cells["test_pass1"].metadata.nbgrader["grade"] = False
    cells["hidden_pass1"].metadata.nbgrader.update(points=100, solution=True)
    cells["pass1"].metadata.nbgrader["locked"] = True
    cells["prediction"].metadata.nbgrader["points"] = 50
    cells["hidden_pass3"].metadata["nbgrader"] = "grade me"
    index = nb.cells.index(cells["hidden_pass3"])
    release = _by_id(course.solved_notebook(scratch))
    nb, notes = _sanitized(scratch, nb, "flipped")
    for gid, cell in _by_id(nb).items():
        assert {f: cell.metadata.nbgrader.get(f) for f in FLAGS} == {
            f: release[gid].metadata.nbgrader.get(f) for f in FLAGS
        }
    assert "BEGIN HIDDEN TESTS" in _by_id(nb)["hidden_pass3"].source  # the course's cell
    assert set(notes) == {
        "test_pass1 (flipped: its grade flag put back)",
        "hidden_pass1 (flipped: its solution flag, points (2) put back)",
        "pass1 (flipped: its locked flag put back)",
        "prediction (flipped: its points (2) put back)",
        f"cell {index + 1}, the student's own (it carried nbgrader metadata nbgrader cannot "
        "read; its nbgrader metadata taken off: never graded)",
        "hidden_pass3 (deleted: the cell put back)",  # its grade id was unreadable
    }


def test_student_cells_lose_any_nbgrader_metadata(scratch):
    """Does a cell of the student's own that calls itself a grade cell (a grade flag with
    no grade id, an id the course lacks, a course cell's id before that cell) stay in the
    notebook as ungraded code, and the notebook stay gradable?"""
    nb = course.solved_notebook(scratch)
    claims = [
        {"grade": True, "points": 5},
        {"grade": True, "solution": False, "locked": True, "grade_id": "mine", "points": 5},
        {"grade": True, "grade_id": "test_pass1", "points": 1, "locked": True},
    ]
    for i, meta in enumerate(claims):
        cell = nbformat.v4.new_code_cell(f"print('student cell {i}')")
        cell.metadata["nbgrader"] = meta
        nb.cells.insert(2, cell)
    nb, notes = _sanitized(scratch, nb, "claims")
    mine = [c for c in nb.cells if c.source.startswith("print('student cell")]
    assert len(mine) == 3 and all("nbgrader" not in c.metadata for c in mine)
    release = _by_id(course.solved_notebook(scratch))
    assert _by_id(nb).keys() == release.keys()
    assert _by_id(nb)["test_pass1"].source == release["test_pass1"].source
    taken_off = "; its nbgrader metadata taken off: never graded)"
    assert [n.split(", the student's own (")[1] for n in notes] == [
        "it repeated the grade id of the course's cell test_pass1" + taken_off,
        "its grade id 'mine' is not the course's" + taken_off,
        "it said grade: true" + taken_off,
    ]


def test_hidden_regions_the_course_did_not_write_are_cut_out(scratch):
    """Is a hidden-test region the student wrote (in a cell of their own, in a solution
    cell, in a markdown cell made code) cut out before grading, the rest of the cell kept,
    while the course's hidden cells keep theirs?"""
    nb = course.solved_notebook(scratch)
    nb.cells.insert(3, nbformat.v4.new_code_cell(FAKE_REGION))
    solution = _by_id(nb)["pass1"]
    solution.source += "\n" + FAKE_REGION
    visible = solution.source.replace(FAKE_REGION, "print('a cell of my own')")
    nb, notes = _sanitized(scratch, nb, "regions")
    assert nb.cells[3].source == "print('a cell of my own')"
    assert _by_id(nb)["pass1"].source == visible
    course_regions = {
        gid for gid, cell in _by_id(nb).items() if "### BEGIN HIDDEN TESTS" in cell.source
    }
    assert course_regions == {
        c.grade_id for c in read_course_cells(*_gradebook(scratch)) if c.hidden is not None
    }
    assert notes == [
        "cell 4, the student's own (a hidden-test region the course did not write: cut out)",
        "pass1 (a hidden-test region the course did not write: cut out)",
    ]


def _gradebook(root: Path) -> tuple[str, str, str]:
    return f"sqlite:///{root / 'gradebook.db'}", course.ASSIGNMENT, "strided_softmax"


def test_a_renamed_course_cell_is_the_students_and_the_course_cell_comes_back(scratch):
    """Is a hidden cell whose grade id the student changed graded as nothing, with the
    course's cell put back whole (its hidden region included) in its place?"""
    nb = course.solved_notebook(scratch)
    renamed = _by_id(nb)["hidden_pass1"]
    renamed.metadata.nbgrader["grade_id"] = "hidden_pass1_mine"
    nb, notes = _sanitized(scratch, nb, "renamed")
    restored = _by_id(nb)["hidden_pass1"]
    assert "nbgrader" not in renamed.metadata
    after = nb.cells.index(renamed) < nb.cells.index(restored)
    assert after and nb.cells.index(restored) < nb.cells.index(_by_id(nb)["pass2"])
    assert restored.source.startswith("# Put back by the grader")
    assert "### BEGIN HIDDEN TESTS" in restored.source
    assert notes == [
        f"cell {nb.cells.index(renamed) + 1}, the student's own (its grade id "
        "'hidden_pass1_mine' is not the course's; its nbgrader metadata taken off: never "
        "graded)",
        "hidden_pass1 (deleted: the cell put back)",
    ]
