"""The cohort report keeps the optional sections apart from the required ones, and shows the
score after the late penalty beside the raw one (grader.cohort)."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from matplotlib.colors import to_hex

from grader import cohort
from grader.cohort.gradebook import _cells
from grader.cohort.style import COLOURS
from grader.course import ASSIGNMENT

NB = "strided_softmax"
PUBLIC, HIDDEN = ("public:op:contiguous",), ("hidden:op",)
OPT_PUBLIC, OPT_HIDDEN = ("public:op_:contiguous",), ("hidden:op_",)
CELLS = [
    cohort.CellInfo(NB, "test_a", 1.0, "public", PUBLIC, False),
    cohort.CellInfo(NB, "hidden_a", 2.0, "hidden", PUBLIC + HIDDEN, False),
    cohort.CellInfo(NB, "test_opt", 0.0, "optional", OPT_PUBLIC, False),
    cohort.CellInfo(NB, "hidden_opt", 1.0, "extra credit", OPT_PUBLIC + OPT_HIDDEN, False),
]


def _grades(a: float, hidden: float, extra: float) -> dict:
    grade = cohort.CellGrade
    return {
        (NB, "test_a"): grade(a, None, None, False),
        (NB, "hidden_a"): grade(hidden, None, None, False),
        (NB, "test_opt"): grade(0.0, None, None, False),
        (NB, "hidden_opt"): grade(0.0, None, extra, False),
    }


def _cohort(tmp_path: Path) -> cohort.Cohort:
    """ada: all of it, a day late (the policy took 0.4 of her 4 points); bob: a padding bug,
    the optional section left as its stub; cy: the optional section tried and wrong."""
    ada = cohort.StudentRecord("ada", True, True, True, 86400.0, _grades(1, 2, 1), late_penalty=0.4)
    ada.hints = {key: [] for key in PUBLIC + HIDDEN + OPT_PUBLIC + OPT_HIDDEN}
    bob = cohort.StudentRecord("bob", True, True, True, 0.0, _grades(1, 0, 0), late_penalty=0.0)
    bob.hints = {
        "hidden:op": ["padding"],
        **dict.fromkeys(OPT_PUBLIC + OPT_HIDDEN, ["not-attempted"]),
    }
    cy = cohort.StudentRecord("cy", True, True, True, 0.0, _grades(1, 2, 0), late_penalty=0.0)
    cy.hints = {"public:op_:contiguous": ["store-mask"], "hidden:op_": ["store-mask"]}
    return cohort.Cohort(tmp_path, ASSIGNMENT, CELLS, [ada, bob, cy])


def _report(tmp_path: Path) -> cohort.Report:
    course = _cohort(tmp_path)
    table = cohort.build_table(course)
    return cohort.Report(
        course,
        table,
        cohort.timing_table({}),
        cohort.hint_table(course),
        cohort.summarize(course, table),
    )


def test_a_zero_point_check_is_optional_and_an_extra_credit_cell_keeps_its_credit():
    """Read from the gradebook, is a 0-point test cell "optional" (not a public test at full
    marks), a 0-point cell with extra credit "extra credit" worth its credit?"""
    cell = SimpleNamespace
    notebook = SimpleNamespace(
        name=NB,
        source_cells=[cell(name=n, source="") for n in ("test_a", "test_opt", "hidden_opt")],
        solution_cells=[],
        grade_cells=[
            cell(name="test_a", max_score=1.0, cell_type="code"),
            cell(name="test_opt", max_score=0.0, cell_type="code"),
            cell(name="hidden_opt", max_score=0.0, cell_type="code"),
        ],
    )
    found = {c.name: (c.kind, c.max_score) for c in _cells(notebook, {"hidden_opt": 1.0}, {})}
    assert found == {
        "test_a": ("public", 1.0),
        "test_opt": ("optional", 0.0),
        "hidden_opt": ("extra credit", 1.0),
    }


def _patches(figure) -> dict[str, object]:
    return {p.get_gid(): p for ax in figure.axes for p in ax.patches if p.get_gid()}


def test_pass_rates_draw_the_required_cells_and_the_extra_credit_apart(tmp_path):
    """Are full marks drawn for the required cells alone; is each extra-credit cell drawn
    apart as earned, tried and skipped; is a 0-point check named but not drawn as a full
    mark every student has?"""
    figure = cohort.plot_pass_rates(_report(tmp_path).table)
    bars = _patches(figure)
    assert {"pass:test_a", "pass:hidden_a", "extra:hidden_opt"} <= set(bars)
    assert not {"pass:test_opt", "pass:hidden_opt"} & set(bars)
    assert bars["extra:hidden_opt"].get_width() == pytest.approx(100 / 3)
    [optional] = [ax for ax in figure.axes if ax.get_label() == "optional sections"]
    assert [t.get_text() for t in optional.texts] == ["1 earned, 1 tried,\n1 skipped"]
    assert "not drawn: test_opt,\n0-point checks" in optional.get_xlabel()
    assert [t.get_text() for t in optional.get_yticklabels()] == ["hidden_opt (1 pt)"]


def test_the_hint_chart_keeps_the_optional_sections_and_the_stubs_apart(tmp_path):
    """Is a hint from the optional sections' tests counted apart from the required ones',
    and a stub left as it was ("not attempted") grey, not a bug above the class's bugs?"""
    report = _report(tmp_path)
    hints = report.hints
    assert hints.loc["padding", ["students", "optional"]].tolist() == [1, 0]
    assert hints.loc["not-attempted", ["students", "optional", "optional_names"]].tolist() == [
        0,
        1,
        "bob",
    ]
    assert hints.loc["store-mask", ["optional", "optional_names"]].tolist() == [1, "cy"]
    bars = _patches(cohort.plot_hints(hints, report.summary.with_hints))
    assert set(bars) == {"hint:padding", "optional-hint:store-mask", "optional-hint:not-attempted"}
    assert to_hex(bars["optional-hint:not-attempted"].get_facecolor()) == COLOURS["missing"]
    assert to_hex(bars["optional-hint:store-mask"].get_facecolor()) == COLOURS["bug"]
    below = bars["optional-hint:not-attempted"].get_y() > bars["optional-hint:store-mask"].get_y()
    assert below  # the bugs first, the stubs after them


