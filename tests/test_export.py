"""`nbgrader export` with a status per submission (grader.export): ungradable is not zero.

Most tests fill a gradebook through nbgrader's API, with autograded notebooks and grading
records placed by hand (no autograde runs); the last runs `nbgrader export` on a scratch
course with the course's own nbgrader_config.py.
"""

from __future__ import annotations

import csv
import json
import math
import shutil
import warnings
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from nbgrader.api import Gradebook
from nbgrader.plugins import CsvExportPlugin
from nbgrader.preprocessors import AssignLatePenalties
from nbgrader.utils import parse_utc
from traitlets.config import Config

from grader import cohort, course, uploads
from grader.collected import EVIDENCE, Evidence
from grader.course import ASSIGNMENT
from grader.export import (
    COLUMNS,
    NBGRADER_COLUMNS,
    NO_TIME,
    NOT_GRADABLE_AS_IS,
    StatusCsvExport,
)
from grader.grading import grading_log
from grader.grading.grading_log import STOPPED, GradingLog, record_paths, submission_fingerprint
from grader.grading.late import DailyLatePenalty
from grader.outcome import NO_NOTEBOOK, RESUBMITTED
from grader.sample_cohort import DUE, LATE, ON_TIME
from grader.uploads import Upload
from learning.workshops.checking.sidecars import RecordError

NOTEBOOK = course.NOTEBOOK.removesuffix(".ipynb")
DIED = "the kernel died: Kernel died while waiting for execute reply."
SCORES = {"test_a": 6.0, "test_b": 4.0}
"""The fake assignment's two autograded cells and their points (10 in all)."""


