"""Only the course's cells are grader input: hidden regions, flags and points are read from
the gradebook's source cells, and nothing a student writes is run as a check."""

from __future__ import annotations

import copy
import dataclasses
import shutil
from collections import defaultdict
from pathlib import Path

import nbformat
import pytest
import torch

from grader import course
from grader.grading.course_cells import (
    CourseNotFound,
    course_cells_of,
    course_for,
    course_hidden_checks,
    graded_regions,
    read_course_cells,
)
from grader.grading.grading_log import read_record
from grader.grading.hidden_regions import split_hidden_tests

NOTEBOOK = course.NOTEBOOK.removesuffix(".ipynb")
HIDDEN_CHECKS = {
    "hidden_addresses": [("expect_address_table", ["address_table"], {})],
    "hidden_pass1": [("expect_hidden", ["copy_rows"], {})],
    "hidden_pass2": [("expect_hidden", ["softmax_kernel"], {})],
    "hidden_pass3": [("expect_hidden", ["strided_softmax"], {})],
    "hidden_worksheet": [("expect_worksheet", ["worksheet"], {})],
    "hidden_timing": [("timing_points", [], {"max_points": 2})],
    "hidden_inplace": [("expect_hidden", ["strided_softmax_"], {})],
    "hidden_backward": [("expect_hidden", ["strided_softmax_backward"], {})],
}
"""What the course's hidden regions call (source/i1_strided_softmax/strided_softmax.ipynb)."""
FAKE_REGION = (
    "### BEGIN HIDDEN TESTS\n"
    "print('FAKE REGION RAN')\n"
    'expect_hidden("x")\n'
    "### END HIDDEN TESTS\n"
    "print('a cell of my own')"
)
"""A hidden-test region a student writes into a cell of their own: graded, it would call a
check of an op that does not exist (an internal error of the grader, until now)."""


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A scratch course with a generated assignment (its gradebook holds the source cells)."""
    return course.new_course(tmp_path_factory.mktemp("course_cells") / "course")


def _url(root: Path) -> str:
    return f"sqlite:///{root / 'gradebook.db'}"


def _grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def test_course_cells_are_the_sources_cells(scratch):
    """Are the course's cells read from the gradebook with the source notebook's grade ids,
    order, types, flags and points, and each hidden region exactly where the source has one?"""
    source = nbformat.read(scratch / "source" / course.ASSIGNMENT / course.NOTEBOOK, 4)
    expected = [c for c in source.cells if _grade_id(c)]
    cells = read_course_cells(_url(scratch), course.ASSIGNMENT, NOTEBOOK)
    assert [c.grade_id for c in cells] == [_grade_id(c) for c in expected]
    for cell, want in zip(cells, expected, strict=True):
        meta = want.metadata.nbgrader
        assert (cell.cell_type, cell.grade, cell.solution, cell.locked) == (
            want.cell_type,
            meta["grade"],
            meta["solution"],
            meta["locked"],
        )
        assert cell.points == (float(meta["points"]) if meta["grade"] else None)
        assert cell.hidden == split_hidden_tests(want.source)[1]
    assert dict(course_hidden_checks(cells)) == HIDDEN_CHECKS


def test_the_source_notebook_gives_the_gradebooks_cells(scratch):
    """Without a gradebook (tests, tools), does the course's source notebook give the same
    course cells as the gradebook `generate_assignment` filled (checksums aside), with no
    solution's source in them?"""
    source = nbformat.read(scratch / "source" / course.ASSIGNMENT / course.NOTEBOOK, 4)
    saved = [
        dataclasses.replace(c, checksum=None, source="" if c.solution else c.source)
        for c in _course(scratch)
    ]
    assert list(course_cells_of(source)) == saved
    assert all(c.source == "" for c in course_cells_of(source) if c.solution)


def test_the_gradebook_is_read_once_per_process(scratch, tmp_path):
    """Grading a cohort, is the gradebook read once, not once a student, and does a process
    that forgets the cells read them afresh?"""
    shutil.copy(scratch / "gradebook.db", tmp_path / "gradebook.db")
    first = read_course_cells(_url(tmp_path), course.ASSIGNMENT, NOTEBOOK)
    (tmp_path / "gradebook.db").unlink()
    resources = {"nbgrader": {"db_url": _url(tmp_path), "assignment": course.ASSIGNMENT}}
    resources["nbgrader"]["notebook"] = NOTEBOOK
    assert course_for(resources) is first
    read_course_cells.cache_clear()
    with pytest.raises(CourseNotFound, match="run `nbgrader generate_assignment i1_strided"):
        read_course_cells(_url(tmp_path), course.ASSIGNMENT, NOTEBOOK)


def test_outside_an_autograde_there_are_no_course_cells():
    """Asked for the course's cells without nbgrader's resources, is the answer an error
    naming what is missing?"""
    with pytest.raises(CourseNotFound, match="lacks db_url, assignment, notebook"):
        course_for({})


def _course(root: Path):
    return read_course_cells(_url(root), course.ASSIGNMENT, NOTEBOOK)


def test_graded_regions_come_from_the_course_never_the_submission(scratch):
    """Whatever a submission writes (a region of its own in a cell claiming a grade id the
    course lacks, in a cell with no metadata, another region in a course hidden cell), are
    the regions graded the course's, at the course's hidden cells?"""
    nb = course.solved_notebook(scratch)
    claims = nbformat.v4.new_code_cell(FAKE_REGION)
    claims.metadata["nbgrader"] = {"grade": True, "grade_id": "mine", "points": 9}
    nb.cells[3:3] = [claims, nbformat.v4.new_code_cell(FAKE_REGION)]
    hidden = next(c for c in nb.cells if _grade_id(c) == "hidden_pass1")
    hidden.source = FAKE_REGION.replace('"x"', '"copy_rows", cases=0')
    regions = graded_regions(nb, _course(scratch))
    assert [(gid, checks) for _, gid, checks in regions] == list(HIDDEN_CHECKS.items())
    assert all(_grade_id(nb.cells[index]) == gid for index, gid, _ in regions)


