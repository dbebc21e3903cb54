"""Restoring the course's cells before grading: deleted ones back, the source's order kept."""

from __future__ import annotations

import nbformat

from grader.grading.restore import SourceCell, in_source_order, out_of_place


def _source(gid: str, *, points: float | None = None, solution: bool = False) -> SourceCell:
    text = "# YOUR CODE HERE\nraise NotImplementedError()" if solution else f"check_{gid}()"
    return SourceCell(gid, "code", text, not solution, "abc", points, solution)


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