def _fill(root: Path) -> Path:
    """A course at `root`: graded (8 of 10, on time), late (10 of 10, 16.5 h late), crashed
    (ungradable: its record says the kernel died), broken (ungradable, no record), stopped
    (its grading never finished), missing (nothing submitted), pending (submitted, not
    autograded yet)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's add_submission trips SQLAlchemy warnings
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
            gradebook.add_assignment(ASSIGNMENT, duedate=parse_utc(DUE))
            gradebook.add_notebook(NOTEBOOK, ASSIGNMENT)
            for cell, points in SCORES.items():
                gradebook.add_grade_cell(
                    cell, NOTEBOOK, ASSIGNMENT, max_score=points, cell_type="code"
                )
            scores = {"graded": (6.0, 2.0), "late": (6.0, 4.0)}
            stamps = {"late": LATE, "crashed": ON_TIME, "broken": ON_TIME, "stopped": ON_TIME}
            for student in ("graded", "late", "crashed", "broken", "stopped", "missing", "pending"):
                gradebook.add_student(student)
                if student in ("missing", "pending"):
                    continue
                stamp = parse_utc(stamps.get(student, ON_TIME))
                gradebook.add_submission(ASSIGNMENT, student, timestamp=stamp)
                for cell, score in zip(SCORES, scores.get(student, (None, None)), strict=True):
                    grade = gradebook.find_grade(cell, NOTEBOOK, ASSIGNMENT, student)
                    grade.auto_score, grade.needs_manual_grade = score, score is None
            gradebook.db.commit()
    for student in ("graded", "late"):
        folder = root / "autograded" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nbformat.v4.new_notebook(), folder / course.NOTEBOOK)
        log = GradingLog(root, ASSIGNMENT, student).begin()
        log.finish()
    GradingLog(root, ASSIGNMENT, "crashed").begin().cause(DIED)
    GradingLog(root, ASSIGNMENT, "stopped").begin()
    (root / "submitted" / "pending" / ASSIGNMENT).mkdir(parents=True)
    return root


def _config(root: Path, to: Path) -> Config:
    config = Config()
    config.CourseDirectory.root = str(root)
    config.ExportPlugin.to = str(to)
    config.AssignLatePenalties.plugin_class = DailyLatePenalty
    return config


def _export(root: Path, plugin=StatusCsvExport, name: str = "grades.csv") -> list[dict]:
    path = root / name
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        plugin(config=_config(root, path)).export(gradebook)
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> Path:
    return _fill(tmp_path_factory.mktemp("filled"))


@pytest.fixture
def fake_course(filled, tmp_path) -> Path:
    """A copy of the filled course of its own (creating a gradebook takes seconds)."""
    return Path(shutil.copytree(filled, tmp_path / "course"))


def test_every_roster_student_has_a_status_and_only_graded_ones_a_score(fake_course):
    """Graded, late, ungradable (with the record's cause, or without a record), a grading
    that stopped, missing, not autograded yet: is each one's status, cause and score right,
    with no score at all (not 0.0) where nothing was graded?"""
    rows = {row["student_id"]: row for row in _export(fake_course)}
    assert list(rows) == ["graded", "late", "crashed", "broken", "stopped", "missing", "pending"]
    expected = {
        "graded": ("graded", "", "8.0", "0.0", "8.0", "0.0"),
        "late": ("graded", "", "10.0", "1.0", "9.0", "59400.0"),  # 16.5 h late: 10 %
        "crashed": ("ungradable", DIED, "", "", "", "0.0"),
        "broken": ("ungradable", NO_NOTEBOOK, "", "", "", "0.0"),
        "stopped": ("ungradable", STOPPED, "", "", "", "0.0"),
        "missing": ("missing", "", "", "", "", ""),
        "pending": ("not graded", "submitted but not autograded: run nbgrader autograde"),
    }
    for student, (status, cause, *numbers) in expected.items():
        row = rows[student]
        assert (row["status"], row["cause"]) == (status, cause), student
        got = [row[k] for k in ("raw_score", "late_submission_penalty", "score", "seconds_late")]
        assert got[: len(numbers)] == numbers, student
        assert row["max_score"] == "10.0"
        assert row["duedate"] == "2026-12-01 17:00:00"
    assert rows["late"]["timestamp"] == "2026-12-02 09:30:00"
    assert rows["missing"]["timestamp"] == rows["pending"]["score"] == ""


def test_nbgrader_columns_are_kept_and_means_leave_ungradable_out(fake_course):
    """Are nbgrader's columns first, in its order, with its values for a graded submission;
    and does a spreadsheet mean count only graded work where nbgrader's counts zeros?"""
    ours = _export(fake_course)
    theirs = _export(fake_course, CsvExportPlugin, "nbgrader.csv")
    assert tuple(theirs[0]) == NBGRADER_COLUMNS
    assert tuple(ours[0]) == COLUMNS and COLUMNS[: len(NBGRADER_COLUMNS)] == NBGRADER_COLUMNS
    graded = next(r for r in ours if r["student_id"] == "graded")
    assert {k: graded[k] for k in NBGRADER_COLUMNS} == next(
        r for r in theirs if r["student_id"] == "graded"
    )
    crashed = next(r for r in theirs if r["student_id"] == "crashed")
    assert crashed["score"] == "0.0"  # what this exporter fixes
    ours_mean = pd.read_csv(fake_course / "grades.csv")["score"].mean()
    theirs_mean = pd.read_csv(fake_course / "nbgrader.csv")["score"].mean()
    assert ours_mean == pytest.approx((8 + 9) / 2)
    assert theirs_mean == pytest.approx((8 + 10) / 7)  # nbgrader stores no penalty unasked


def test_autograde_stores_the_same_penalty_the_export_shows(fake_course):
    """nbgrader's AssignLatePenalties, configured like the course, stores 10 % for the late
    student and nothing for the on-time one: the penalty export and formgrader agree on."""
    url = f"sqlite:///{fake_course / 'gradebook.db'}"
    for student in ("late", "graded"):
        resources = {
            "nbgrader": {
                "notebook": NOTEBOOK,
                "assignment": ASSIGNMENT,
                "student": student,
                "db_url": url,
            }
        }
        config = _config(fake_course, fake_course / "unused.csv")
        AssignLatePenalties(config=config).preprocess(nbformat.v4.new_notebook(), resources)
    with Gradebook(url) as gradebook:
        late = gradebook.find_submission_notebook(NOTEBOOK, ASSIGNMENT, "late")
        on_time = gradebook.find_submission_notebook(NOTEBOOK, ASSIGNMENT, "graded")
        assert late.late_submission_penalty == 1.0
        assert on_time.late_submission_penalty is None
    rows = {row["student_id"]: row for row in _export(fake_course)}
    assert rows["late"]["late_submission_penalty"] == "1.0"


def test_cohort_report_calls_them_ungradable_and_quotes_the_cause(fake_course):
    """Does the cohort report say "ungradable" with the record's cause (or the missing
    notebook) where the export does, and leave them out of the mean?"""
    report = cohort.build_report(fake_course, ASSIGNMENT)
    table = report.table.set_index(["student", "cell"])
    for cell in SCORES:
        assert table.loc[("crashed", cell), "status"] == "ungradable"
        assert table.loc[("crashed", cell), "reason"] == DIED
        assert table.loc[("broken", cell), "reason"] == NO_NOTEBOOK
        assert math.isnan(table.loc[("crashed", cell), "score"])
    assert table.loc[("pending", "test_a"), "status"] == "not graded"
    lines = cohort.summary_lines(report)
    assert f"Not graded: crashed: ungradable: {DIED}." in lines
    assert f"Not graded: broken: ungradable: {NO_NOTEBOOK}." in lines
    assert report.summary.graded == 2 and report.summary.mean_score == 18 / 2  # raw: 8 and 10
    assert f"ungradable: {DIED}" in cohort._scores_html(report.table)


@pytest.mark.nbgrader
def test_nbgrader_export_in_a_scratch_course(tmp_path):
    """The standard commands on the course's config: `nbgrader db assignment add --duedate`,
    then `nbgrader export`: statuses, empty scores, the cause and a 10 % late penalty."""
    root = course.new_course(tmp_path / "course")
    course.nbgrader(root, "db", "assignment", "add", ASSIGNMENT, f"--duedate={DUE}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
            code = [
                c
                for nb in gradebook.find_assignment(ASSIGNMENT).notebooks
                for c in nb.grade_cells
                if c.cell_type == "code"
            ]
            points = sum(c.max_score for c in code)  # 18: every autograded cell
            for student, stamp in (("graded", ON_TIME), ("late", LATE), ("crashed", ON_TIME)):
                gradebook.add_student(student)
                gradebook.add_submission(ASSIGNMENT, student, timestamp=parse_utc(stamp))
                if student == "crashed":
                    continue
                for cell in code:
                    grade = gradebook.find_grade(cell.name, NOTEBOOK, ASSIGNMENT, student)
                    grade.auto_score, grade.needs_manual_grade = cell.max_score, False
                if student == "graded":  # its prediction graded by hand; late's waits
                    grade = gradebook.find_grade("prediction", NOTEBOOK, ASSIGNMENT, student)
                    grade.manual_score = 2.0
                folder = root / "autograded" / student / ASSIGNMENT
                folder.mkdir(parents=True)
                nbformat.write(nbformat.v4.new_notebook(), folder / course.NOTEBOOK)
            gradebook.add_student("missing")
            gradebook.db.commit()
    GradingLog(root, ASSIGNMENT, "crashed").begin().cause(DIED)
    done = course.nbgrader(root, "export", "--to", "grades.csv")
    assert "Using exporter: StatusCsvExport" in done.stdout + done.stderr
    with (root / "grades.csv").open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = {row["student_id"]: row for row in reader}
    assert tuple(reader.fieldnames) == COLUMNS
    assert points == 18
    graded = rows["graded"]
    assert (graded["status"], graded["raw_score"], graded["score"]) == ("graded", "20.0", "20.0")
    assert graded["not_graded_yet"] == graded["cause"] == ""
    late = rows["late"]
    assert (late["status"], late["seconds_late"], late["raw_score"]) == (
        "hand grading pending",
        "59400.0",
        "18.0",
    )
    assert late["not_graded_yet"] == "prediction (2 points)"
    assert late["cause"] == "prediction (2 points) not graded yet: grade it by hand, then export"
    assert (late["late_submission_penalty"], late["score"]) == ("1.8", "16.2")  # 10 %
    assert "1 submission(s) still have cells to grade by hand" in done.stdout + done.stderr
    crashed = rows["crashed"]
    assert (crashed["status"], crashed["cause"], crashed["score"]) == ("ungradable", DIED, "")
    assert (rows["missing"]["status"], rows["missing"]["score"]) == ("missing", "")


@pytest.mark.nbgrader
def test_sample_cohort_export_after_a_real_autograde(graded_sample_course):
    """On the sample cohort, autograded for real (the session's shared course): does the
    16.5 h late solution lose 10 % in the gradebook and the export alike, the crasher come out
    ungradable with a cause and no score, and the student who sent nothing as missing?"""
    root = graded_sample_course
    course.nbgrader(root, "export", "--to", "grades.csv")
    with (root / "grades.csv").open(newline="") as fh:
        rows = {row["student_id"]: row for row in csv.DictReader(fh)}
    late, solution = rows["late-solution"], rows["solution"]
    assert (late["status"], float(late["seconds_late"])) == ("hand grading pending", 16.5 * 3600)
    assert late["not_graded_yet"] == solution["not_graded_yet"] == "prediction (2 points)"
    raw = float(late["raw_score"])
    assert raw == float(solution["raw_score"]) > 0
    assert float(late["late_submission_penalty"]) == pytest.approx(0.1 * raw)
    assert float(late["score"]) == pytest.approx(0.9 * raw)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        stored = gradebook.find_submission(ASSIGNMENT, "late-solution").late_submission_penalty
    assert stored == pytest.approx(0.1 * raw)  # autograde's AssignLatePenalties agrees
    assert float(solution["late_submission_penalty"]) == 0.0
    crasher = rows["crasher"]
    assert crasher["status"] == "ungradable" and crasher["cause"]
    assert crasher["raw_score"] == crasher["score"] == ""
    assert (rows["no-submission"]["status"], rows["no-submission"]["score"]) == ("missing", "")


def test_a_resubmission_not_graded_since_shows_no_old_score(fake_course):
    """When submitted/ holds another submission than the one the grading record graded, are
    the export and the cohort report "not graded", with no score from the old one?"""
    folder = fake_course / "submitted" / "graded" / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), folder / course.NOTEBOOK)
    row = next(r for r in _export(fake_course) if r["student_id"] == "graded")
    cause = RESUBMITTED.replace("ASSIGNMENT", ASSIGNMENT)
    assert (row["status"], row["cause"], row["raw_score"], row["score"]) == (
        "not graded",
        cause,
        "",
        "",
    )
    table = cohort.build_report(fake_course, ASSIGNMENT).table.set_index(["student", "cell"])
    assert table.loc[("graded", "test_a"), "status"] == "not graded"
    assert math.isnan(table.loc[("graded", "test_a"), "score"])