def test_a_grade_id_claimed_twice_is_graded_once_at_its_last_cell(scratch):
    """Is a hidden cell pasted twice graded once, where nbgrader keeps its grade id (the
    last copy), and a copy turned into markdown not graded at all?"""
    nb = course.solved_notebook(scratch)
    hidden = next(i for i, c in enumerate(nb.cells) if _grade_id(c) == "hidden_pass1")
    nb.cells.append(copy.deepcopy(nb.cells[hidden]))
    regions = {gid: index for index, gid, _ in graded_regions(nb, _course(scratch))}
    assert regions["hidden_pass1"] == len(nb.cells) - 1
    nb.cells[-1] = nbformat.v4.new_markdown_cell("moved", metadata=nb.cells[-1].metadata)
    assert "hidden_pass1" not in {gid for _, gid, _ in graded_regions(nb, _course(scratch))}


def test_an_unterminated_region_runs_to_the_end_of_the_cell():
    """Are a region without its END marker and a stray END marker read as nbgrader's
    ClearHiddenTests reads them (the first hidden to the end, the second left as code)?"""
    assert split_hidden_tests("a\n### BEGIN HIDDEN TESTS\nb\nc") == ("a", "b\nc")
    assert split_hidden_tests("a\n### END HIDDEN TESTS\nb") == ("a\n### END HIDDEN TESTS\nb", None)


GPU_CELLS = set() if torch.cuda.is_available() else {"hidden_timing"}
"""Cells that cannot score without a GPU (as in tests/test_nbgrader_e2e.py)."""


def _flipped(root: Path) -> nbformat.NotebookNode:
    """The solution with the course cells' flags flipped and a cell of the student's own
    that calls itself a grade cell (the notebook nbgrader refused as corrupted)."""
    nb = course.solved_notebook(root)
    cells = {_grade_id(c): c for c in nb.cells if _grade_id(c)}
    cells["test_pass1"].metadata.nbgrader["grade"] = False
    cells["hidden_pass2"].metadata.nbgrader.update(points=99, solution=True)
    cells["pass2"].metadata.nbgrader["locked"] = True
    cells["prediction"].metadata.nbgrader["points"] = 50
    mine = nbformat.v4.new_code_cell("print('graded, I say')")
    mine.metadata["nbgrader"] = {"grade": True, "points": 5}
    nb.cells.insert(nb.cells.index(cells["pass3"]) + 1, mine)
    return nb


def _fake_region(root: Path) -> nbformat.NotebookNode:
    """The solution with a hidden region of the student's own, in a cell of their own."""
    nb = course.solved_notebook(root)
    after = next(i for i, c in enumerate(nb.cells) if _grade_id(c) == "pass1")
    nb.cells.insert(after + 1, nbformat.v4.new_code_cell(FAKE_REGION))
    return nb


@pytest.mark.nbgrader
def test_student_written_grader_input_is_neither_run_nor_refused(scratch):
    """Graded by the real `nbgrader autograde`, is a student's own hidden region never run
    (no internal error, no output of it) and a notebook with flipped flags restored and
    graded, both scoring what a plain solution scores?"""
    submitted = _fake_region(scratch)
    course.submit(scratch, "fake-region", submitted)
    course.submit(scratch, "flipped", _flipped(scratch))
    run = course.autograde(scratch)
    assert run.failed == ()
    scores: dict[str, dict] = defaultdict(dict)
    for score in course.cell_scores(scratch):
        scores[score.student][score.cell] = (score.score, score.max_score)
    points = {c.grade_id: c.points for c in _course(scratch) if c.grade}
    for student in ("fake-region", "flipped"):
        record = read_record(scratch, course.ASSIGNMENT, student)
        assert record.outcome == ("graded", "")
        assert not [line for line in record.lines if "internal error" in line]
        assert {cell: max_score for cell, (_, max_score) in scores[student].items()} == points
        lost = {c for c, (got, most) in scores[student].items() if got is not None and got < most}
        assert lost <= GPU_CELLS
        assert scores[student]["prediction"][0] is None  # graded by hand, as the solution's
    assert scores["fake-region"] == scores["flipped"]
    cut = "(a hidden-test region the course did not write: cut out)"
    own_cell = submitted.cells.index(_own(submitted)) + 1
    assert read_record(scratch, course.ASSIGNMENT, "fake-region").restored == [
        f"cell {own_cell}, the student's own {cut}"
    ]
    flipped = " ".join(read_record(scratch, course.ASSIGNMENT, "flipped").restored)
    for gid in ("test_pass1", "hidden_pass2", "pass2", "prediction"):
        assert f"{gid} (flipped:" in flipped
    folder = scratch / "autograded" / "fake-region" / course.ASSIGNMENT
    graded = nbformat.read(folder / course.NOTEBOOK, 4)
    own = _own(graded)
    assert own.source == "print('a cell of my own')"
    assert [o.get("text") for o in own.outputs] == ["a cell of my own\n"]
    assert "FAKE REGION RAN" not in nbformat.writes(graded)


def _own(nb) -> nbformat.NotebookNode:
    """The student's own cell of the fake-region submission."""
    return next(c for c in nb.cells if c.source.endswith("print('a cell of my own')"))
