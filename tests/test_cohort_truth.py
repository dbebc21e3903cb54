"""The cohort report tells the truth (issue 13): hints from hidden cells, a timing cell that
found no GPU, no empty plots, one source for the copy roof, the notebook without a course,
and a demo that writes only its scratch course and report."""

from __future__ import annotations

import inspect
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from test_cohort import _hand_written_timing

from grader import cohort, demo
from grader.cohort import cli
from grader.course import ASSIGNMENT, NOTEBOOK
from grader.grading.grading_log import GradingLog, read_record
from grader.grading.runner import Runner
from grader.grading.trusted import run_check
from learning.workshops.measuring.results import H200_SAMPLE
from learning.workshops.measuring.results import load as load_results
from learning.workshops.measuring.timing import NoCudaError, require_cuda

ROOT = Path(__file__).resolve().parents[1]


def _graded_cells() -> dict[str, str]:
    """{grade id: source} of the course's graded cells."""
    source = nbformat.read(ROOT / "source" / ASSIGNMENT / NOTEBOOK, as_version=4)
    return {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in source.cells
        if c.metadata.get("nbgrader", {}).get("grade")
    }


# -- 1. hints from hidden cells ------------------------------------------------------------


def test_every_hidden_cell_of_the_course_has_its_hidden_key():
    """Does each hidden cell of the source notebook map to the key its expect_hidden call
    records (`expect_hidden("op")`: one argument), beside its smoke test's public key?"""
    cells = _graded_cells()
    for cell, op in (
        ("hidden_pass1", "copy_rows"),
        ("hidden_pass2", "softmax_kernel"),
        ("hidden_pass3", "strided_softmax"),
    ):
        assert cohort.sidecar_keys(cells[cell]) == (f"public:{op}:contiguous", f"hidden:{op}")
    assert cohort.sidecar_keys(cells["hidden_addresses"]) == ("hidden:address_table",)
    assert cohort.sidecar_keys(cells["hidden_timing"])[-1] == "hidden:timing"
    assert cohort.sidecar_keys('expect_hidden(op="copy_rows")') == ("hidden:copy_rows",)


def test_a_hint_recorded_by_a_hidden_check_shows_in_its_cell():
    """Does a hint only the hidden cases fired appear in the hidden cell's hints column?"""
    source = _graded_cells()["hidden_pass2"]
    cell = cohort.CellInfo(
        NOTEBOOK, "hidden_pass2", 3.0, "hidden", cohort.sidecar_keys(source), False
    )
    grade = {(NOTEBOOK, "hidden_pass2"): cohort.CellGrade(0.0, None, None, False)}
    student = cohort.StudentRecord("ada", True, True, True, 0.0, grade)
    student.hints = {"public:softmax_kernel:contiguous": [], "hidden:softmax_kernel": ["padding"]}
    table = cohort.build_table(cohort.Cohort(Path("."), ASSIGNMENT, [cell], [student]))
    assert list(table["hints"]) == ["padding"]


# -- 2. a timing cell that found no GPU ------------------------------------------------------


def _log_of_a_timing(course: Path, student: str, raises: Exception) -> None:
    """A grading record whose timing check raised `raises`, run and recorded by the trusted
    side as in autograde (`trusted.run_check` over `Runner.run`)."""
    log = GradingLog(course, ASSIGNMENT, student).begin()
    runner = Runner(course, None, None, SimpleNamespace(impl=course / NOTEBOOK))

    def timing_points(**_):
        raise raises

    runner.timing_points = timing_points
    run_check(runner, ("timing_points", [], {"max_points": 2}), log)
    log.finish()


def _no_cuda_error() -> NoCudaError:
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("torch.cuda.is_available", lambda: False)
            require_cuda()
    except NoCudaError as exc:
        return exc
    raise AssertionError("require_cuda did not raise without CUDA")


def test_the_grading_record_tells_no_gpu_from_a_real_failure(tmp_path):
    """Is a timing check that raised NoCudaError recorded in the grading record as timed
    without a GPU, and one that failed on a GPU not (a student never graded has no record)?"""
    _log_of_a_timing(tmp_path, "cpu-only", _no_cuda_error())
    _log_of_a_timing(tmp_path, "wrong", AssertionError("timing: 0 points: wrong output"))
    assert read_record(tmp_path, ASSIGNMENT, "cpu-only").timed_without_gpu
    assert not read_record(tmp_path, ASSIGNMENT, "wrong").timed_without_gpu
    assert read_record(tmp_path, ASSIGNMENT, "never-graded") is None


