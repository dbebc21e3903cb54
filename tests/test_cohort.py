"""The instructor's cohort report: table, plots, page and CLI (grader.cohort)."""

from __future__ import annotations

import html
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from grader import cohort
from grader.course import ASSIGNMENT

ROOT = Path(__file__).resolve().parents[1]
TIMING_COLUMNS = ["student_ms", "reference_ms", "ratio", "timing_points"]

# Hand-written, not measured: a timing sidecar shaped like grader.grading.gpu_timing's, with numbers
# close to the H200 run in docs/gpu-results.md (reference 0.1315 ms at 4096x4096, 0.2816 ms at
# 65536x512; a copy-first student about 1.2x slower).
FAKE_TIMING = {
    "schema": "i1-timing/1",
    "device": "NVIDIA H200",
    "versions": {"torch": "2.11.0+cu130", "triton": "3.6.0", "python": "3.12.3"},
    "mode": "cold",
    "reps": 40,
    "points": 1.5,
    "max_points": 2,
    "seconds": 3.4,
    "shapes": [
        {
            "rows": 4096,
            "cols": 4096,
            "student_ms": 0.1618,
            "reference_ms": 0.1315,
            "student_min_ms": 0.1598,
            "student_max_ms": 0.1648,
            "ratio": 0.1618 / 0.1315,
            "correct": True,
            "fraction": 0.75,
            "reason": "",
        },
        {
            "rows": 65536,
            "cols": 512,
            "student_ms": 0.3302,
            "reference_ms": 0.2816,
            "student_min_ms": 0.3281,
            "student_max_ms": 0.3350,
            "ratio": 0.3302 / 0.2816,
            "correct": True,
            "fraction": 0.75,
            "reason": "",
        },
    ],
}


def _hand_written_timing(tmp_path: Path) -> cohort.TimingRecord:
    path = tmp_path / cohort.TIMING_SIDECAR
    path.write_text(json.dumps(FAKE_TIMING))
    record = cohort.load_timing(path)
    assert record is not None
    return record


def _texts(figure) -> str:
    return " ".join(t.get_text() for ax in figure.axes for t in ax.texts)


# -- fast: no nbgrader -------------------------------------------------------------------


def test_timing_sidecar_gives_medians_and_logical_gbps(tmp_path):
    """Does a timing sidecar become one row per shape with GB/s from 2 x M x N x 4 bytes?"""
    timing = cohort.timing_table({"copy-first": _hand_written_timing(tmp_path)})
    assert list(timing["shape"]) == ["4096x4096", "65536x512"]
    first = timing.iloc[0]
    assert first["student_ms"] == pytest.approx(0.1618)
    assert first["reference_ms"] == pytest.approx(0.1315)
    assert first["student_gbps"] == pytest.approx(2 * 4096 * 4096 * 4 / 0.1618e-3 / 1e9)
    assert first["reference_gbps"] == pytest.approx(1020.6, rel=1e-3)  # 2*4096*4096*4 B/0.1315 ms


def test_timing_columns_summarize_a_sidecar(tmp_path):
    """Are the per-student timing columns the summed medians and the geometric-mean ratio?"""
    columns = cohort.timing_columns(_hand_written_timing(tmp_path))
    assert columns["student_ms"] == pytest.approx(0.1618 + 0.3302)
    assert columns["reference_ms"] == pytest.approx(0.1315 + 0.2816)
    assert columns["ratio"] == pytest.approx(math.sqrt(0.1618 / 0.1315 * 0.3302 / 0.2816))
    assert columns["timing_points"] == 1.5


def test_timing_sidecar_of_another_schema_is_refused_with_its_reason(tmp_path):
    """Is a sidecar with the wrong schema refused, saying so, rather than read as numbers?"""
    path = tmp_path / cohort.TIMING_SIDECAR
    path.write_text(json.dumps({**FAKE_TIMING, "schema": "i1-timing/0"}))
    with pytest.raises(cohort.RecordError, match="schema is 'i1-timing/0', expected 'i1-timing/1'"):
        cohort.load_timing(path)


def test_speed_plots_draw_the_bands_the_timings_were_scored_with(tmp_path):
    """With sidecars scored under a course's own bands (full points up to 1.2x, half up to
    3x), do the speed plots shade and name those, not the default policy's?"""
    path = tmp_path / cohort.TIMING_SIDECAR
    path.write_text(json.dumps({**FAKE_TIMING, "bands": [[1.2, 1.0], [3.0, 0.5]]}))
    timing = cohort.timing_table({"copy-first": cohort.load_timing(path)})
    shades = _texts(cohort.plot_speedup(timing, None))
    assert "full points" in shades and "1/2" in shades and "3/4" not in shades
    figure = cohort.plot_kernel_vs_reference(timing)
    labels = [t.get_text() for ax in figure.axes for t in ax.get_legend().get_texts()]
    assert "y = 1.2x: slowest for full points" in labels
    default = cohort.plot_kernel_vs_reference(
        cohort.timing_table({"a": _hand_written_timing(tmp_path)})
    )
    labels = [t.get_text() for ax in default.axes for t in ax.get_legend().get_texts()]
    assert "y = 1.1x: slowest for full points" in labels


