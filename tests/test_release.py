"""release/ is what nbgrader generates from source/ today, and gives nothing away."""

from __future__ import annotations

import ast
import re

import nbformat
import pytest
from traitlets.config.loader import PyFileConfigLoader

from grader import course
from grader.edits import function_span
from grader.zoo.bug import REFERENCE

pytestmark = pytest.mark.nbgrader

SOURCE = course.REPO / "source" / course.ASSIGNMENT / course.NOTEBOOK
RELEASE = course.REPO / "release" / course.ASSIGNMENT / course.NOTEBOOK


def cells(path):
    notebook = nbformat.read(path, as_version=4)
    return [(c.cell_type, c.source, c.metadata.get("nbgrader")) for c in notebook.cells]


def solution_cells(path):
    notebook = nbformat.read(path, as_version=4)
    return [
        c
        for c in notebook.cells
        if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")
    ]


@pytest.fixture(scope="module")
def fresh_course(tmp_path_factory):
    return course.new_course(tmp_path_factory.mktemp("course"))


def test_release_is_fresh(fresh_course):
    """Is the committed release exactly what generate_assignment makes from source/ now?"""
    generated = fresh_course / "release" / course.ASSIGNMENT / course.NOTEBOOK
    assert cells(RELEASE) == cells(generated), "regenerate release/ (make release) and commit it"


def release_code() -> str:
    notebook = nbformat.read(RELEASE, as_version=4)
    return "\n".join(c.source for c in notebook.cells if c.cell_type == "code")


def test_release_has_no_solution_text():
    """Does no statement of any solution region survive into the release's code, other than
    those the notebook shows anyway (the given launchers allocate outputs too)?"""
    code = release_code()
    given = "\n".join(
        c.source
        for c in nbformat.read(SOURCE, as_version=4).cells
        if c.cell_type == "code" and not c.metadata.get("nbgrader", {}).get("solution")
    )
    for cell in solution_cells(SOURCE):
        region = re.search(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.S)
        assert region, f"solution cell {cell.metadata['nbgrader']['grade_id']} has no region"
        statements = [line.strip() for line in region.group(1).splitlines()]
        for statement in statements:
            if len(statement) >= 12 and not statement.startswith("#") and statement not in given:
                assert statement not in code, f"solution line leaked: {statement!r}"


def test_release_has_no_hidden_tests_or_markers():
    """Are the hidden tests, the markers and the grader package absent from the release?"""
    text = RELEASE.read_text()
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
        assert marker not in text
    code = release_code()
    assert "expect_hidden" not in code
    assert not re.search(r"\b(from|import) grader\b", code)
    assert "secret" not in code


def test_every_test_cell_is_graded_and_locked():
    """Does every test cell carry a lock, is every exercise tested twice, and do the optional
    exercises' cells carry 0 points, their hidden ones the extra credit the config gives?"""
    graded = {
        meta["grade_id"]: meta
        for _, _, meta in cells(SOURCE)
        if meta and meta.get("grade") and not meta.get("solution")
    }
    required = ("addresses", "pass1", "pass2", "pass3", "worksheet")
    optional = ("inplace", "backward")
    assert set(graded) == {
        f"{kind}_{part}" for kind in ("test", "hidden") for part in required + optional
    } | {"hidden_timing"}
    assert all(meta["locked"] for meta in graded.values())
    extra = {g for g in graded if g.split("_", 1)[1] in optional}
    assert all(graded[g]["points"] > 0 for g in set(graded) - extra)
    assert all(graded[g]["points"] == 0 for g in extra)
    config = PyFileConfigLoader("nbgrader_config.py", str(course.REPO)).load_config()
    assert config.AwardExtraCredit.points == {f"hidden_{part}": 1.0 for part in optional}