def test_no_time_under_a_late_policy_and_the_lms_marker(fake_course, caplog):
    """Does a graded submission with no time, where a due date and a late policy apply, say
    so in its cause and, loudly, in the log; and does the LMS's late marker reach lms_late?"""
    with Gradebook(f"sqlite:///{fake_course / 'gradebook.db'}") as gradebook:
        gradebook.find_submission(ASSIGNMENT, "graded").timestamp = None
        gradebook.db.commit()
    folder = fake_course / "submitted" / "late" / ASSIGNMENT
    folder.mkdir(parents=True)
    evidence = Evidence((("a.zip", "late_x.ipynb"),), True, None, None, "2026-12-02 10:00:00 UTC")
    (folder / EVIDENCE).write_text(json.dumps(evidence.to_json()))
    record = GradingLog(fake_course, ASSIGNMENT, "late")
    record.grading(submission_fingerprint(folder))  # what was graded: this folder
    with caplog.at_level("WARNING"):
        rows = {row["student_id"]: row for row in _export(fake_course)}
    assert (rows["graded"]["status"], rows["graded"]["cause"]) == ("graded", NO_TIME)
    assert "NO SUBMISSION TIME for 1 submission(s) under a late policy" in caplog.text
    assert (rows["late"]["lms_late"], rows["graded"]["lms_late"]) == ("yes", "")