def test_gpu_plots_draw_the_hand_written_timings(tmp_path):
    """With timing sidecars, do the speed plots draw each shape and not say 'needs a GPU'?"""
    timing = cohort.timing_table({"copy-first": _hand_written_timing(tmp_path)})
    figures = [
        cohort.plot_speedup(timing, None),
        cohort.plot_kernel_vs_reference(timing),
        cohort.plot_bandwidth(timing, None, "no benchmark results"),
    ]
    for figure, prefix in zip(figures, ("ratio", "ms", "gbps"), strict=True):
        gids = {c.get_gid() for ax in figure.axes for c in ax.collections}
        assert {f"{prefix}:4096x4096", f"{prefix}:65536x512"} <= gids
        assert cohort.NEEDS_GPU not in _texts(figure)
    assert "copy roof missing" in _texts(figures[2])


def test_gpu_plots_without_sidecars_say_so():
    """Without timing sidecars, does each speed plot say it needs a GPU and draw no points?"""
    empty = cohort.timing_table({})
    for figure in (
        cohort.plot_speedup(empty, None),
        cohort.plot_kernel_vs_reference(empty),
        cohort.plot_bandwidth(empty, None, "no benchmark results"),
    ):
        assert cohort.NEEDS_GPU in _texts(figure)
        assert not [c for ax in figure.axes for c in ax.collections]


def test_sidecar_keys_come_from_the_cells_calls():
    """Does a test cell map to the sidecar keys its expect_cases / expect_hidden calls write?"""
    source = (
        "# smoke\n"
        'expect_cases(copy_rows, "copy_rows", ["transpose", "contiguous"])\n'
        "### BEGIN HIDDEN TESTS\n"
        "from grader.grading.hidden import expect_hidden\n\n"
        'expect_hidden("copy_rows")\n'
        "### END HIDDEN TESTS\n"
    )
    assert cohort.sidecar_keys(source) == (
        "public:copy_rows:contiguous+transpose",
        "hidden:copy_rows",
    )


def test_function_checks_and_timing_map_to_their_sidecar_keys():
    """Do the hidden function checks and the timing cell map to the keys they record?"""
    source = "expect_address_table(address_table)\nexpect_worksheet(worksheet)\n"
    assert cohort.sidecar_keys(source) == ("hidden:address_table", "hidden:worksheet")
    assert cohort.sidecar_keys("timing_points(max_points=2)\n") == ("hidden:timing",)


def _sidecar_with_a_fault(tmp_path: Path) -> Path:
    path = tmp_path / cohort.HINTS_SIDECAR
    tests = {
        "hidden:strided_softmax": {"passed": False, "status": "internal-error", "hints": []},
        "public:strided_softmax": {"passed": False, "status": "failed", "hints": ["padding"]},
    }
    path.write_text(json.dumps({"schema": cohort.HINTS_SCHEMA, "tests": tests}))
    return path


def test_a_checker_fault_is_its_own_status_not_the_students_failure(tmp_path):
    """Is a cell whose sidecar says internal-error shown as "internal error", left out of the
    student's total, and counted in the summary?"""
    path = _sidecar_with_a_fault(tmp_path)
    assert cohort.load_internal_errors(path) == {"hidden:strided_softmax"}
    cell = cohort.CellInfo("nb", "hidden_pass3", 3.0, "hidden", ("hidden:strided_softmax",), False)
    grade = {("nb", "hidden_pass3"): cohort.CellGrade(0.0, None, None, False)}
    faulty = cohort.StudentRecord("ada", True, True, True, 0.0, dict(grade))
    faulty.hints, faulty.internal = cohort.load_hints(path), cohort.load_internal_errors(path)
    fine = cohort.StudentRecord("bob", True, True, True, 0.0, dict(grade))
    course = cohort.Cohort(tmp_path, ASSIGNMENT, [cell], [faulty, fine])
    table = cohort.build_table(course).set_index("student")
    assert table.loc["ada", "status"] == "internal error" and math.isnan(table.loc["ada", "score"])
    assert table.loc["bob", "status"] == "graded" and table.loc["bob", "score"] == 0.0
    table = table.reset_index()
    summary = cohort.summarize(course, table)
    assert summary.internal_errors == (("ada", "hidden_pass3"),)
    report = cohort.Report(
        course, table, cohort.timing_table({}), cohort.hint_table(course), summary
    )
    assert (
        "Internal errors in the checker: 1 cell (ada hidden_pass3), not counted against the "
        "students; fix the checker and autograde them again." in cohort.summary_lines(report)
    )
    assert '<td class="missing">internal error</td>' in cohort._scores_html(table)