def test_totals_show_the_raw_score_and_the_score_after_the_late_penalty(tmp_path):
    """Does each student's total say the raw score (extra credit in), the late penalty and
    the score after it; the page both; the summary the late points and the mean after them?"""
    report = _report(tmp_path)
    summed = cohort.totals(report.table)
    assert summed.loc["ada", ["total", "late_penalty", "after_late"]].tolist() == [
        4.0,
        0.4,
        pytest.approx(3.6),
    ]
    assert summed.loc["bob", ["total", "late_penalty", "after_late"]].tolist() == [1.0, 0.0, 1.0]
    page = cohort._scores_html(report.table)
    assert "<th>raw total</th><th>late penalty</th><th>score<br><small>as exported" in page
    ada = page.split("<th>ada</th>")[1].split("</tr>")[0]
    assert "<td>4</td><td>0.4</td><td>3.6</td>" in ada
    bob = page.split("<th>bob</th>")[1].split("</tr>")[0]
    # the optional cells plain, not a red 0: skipping them costs nothing
    assert bob.startswith(
        '<td class="full">1</td><td class="zero">0</td>'
        '<td class="optional">0</td><td class="optional">0</td>'
    )
    lines = cohort.summary_lines(report)
    assert "Late: 1: ada (24.0 h, -0.4 points)." in lines
    assert any(line.endswith("after late penalties, as exported: 2.53.") for line in lines)
    assert (
        "Optional sections, extra credit beyond the maximum, per section, of the 3 graded "
        "students: "
        "hidden_opt: 1 earned, 1 tried without credit, 1 skipped."
    ) in lines


def test_the_table_keeps_the_late_penalty_through_csv(tmp_path):
    """Does the long table's late_penalty survive a CSV round trip, NaN where none applies?"""
    table = _report(tmp_path).table
    path = cohort.save_table(table, tmp_path / "out")[0]
    back = cohort.read_table(path)
    assert back["late_penalty"].tolist() == table["late_penalty"].tolist()
    missing = cohort.StudentRecord("dee", False, False, False, None)
    course = cohort.Cohort(tmp_path, ASSIGNMENT, CELLS, [missing])
    assert math.isnan(cohort.build_table(course)["late_penalty"].iloc[0])


@pytest.mark.nbgrader
def test_the_cohorts_score_after_late_is_the_exports(graded_sample_course, tmp_path):
    """On the shared graded course, is every graded student's score after the late penalty
    in the cohort report the score `nbgrader export` gives the LMS (the late one included)?"""
    from grader.course import nbgrader

    report = cohort.build_report(graded_sample_course, ASSIGNMENT)
    summed = cohort.totals(report.table)
    out = tmp_path / "grades.csv"
    nbgrader(graded_sample_course, "export", "--to", str(out))
    exported = {row["student_id"]: row for row in csv.DictReader(out.open())}
    graded = summed[summed["status"] == "graded"]
    assert len(graded) >= 10 and graded.loc["late-solution", "late_penalty"] > 0
    for student, row in graded.iterrows():
        assert row["after_late"] == pytest.approx(float(exported[student]["score"])), student
        assert row["late_penalty"] == pytest.approx(
            float(exported[student]["late_submission_penalty"])
        )