def test_a_student_whose_only_upload_is_not_gradable_as_is(fake_course, caplog):
    """With collect's record of uploads it could not take, is a roster student with nothing
    submitted "not gradable as is" with the file, why and fix; a student not on the roster
    listed too; and one with a submission left as it was (graded, not graded)?"""
    reason = "a .py file, not the notebook"
    records = [
        Upload(s, "s.zip", f"x_{n}_9_strided_softmax.py", reason, "ask for it", "")
        for s, n in (("missing", 1), ("stranger", 2), ("graded", 3), ("pending", 4))
    ]
    uploads.write(fake_course, ASSIGNMENT, records)
    with caplog.at_level("WARNING"):
        rows = {row["student_id"]: row for row in _export(fake_course)}
    said = f"submitted, not gradable as is: strided_softmax.py ({reason}); ask for it"
    for student in ("missing", "stranger"):
        assert (rows[student]["status"], rows[student]["cause"]) == (NOT_GRADABLE_AS_IS, said)
        assert rows[student]["score"] == ""
    assert list(rows)[-1] == "stranger"
    assert (rows["graded"]["status"], rows["pending"]["status"]) == ("graded", "not graded")
    assert "2 student(s) submitted only files not gradable as is" in caplog.text
    assert "missing, stranger" in caplog.text