def test_solution_cells_are_the_reference():
    """Is each solution cell, markers removed, the reference function of the same name?"""
    reference = REFERENCE.read_text()
    for cell in solution_cells(SOURCE):
        text = "\n".join(
            line
            for line in cell.source.splitlines()
            if "### BEGIN" not in line and "### END" not in line
        )
        name = next(n.name for n in ast.parse(text).body if isinstance(n, ast.FunctionDef))
        begin, end = function_span(reference, name)
        assert text.strip() == reference[begin:end].strip(), (
            f"{name} differs from grader/reference.py"
        )


def test_source_validates():
    """Does `nbgrader validate` pass the source notebook, solutions included, with or
    without a GPU (without one, the timing cell skips with one sentence)?"""
    done = course.nbgrader(course.REPO, "validate", str(SOURCE), check=False)
    assert "Success! Your notebook passes all the tests." in done.stdout, done.stdout


def test_untouched_release_fails_every_test():
    """Does `nbgrader validate --invert` find every test of the untouched release failing?
    nbgrader counts a cell of 0 points as passed whatever it did (its score equals its
    maximum), so the optional exercises' four cells are the only ones it lists as passing;
    tests/test_cell_losses.py shows they fail too."""
    done = course.nbgrader(course.REPO, "validate", "--invert", str(RELEASE), check=False)
    assert "NOTEBOOK PASSED ON 4 CELL(S)!" in done.stdout, done.stdout
    listed = done.stdout.split("The following cell passed:")[1:]
    assert len(listed) == 4
    assert all(re.search(r"strided_softmax_(backward)?\b", cell) for cell in listed), listed


PREDICTION = "predicted = None"
"""The line of the notebook's first exercise the student edits: their prediction."""


def prediction_cells(path) -> tuple[list, int]:
    """The notebook's cells, and the index of the prediction's cell."""
    cells = nbformat.read(path, as_version=4).cells
    ask = [i for i, c in enumerate(cells) if c.cell_type == "code" and PREDICTION in c.source]
    assert len(ask) == 1, "one cell holds the prediction"
    return cells, ask[0]


def test_the_transpose_waits_for_the_prediction():
    """Does the release ask for the prediction before anything shows the transpose: no text
    before it gives the transpose's indices or strides, and the next cell draws it and prints
    its strides only once a prediction was made, saying whether it was right?"""
    cells, ask = prediction_cells(RELEASE)
    before = "\n".join(c.source for c in cells[:ask])
    assert "draw_view(t" not in before
    for answer in ("[[0, 3], [1, 4], [2, 5]]", "(1, 3)", "0, 3, 1, 4"):
        assert answer not in before
    reveal = cells[ask + 1].source
    assert "draw_view(t" in reveal
    shown = []
    namespace = {
        "torch": __import__("torch"),
        "draw_view": lambda view, title: shown.append(("drawn", tuple(view.stride()))),
        "display": lambda thing: None,
        "print": lambda *words: shown.append(" ".join(map(str, words))),
    }
    for prediction, verdict in ((None, None), ([[0, 3], [1, 4], [2, 5]], "right")):
        shown.clear()
        exec(reveal, dict(namespace, predicted=prediction))
        if verdict is None:
            assert shown and all(isinstance(s, str) and "(1, 3)" not in s for s in shown)
            assert "No prediction yet" in shown[0]
        else:
            assert shown[0].endswith(f": {verdict}") and ("drawn", (1, 3)) in shown
    exec(reveal, dict(namespace, predicted=[[0, 1], [2, 3], [4, 5]]))
    assert shown[-3].endswith(": not quite")


def test_a_prediction_costs_nothing():
    """Does a submission whose prediction line is filled in (the one course line the
    notebook asks the student to edit) give the source screen nothing to hold? (A cell that
    also set `t`, which a course cell sets, once read as monkeypatching.)"""
    from learning.workshops.screen.reading import findings, notebook_cells

    notebook = course.solved_notebook(course.REPO)
    cell = next(c for c in notebook.cells if PREDICTION in c.source)
    cell.source = cell.source.replace(PREDICTION, "predicted = [[0, 3], [1, 4], [2, 5]]")
    assert findings(notebook_cells(notebook)) == []