def _cohort_with_a_timing_cell(tmp_path: Path) -> cohort.Cohort:
    """ada's timing cell found no GPU, bob's ran on one and scored 0; both pass test_a."""
    cells = [
        cohort.CellInfo(NOTEBOOK, "test_a", 1.0, "public", (), False),
        cohort.CellInfo(NOTEBOOK, "hidden_timing", 2.0, "hidden", ("hidden:timing",), True),
    ]
    grades = {
        (NOTEBOOK, "test_a"): cohort.CellGrade(1.0, None, None, False),
        (NOTEBOOK, "hidden_timing"): cohort.CellGrade(0.0, None, None, False),
    }
    ada = cohort.StudentRecord("ada", True, True, True, 0.0, dict(grades), no_gpu=True)
    bob = cohort.StudentRecord("bob", True, True, True, 0.0, dict(grades))
    return cohort.Cohort(tmp_path, ASSIGNMENT, cells, [ada, bob])


def _report(course: cohort.Cohort) -> cohort.Report:
    table = cohort.build_table(course)
    return cohort.Report(
        course,
        table,
        cohort.timing_table({}),
        cohort.hint_table(course),
        cohort.summarize(course, table),
    )


def test_no_gpu_is_grey_and_out_of_the_totals_while_a_real_zero_stays_red(tmp_path):
    """Is the timing cell of a student graded without a GPU "no GPU" (grey, no score, out of
    the total and the points available), while a 0 earned on a GPU stays a red 0?"""
    report = _report(_cohort_with_a_timing_cell(tmp_path))
    table = report.table.set_index(["student", "cell"])
    assert table.loc[("ada", "hidden_timing"), "status"] == "no GPU"
    assert math.isnan(table.loc[("ada", "hidden_timing"), "score"])
    assert table.loc[("bob", "hidden_timing"), "status"] == "graded"
    assert table.loc[("bob", "hidden_timing"), "score"] == 0.0
    summed = cohort.totals(report.table)
    assert summed.loc["ada", ["total", "max_total"]].tolist() == [1.0, 1.0]
    assert summed.loc["bob", ["total", "max_total"]].tolist() == [1.0, 3.0]
    assert report.summary.no_gpu == ("ada",) and report.summary.no_gpu_points == 2.0
    page = cohort._scores_html(report.table)
    ada, bob = page.split("<th>ada</th>")[1].split("<th>bob</th>")
    assert '<td class="missing">no GPU</td>' in ada and 'class="zero"' not in ada
    assert '<td class="zero">0</td>' in bob
    lines = " ".join(cohort.summary_lines(report))
    assert "No GPU: the timing cell could not run for 1 of the 2 graded students (ada)" in lines
    assert "left out of the totals and the mean" in lines


def test_pass_rates_draw_no_gpu_grey_not_as_zero(tmp_path):
    """Is a timing cell that found no GPU for every student a grey bar saying so, not 0%?"""
    course = _cohort_with_a_timing_cell(tmp_path)
    course.students[1].no_gpu = True
    figure = cohort.plot_pass_rates(cohort.build_table(course))
    gids = {p.get_gid() for ax in figure.axes for p in ax.patches}
    assert "nogpu:hidden_timing" in gids and "pass:hidden_timing" not in gids
    texts = [t.get_text() for ax in figure.axes for t in ax.texts]
    assert "no GPU for 2 students: not run, left out" in texts


# -- 3. no empty placeholder plots -----------------------------------------------------------


def test_without_timings_the_speed_plots_are_not_drawn_and_one_note_says_why(tmp_path):
    """Without any GPU timing, are the three speed plots left out (an earlier report's PNGs
    removed) and does one note on the page name them and say why?"""
    report = _report(_cohort_with_a_timing_cell(tmp_path))
    out = tmp_path / "report"
    out.mkdir()
    (out / "bandwidth.png").write_bytes(b"an earlier report's plot")
    pngs = cohort.save_plots(report, out)
    assert [p.name for p in pngs] == ["scores.png", "pass_rates.png", "hints.png"]
    assert sorted(out.glob("*.png")) == sorted(pngs)
    note = cohort.missing_plots_note(report)
    assert "speedup.png, kernel_vs_reference.png, bandwidth.png" in note
    assert "autograded without a CUDA device" in note
    page = cohort.write_html(report, out, pngs, []).read_text()
    assert page.count(note.replace("'", "&#x27;")) == 1


def test_with_timings_every_plot_is_drawn(tmp_path):
    """With a student's timing, is every plot drawn and no note written?"""
    report = _report(_cohort_with_a_timing_cell(tmp_path))
    report.timing = cohort.timing_table({"bob": _hand_written_timing(tmp_path)})
    assert cohort.drawn_plots(report) == cohort.PLOTS
    assert cohort.missing_plots_note(report) == ""