def test_a_corrupt_uploads_record_is_said_in_one_line(fake_course, caplog):
    """Is a corrupt record refused by its loader with the reason, and does the export say
    so in one line and carry on?"""
    uploads.record_path(fake_course, ASSIGNMENT).parent.mkdir(parents=True)
    uploads.record_path(fake_course, ASSIGNMENT).write_text('{"schema": "i1-uploads/1"}')
    with pytest.raises(RecordError, match="uploads is None, not a list"):
        uploads.not_gradable(fake_course, ASSIGNMENT)
    with caplog.at_level("ERROR"):
        rows = {row["student_id"]: row for row in _export(fake_course)}
    assert rows["missing"]["status"] == "missing"
    assert "i1_uploads.json: uploads is None, not a list: run python -m grader.collect" in (
        caplog.text
    )


def _timed_without_gpu(root: Path, student: str) -> None:
    """A grading record whose timing cell raised NoCudaError, recorded as the trusted side
    records it in autograde (`trusted.run_check`)."""
    from types import SimpleNamespace

    from grader.grading.runner import Runner
    from grader.grading.trusted import run_check
    from learning.workshops.measuring.timing import NoCudaError

    log = GradingLog(root, ASSIGNMENT, student).begin()
    runner = Runner(root, None, None, SimpleNamespace(impl=root / course.NOTEBOOK))

    def timing_points(**_):
        raise NoCudaError("no CUDA device")

    runner.timing_points = timing_points
    run_check(runner, ("timing_points", [], {"max_points": 4}), log)
    log.finish()