LIVE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
"""Markup that runs if the page writes it raw."""


def test_student_text_reaches_the_page_escaped(tmp_path):
    """Do a student's name, the cause of an ungradable submission, the source screen's flags
    and the cells put back reach index.html escaped, as text, never as markup?"""
    cell = cohort.CellInfo("nb", "test_pass3", 3.0, "public", ("public:strided_softmax",), False)
    grade = {("nb", "test_pass3"): cohort.CellGrade(3.0, None, None, False)}
    graded = cohort.StudentRecord(f"ada{LIVE}", True, True, True, 0.0, dict(grade))
    graded.flags, graded.restored = (f"line 3: {LIVE}",), (f"cell 9 {LIVE}",)
    ungradable = cohort.StudentRecord(f"bob{LIVE}", True, False, True, 0.0, {})
    ungradable.ungradable = f"invalid notebook: {LIVE}"
    course = cohort.Cohort(tmp_path, ASSIGNMENT, [cell], [graded, ungradable])
    table = cohort.build_table(course)
    summary = cohort.summarize(course, table)
    report = cohort.Report(
        course, table, cohort.timing_table({}), cohort.hint_table(course), summary
    )
    page = cohort.write_html(report, tmp_path, [], []).read_text()
    assert "<script" not in page and "<img src=x" not in page
    shown = html.escape(LIVE)
    for text in (f"ada{shown}", f"bob{shown}", f"invalid notebook: {shown}", f"line 3: {shown}"):
        assert text in page, text
    assert f"cell 9 {shown}" in page


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grader.cohort", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def test_cli_without_a_gradebook_exits_2_with_one_line(tmp_path):
    """Does a course without a gradebook exit 2 with one line naming the file and the fix?"""
    done = _run_cli(ASSIGNMENT, "--course", str(tmp_path), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert f"no gradebook at {tmp_path / 'gradebook.db'}" in done.stderr
    assert "nbgrader autograde" in done.stderr
    assert not (tmp_path / "gradebook.db").exists()


def test_cli_with_an_unknown_assignment_exits_2_with_one_line(tmp_path, capsys):
    """Does an assignment the gradebook lacks exit 2 with one line naming what it has?"""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        gradebook.add_assignment("ps1")
    code = cohort.main(["nope", "--course", str(tmp_path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert "no assignment 'nope'" in err
    assert "(it has: ps1)" in err
    assert not (tmp_path / "out").exists()


# -- slow: one graded sample course per session -----------------------------------------


@pytest.fixture(scope="module")
def report(graded_sample_course) -> cohort.Report:
    return cohort.build_report(graded_sample_course, ASSIGNMENT)


@pytest.fixture(scope="module")
def written(graded_sample_course, tmp_path_factory) -> Path:
    """The report written by the CLI's main() into a fresh folder."""
    out = tmp_path_factory.mktemp("report") / "cohort"
    code = cohort.main([ASSIGNMENT, "--course", str(graded_sample_course), "--out", str(out)])
    assert code == 0
    return out


def _rows(table: pd.DataFrame, student: str) -> pd.DataFrame:
    return table[table["student"] == student]


@pytest.mark.nbgrader
def test_table_has_a_row_per_roster_student_and_cell(report, graded_sample_course):
    """Is there one row per (roster student, graded cell), the student who submitted nothing
    and the one whose kernel died included, each with its status?"""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{graded_sample_course / 'gradebook.db'}") as gradebook:
        roster = {s.id for s in gradebook.students}
        cells = {
            c.name for nb in gradebook.find_assignment(ASSIGNMENT).notebooks for c in nb.grade_cells
        }
    table = report.table
    assert len(table) == len(roster) * len(cells)
    assert set(zip(table["student"], table["cell"], strict=True)) == {
        (s, c) for s in roster for c in cells
    }
    assert set(_rows(table, "no-submission")["status"]) == {"no submission"}
    assert set(_rows(table, "crasher")["status"]) == {"ungradable"}
    assert all(_rows(table, "crasher")["reason"])  # its grading record's cause, or why none
    assert _rows(table, "crasher")["score"].isna().all()


@pytest.mark.nbgrader
def test_solution_scores_full_marks_on_every_autograded_cell(report):
    """Does the solution score full marks on every autograded cell (timing: with a GPU)?"""
    rows = _rows(report.table, "solution")
    autograded = rows[(rows["kind"] != "manual") & (rows["status"] != "no GPU")]
    assert len(autograded) >= 10
    assert (autograded["score"] == autograded["max_score"]).all()
    assert set(autograded["status"]) == {"graded"}
    assert set(rows[rows["kind"] == "manual"]["status"]) == {"manual"}


@pytest.mark.nbgrader
def test_padding_bug_records_the_padding_hint_in_pass2_cells(report):
    """Does the student who pads with zero have hint 'padding' in both pass-2 cells?"""
    rows = _rows(report.table, "bug-pads-with-zero").set_index("cell")
    for cell in ("test_pass2", "hidden_pass2"):
        assert "padding" in rows.loc[cell, "hints"].split(";")
    assert rows.loc["test_pass1", "hints"] == ""


@pytest.mark.nbgrader
def test_late_student_has_late_seconds(report):
    """Is the late submission's lateness recorded, and the on-time one's zero?"""
    table = report.table
    assert (_rows(table, "late-solution")["late_seconds"] > 0).all()
    assert (_rows(table, "solution")["late_seconds"] == 0).all()
    assert _rows(table, "no-submission")["late_seconds"].isna().all()


@pytest.mark.nbgrader
def test_timing_columns_are_nan_without_a_gpu(report):
    """Autograded on a CPU, are the timing columns NaN (missing), never zero, and does every
    graded student's grading record say the timing ran without a GPU?"""
    if report.summary.with_timing:
        pytest.skip("this course was autograded on a GPU: it has timing sidecars")
    assert report.table[TIMING_COLUMNS].isna().all().all()
    assert report.timing.empty
    assert len(report.summary.no_gpu) == report.summary.graded > 0


@pytest.mark.nbgrader
def test_hint_plot_bar_counts_the_students_whose_sidecar_fired_it(report, graded_sample_course):
    """Is the 'padding' bar as long as the number of students whose sidecar fired it?"""
    fired = 0
    for path in (graded_sample_course / "autograded").glob(f"*/{ASSIGNMENT}/i1_hints.json"):
        tests = json.loads(path.read_text())["tests"].values()
        fired += any("padding" in test["hints"] for test in tests)
    assert fired >= 1
    figure = cohort.plot_hints(report.hints, report.summary.with_hints)
    bars = {p.get_gid(): p.get_width() for ax in figure.axes for p in ax.patches}
    assert bars["hint:padding"] == fired


@pytest.mark.nbgrader
def test_table_round_trips_through_csv_and_parquet(report, tmp_path):
    """Does the table read back from its CSV (and Parquet) equal the one written?"""
    paths = cohort.save_table(report.table, tmp_path)
    for path in paths:
        pd.testing.assert_frame_equal(cohort.read_table(path), report.table)


@pytest.mark.nbgrader
def test_index_shows_every_plot_and_names_the_missing_gpu_data(written, report):
    """Does index.html show every plot with data, the summary and say plainly which plots
    are not drawn for want of GPU data?"""
    page = (written / "index.html").read_text()
    drawn = cohort.drawn_plots(report)
    for plot in cohort.PLOTS:
        assert (written / plot.name).is_file() == (plot in drawn)
        assert (f'src="{plot.name}"' in page) == (plot in drawn)
    # the shared course: 11 of the sample cohort's 14 and 5 more (tests/shared_course.py),
    # of whom the crasher and the notebook that is not JSON are ungradable
    assert "16 students on the roster, 15 submitted, 13 graded." in page
    assert "crasher" in page and "no-submission" in page
    if report.timing.empty:
        assert html.escape(cohort.missing_plots_note(report)) in page
    assert "<script" not in page and "http" not in page


@pytest.mark.nbgrader
def test_instructor_notebook_runs_on_the_course(graded_sample_course, report, tmp_path):
    """Does notebooks/instructor_cohort.ipynb run top to bottom against a graded course,
    drawing each plot with data and no empty placeholder?"""
    notebook = ROOT / "notebooks" / "instructor_cohort.ipynb"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter",
            "nbconvert",
            "--to",
            "notebook",
            "--execute",
            str(notebook),
            "--output-dir",
            str(tmp_path),
        ],
        cwd=notebook.parent,
        env={**os.environ, "I1_COURSE": str(graded_sample_course)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    executed = json.loads((tmp_path / notebook.name).read_text())
    pictures = [
        o
        for c in executed["cells"]
        for o in c.get("outputs", [])
        if "image/png" in o.get("data", {})
    ]
    assert len(pictures) == len(cohort.drawn_plots(report))