# -- 4. one source for the copy roof ---------------------------------------------------------


def test_demo_and_command_take_the_roof_from_the_same_results(tmp_path, monkeypatch):
    """Do the demo and `python -m grader.cohort` (no --benchmark) report from one benchmark
    file, the course's recorded H200 run?"""
    calls, write_report = [], inspect.signature(cohort.write_report)
    monkeypatch.setattr(demo.sample_cohort, "build", lambda root: [])
    monkeypatch.setattr(demo, "ready_to_grade", lambda *_: None)
    monkeypatch.setattr(demo, "autograde_parallel", lambda *_: SimpleNamespace(failed=()))
    monkeypatch.setattr(demo, "score_table", lambda *_: "")
    monkeypatch.setattr(demo.cohort, "write_report", lambda *a, **k: calls.append((a, k)) or "x")
    assert demo.main(["--course", str(tmp_path / "c"), "--report", str(tmp_path / "r")]) == 0
    ((args, kwargs),) = calls
    bound = write_report.bind(*args, **kwargs)
    bound.apply_defaults()
    command = cli._parser().parse_args([ASSIGNMENT]).benchmark
    assert Path(bound.arguments["benchmark"]) == Path(command) == H200_SAMPLE


def test_the_bandwidth_plot_names_where_its_roof_comes_from(tmp_path):
    """Does the bandwidth plot's roof say which benchmark results it comes from?"""
    timing = cohort.timing_table({"copy-first": _hand_written_timing(tmp_path)})
    report = cohort.Report(None, None, timing, None, None, load_results(H200_SAMPLE), H200_SAMPLE)
    assert report.benchmark_source == "the course's recorded H200 run, h200_i1.json"
    figure = cohort.plot_bandwidth(timing, report.benchmark, report.benchmark_source)
    labels = [t.get_text() for ax in figure.axes for t in ax.get_legend().get_texts()]
    roof = next(label for label in labels if label.startswith("roof: device copy"))
    assert roof.endswith("(NVIDIA H200; from the course's recorded H200 run, h200_i1.json)")
    given = cohort.Report(None, None, timing, None, None, None, tmp_path / "mine.json")
    assert given.benchmark_source == f"--benchmark {tmp_path / 'mine.json'}"


# -- 5. the instructor notebook without a course ---------------------------------------------


def _course_without_students(folder: Path) -> Path:
    """A gradebook that knows the assignment and no student, as `nbgrader generate_assignment`
    leaves in a folder nobody submitted to."""
    from nbgrader.api import Gradebook

    folder.mkdir()
    with Gradebook(f"sqlite:///{folder / 'gradebook.db'}") as gradebook:
        gradebook.add_assignment(ASSIGNMENT)
    return folder


@pytest.mark.parametrize("students", [False, True], ids=["no gradebook", "no students"])
def test_notebook_report_names_the_folder_and_how_to_point_it(tmp_path, students):
    """Does the notebook's report refuse a folder with no course, or nobody on its roster,
    naming the folder and I1_COURSE?"""
    folder = tmp_path / "course"
    _course_without_students(folder) if students else folder.mkdir()
    with pytest.raises(cohort.CohortError) as info:
        cohort.notebook_report(folder, ASSIGNMENT)
    assert f"no course to report on in {folder}" in str(info.value)
    assert "set I1_COURSE=/path/to/course" in str(info.value)


def test_instructor_notebook_stops_without_a_course(tmp_path):
    """Run on a folder whose gradebook has no students, does the notebook stop with the
    message instead of reporting on 0 students?"""
    folder = _course_without_students(tmp_path / "course")
    notebook = ROOT / "notebooks" / "instructor_cohort.ipynb"
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute"]
        + [str(notebook), "--output-dir", str(tmp_path / "out")],
        cwd=notebook.parent,
        env={**os.environ, "I1_COURSE": str(folder)},
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert f"no course to report on in {folder}" in done.stderr
    assert "0 students" not in done.stderr


# -- 6. make demo writes only its scratch course and report ----------------------------------


def test_make_demo_runs_only_the_demo_in_its_scratch_course():
    """Does `make demo` run nothing but `grader.demo` on scratch/demo and reports/cohort (no
    `nbgrader generate_assignment` in the repository, which leaves gradebook.db there)?"""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "demo", "PYTHON=python3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "python3 -m grader.demo --course scratch/demo --report reports/cohort"
    ]