def test_grading_without_a_gpu_is_said_at_export_and_in_the_cause(fake_course, caplog):
    """When test_b is the timing cell and a student's grading found no CUDA device, does the
    export keep the score and maximum, and say in the cause and in one warning how many lost
    its points and the command that regrades them on a GPU; and nothing for a student whose
    timing ran?"""
    with Gradebook(f"sqlite:///{fake_course / 'gradebook.db'}") as gradebook:
        gradebook.add_source_cell(
            "test_b", NOTEBOOK, ASSIGNMENT, cell_type="code", source="timing_points(x)"
        )
        grade = gradebook.find_grade("test_b", NOTEBOOK, ASSIGNMENT, "graded")
        grade.auto_score = 0.0
        gradebook.db.commit()
    _timed_without_gpu(fake_course, "graded")
    with caplog.at_level("WARNING"):
        rows = {row["student_id"]: row for row in _export(fake_course)}
    command = f"python -m grader.parallel {ASSIGNMENT} --course . --student graded"
    graded = rows["graded"]
    assert (graded["status"], graded["score"], graded["max_score"]) == ("graded", "6.0", "10.0")
    assert graded["cause"] == (
        "0 of the timing cell's 4 points: graded without a GPU (the timing cell found no CUDA "
        f"device); regrade on a GPU machine: {command}"
    )
    assert rows["late"]["cause"] == ""
    warning = next(r.message for r in caplog.records if "without a GPU" in r.message)
    assert warning.startswith("1 student(s) got 0 of the timing cell's 4 points because ")
    assert f"Regrade them on a GPU machine: {command} (or the whole cohort: " in warning
    assert cohort.build_report(fake_course, ASSIGNMENT).summary.no_gpu == ("graded",)


def test_an_unreadable_grading_record_is_ungradable_naming_the_file(fake_course):
    """Is a submission whose grading record is not JSON "ungradable" in the export and in
    the cohort report, its cause naming the file, the fault and the command that grades it
    again; and is the file noted as the cohort notes a bad sidecar?"""
    path = record_paths(fake_course, ASSIGNMENT, "graded")[1]
    path.write_text("{not json")
    row = next(r for r in _export(fake_course) if r["student_id"] == "graded")
    cause = (
        f"its grading record is unreadable ({path}: not JSON (Expecting property name "
        "enclosed in double quotes, line 1)): grade it again (python -m grader.parallel "
        f"{ASSIGNMENT} --student graded)"
    )
    assert (row["status"], row["cause"], row["score"]) == ("ungradable", cause, "")
    report = cohort.build_report(fake_course, ASSIGNMENT)
    table = report.table.set_index(["student", "cell"])
    assert table.loc[("graded", "test_a"), "reason"] == cause
    assert report.summary.unreadable == (
        (
            "graded",
            f"grading_log/{ASSIGNMENT}/graded.json: not JSON (Expecting property name "
            "enclosed in double quotes, line 1)",
        ),
    )


def test_the_cohort_and_the_export_read_each_grading_record_once(fake_course, monkeypatch):
    """Do the cohort report and the export each read every student's grading record once?"""
    read, read_json = [], grading_log.read_json

    def counted(path):
        read.append(Path(path).name)
        return read_json(path)

    monkeypatch.setattr(grading_log, "read_json", counted)
    for make in (
        lambda: cohort.build_report(fake_course, ASSIGNMENT),
        lambda: _export(fake_course),
    ):
        read.clear()
        make()
        assert sorted(read) == sorted(
            f"{s}.json" for s in ("graded", "late", "crashed", "broken", "stopped")
        )


def test_an_unreadable_collect_record_leaves_lms_late_empty_and_says_why(fake_course):
    """When collect's record beside a graded submission is not its record, is lms_late left
    empty (unknown) and does the cause name the file and the fault, the score kept?"""
    folder = fake_course / "submitted" / "graded" / ASSIGNMENT
    folder.mkdir(parents=True)
    (folder / EVIDENCE).write_text('{"schema": "i1-collected/1", "lms_late": "yes"}')
    row = next(r for r in _export(fake_course) if r["student_id"] == "graded")
    assert (row["status"], row["lms_late"], row["score"]) == ("graded", "", "8.0")
    assert row["cause"].startswith(
        f"lms_late unknown: {EVIDENCE} unreadable ({folder / EVIDENCE}: "
    )
