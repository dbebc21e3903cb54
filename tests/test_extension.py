"""Extensions (`python -m grader.extension`, grader.grading.extensions): a student's own due
date, kept in the course, given to the gradebook, honoured by autograde's late penalty, a
regrade and `nbgrader export`.

The course is a folder outside the repository with the course's nbgrader_config.py and a
gradebook filled through nbgrader's API (no autograde runs); nbgrader's own steps (its
Autograde's first step on a student, AssignLatePenalties, `nbgrader export`) run on it.
"""

from __future__ import annotations

import csv
import json
import shutil
import warnings
from datetime import datetime, timedelta
from pathlib import Path

import nbformat
import pytest
from in_process import run_main
from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import AssignLatePenalties
from nbgrader.utils import parse_utc
from traitlets.config.loader import PyFileConfigLoader

from grader import course, extension
from grader.course import ASSIGNMENT
from grader.gradebook import course_id
from grader.grading.extensions import FILE, extension_of, honour_extension, own_due_date
from grader.grading.fresh_start import forget_previous_grading
from grader.grading.grading_log import GradingLog
from grader.sample_cohort import DUE, LATE

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = course.NOTEBOOK.removesuffix(".ipynb")
UNDATED = "undated_assignment"
DUE_AT = parse_utc(DUE)  # 2026-12-01 17:00 UTC; LATE is 16.5 h after it


def _gradebook(root: Path) -> Gradebook:
    return Gradebook(f"sqlite:///{root / 'gradebook.db'}", course_id(root))


def _fill(root: Path) -> Path:
    """A course at `root`: a 10-point assignment due DUE and one without a due date; `late`
    graded 10 of 10, submitted 16.5 h late, its 10 % penalty stored as autograde stores it;
    `waiting`, on the roster with nothing submitted."""
    root.mkdir()
    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's add_submission trips SQLAlchemy warnings
        with _gradebook(root) as gradebook:
            gradebook.add_assignment(ASSIGNMENT, duedate=DUE_AT)
            gradebook.add_assignment(UNDATED)
            gradebook.add_notebook(NOTEBOOK, ASSIGNMENT)
            gradebook.add_grade_cell(
                "test_a", NOTEBOOK, ASSIGNMENT, max_score=10.0, cell_type="code"
            )
            gradebook.add_student("late")
            gradebook.add_student("waiting")
            gradebook.add_submission(ASSIGNMENT, "late", timestamp=parse_utc(LATE))
            grade = gradebook.find_grade("test_a", NOTEBOOK, ASSIGNMENT, "late")
            grade.auto_score, grade.needs_manual_grade = 10.0, False
            notebook = gradebook.find_submission_notebook(NOTEBOOK, ASSIGNMENT, "late")
            notebook.late_submission_penalty = 1.0
            gradebook.db.commit()
    folder = root / "autograded" / "late" / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), folder / course.NOTEBOOK)
    GradingLog(root, ASSIGNMENT, "late").begin().finish()
    return root


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> Path:
    return _fill(tmp_path_factory.mktemp("filled") / "course")


@pytest.fixture
def course_folder(filled, tmp_path) -> Path:
    """A copy of the filled course of its own, outside the repository."""
    return Path(shutil.copytree(filled, tmp_path / "course"))


def grant(root: Path, *args: str):
    """`python -m grader.extension i1_strided_softmax ARGS`, run from the course folder."""
    return run_main(extension.main, (ASSIGNMENT, *args), cwd=root)


def stored(root: Path, student: str) -> tuple[timedelta | None, float | None, float]:
    """The student's gradebook extension, stored penalty and seconds late."""
    with _gradebook(root) as gradebook:
        submission = gradebook.find_submission(ASSIGNMENT, student)
        penalty = submission.notebooks[0].late_submission_penalty
        return submission.extension, penalty, submission.total_seconds_late


@pytest.mark.parametrize(
    ("text", "utc"),
    [
        ("2026-12-18 17:00 UTC", datetime(2026, 12, 18, 17)),
        ("2026-12-18T17:00:00Z", datetime(2026, 12, 18, 17)),
        ("2026-12-18T17:00+01:00", datetime(2026, 12, 18, 16)),
        ("2026-12-18 17:00 Europe/Berlin", datetime(2026, 12, 18, 16)),
        ("2026-06-18 17:00 Europe/Berlin", datetime(2026, 6, 18, 15)),  # summer time
        ("2026-12-18 17:00 -0500", datetime(2026, 12, 18, 22)),
        ("18 Dec 2026 17:00 CET", datetime(2026, 12, 18, 16)),
    ],
)
def test_until_is_read_with_its_zone_as_utc(text, utc):
    """Is --until read in its own zone (a name, an offset, Z) and kept as UTC?"""
    assert extension.deadline_utc(text) == utc


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("2026-12-18 17:00", "has no time zone: give one"),
        ("2026-12-18", "has no time zone: give one"),
        ("2026-12-18 5pm", "has no time zone: give one"),
        ("2026-12-18 17:00 Mars/Base", "'Mars/Base' is no time zone: give one"),
        ("next Friday UTC", "is not a date and time"),
    ],
)
def test_until_without_a_zone_is_refused(text, says):
    """Is a time with no zone, or a zone nobody knows, refused rather than taken as UTC?"""
    with pytest.raises(extension.ExtensionError, match=says):
        extension.deadline_utc(text)


def test_an_extension_is_kept_in_the_course_and_lifts_the_stored_penalty(course_folder):
    """Granted from the course folder to a late student, is it written in the course's file
    and the gradebook's submission, is the stored penalty taken off at once, and does the one
    line say so?"""
    assert stored(course_folder, "late") == (None, 1.0, 59400.0)
    done = grant(course_folder, "--student", "late", "--until", "2026-12-03 09:00 UTC")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (
        "late i1_strided_softmax: due 2026-12-03 09:00:00 UTC (1.67 days after "
        "2026-12-01 17:00:00 UTC); their submission is 0 s late, late penalty 0 points (was 1)\n"
    )
    assert stored(course_folder, "late") == (timedelta(days=1, hours=16), None, 0.0)
    record = json.loads((course_folder / FILE).read_text())
    assert record["extensions"] == [
        {"assignment": ASSIGNMENT, "student": "late", "until": "2026-12-03T09:00:00Z"}
    ]


def test_a_shorter_extension_leaves_part_of_the_penalty(course_folder):
    """An extension of 4 hours for work 16.5 h late: is it 12.5 h late, 10 % off, and does a
    second grant replace the first?"""
    grant(course_folder, "--student", "late", "--days", "3")
    done = grant(course_folder, "--student", "late", "--until", "2026-12-01 21:00 UTC")
    assert done.returncode == 0
    assert done.stdout.endswith("is 45000 s late, late penalty 1 points (was 0)\n")
    assert stored(course_folder, "late") == (timedelta(hours=4), 1.0, 45000.0)
    assert extension_of(course_folder, ASSIGNMENT, "late").until == datetime(2026, 12, 1, 21)


def test_days_list_and_remove(course_folder):
    """Does --days grant one to a student with no submission yet, --list show every
    extension with its date, and --remove take one back, the stored penalty with it?"""
    done = grant(course_folder, "--student", "waiting", "--days", "3")
    assert done.stdout == (
        "waiting i1_strided_softmax: due 2026-12-04 17:00:00 UTC (3 days after "
        "2026-12-01 17:00:00 UTC); no submission yet: autograde applies it\n"
    )
    grant(course_folder, "--student", "late", "--days", "1.5")
    listed = grant(course_folder, "--list")
    assert listed.stdout.splitlines() == [
        "late: due 2026-12-03 05:00:00 UTC (1.5 days after 2026-12-01 17:00:00 UTC)",
        "waiting: due 2026-12-04 17:00:00 UTC (3 days after 2026-12-01 17:00:00 UTC)",
        "2 extensions of i1_strided_softmax",
    ]
    removed = grant(course_folder, "--student", "late", "--remove")
    assert removed.stdout == (
        "late i1_strided_softmax: extension removed, due 2026-12-01 17:00:00 UTC; their "
        "submission is 59400 s late, late penalty 1 points (was 0)\n"
    )
    assert stored(course_folder, "late") == (None, 1.0, 59400.0)
    assert extension_of(course_folder, ASSIGNMENT, "late") is None
    again = grant(course_folder, "--student", "late", "--remove")
    assert (again.returncode, again.stdout) == (
        0,
        "late i1_strided_softmax: no extension to remove\n",
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--student", "99999", "--days", "2"), "99999 is not on the roster"),
        (("--student", "late", "--until", "2026-12-18 17:00"), "has no time zone: give one"),
        (
            ("--student", "late", "--until", "2026-11-30 17:00 UTC"),
            "--until 2026-11-30 17:00:00 UTC is not after the due date 2026-12-01 17:00:00 UTC",
        ),
        (("--student", "late", "--days", "-1"), "--days -1: an extension is 0 to 366 days"),
        (("--student", "late", "--days", "nan"), "--days nan: an extension is 0 to 366 days"),
        (("--student", "late", "--until", "soon UTC"), "'soon UTC' is not a date and time"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(course_folder, args, says):
    """An unknown student, a time without a zone, a date before the due date, negative days,
    not a date: is each refused in one line with exit 2, nothing written?"""
    done = grant(course_folder, *args)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("extension: ") and says in done.stderr
    assert done.stderr.count("\n") == 1
    assert not (course_folder / FILE).exists()
    assert stored(course_folder, "late") == (None, 1.0, 59400.0)


def test_no_due_date_unknown_assignment_and_no_course_are_refused(course_folder, tmp_path):
    """An assignment with no due date, one not in the gradebook, a folder that is no course:
    one line each, exit 2?"""
    cases = [
        ((UNDATED, "--student", "late", "--days", "1"), course_folder, "has no due date"),
        (("nope", "--list"), course_folder, "no assignment nope in the gradebook: add it"),
        ((ASSIGNMENT, "--list"), tmp_path, "is not a course: it has no nbgrader_config.py"),
    ]
    for args, where, says in cases:
        done = run_main(extension.main, args, cwd=where)
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr.count("\n") == 1 and says in done.stderr, done.stderr


def _autograde_app(root: Path):
    """nbgrader's Autograde configured by the course's nbgrader_config.py (which makes a
    regrade start fresh and honour extensions), as `nbgrader autograde` builds it."""
    from nbgrader.converters import Autograde

    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    return Autograde(coursedir=CourseDirectory(config=config), config=config)


def _late_penalty_as_autograde(root: Path, student: str) -> float | None:
    """The penalty autograde's AssignLatePenalties, configured like the course, stores."""
    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    url = f"sqlite:///{root / 'gradebook.db'}"
    resources = {
        "nbgrader": {
            "notebook": NOTEBOOK,
            "assignment": ASSIGNMENT,
            "student": student,
            "db_url": url,
        }
    }
    AssignLatePenalties(config=config).preprocess(nbformat.v4.new_notebook(), resources)
    return stored(root, student)[1]


def test_a_first_autograde_honours_an_extension_granted_before_the_submission(course_folder):
    """Granted before `waiting` submitted: does autograde's first step on them give their new
    submission the extension, so that work 16.5 h after the course's due date and before
    theirs loses nothing, and work 16.5 h after theirs loses 10 %?"""
    grant(course_folder, "--student", "waiting", "--days", "1")
    submitted = course_folder / "submitted" / "waiting" / ASSIGNMENT
    submitted.mkdir(parents=True)
    (submitted / "timestamp.txt").write_text(LATE)
    assert _autograde_app(course_folder).init_destination(ASSIGNMENT, "waiting")
    with _gradebook(course_folder) as gradebook:  # nbgrader's init_assignment, next
        gradebook.update_or_create_submission(ASSIGNMENT, "waiting", timestamp=LATE)
        grade = gradebook.find_grade("test_a", NOTEBOOK, ASSIGNMENT, "waiting")
        grade.auto_score = 10.0
        gradebook.db.commit()
    assert stored(course_folder, "waiting")[0] == timedelta(days=1)
    assert _late_penalty_as_autograde(course_folder, "waiting") is None
    with _gradebook(course_folder) as gradebook:
        gradebook.update_or_create_submission(
            ASSIGNMENT, "waiting", timestamp="2026-12-03 09:30 UTC"
        )
    assert stored(course_folder, "waiting")[2] == 59400.0
    assert _late_penalty_as_autograde(course_folder, "waiting") == 1.0


def test_a_regrade_and_a_new_gradebook_keep_it(course_folder):
    """Does a regrade's fresh start keep the extension, and does autograde give it back to a
    submission whose gradebook row was made again?"""
    grant(course_folder, "--student", "late", "--days", "2")
    forget_previous_grading(CourseDirectory(root=str(course_folder)), ASSIGNMENT, "late")
    assert stored(course_folder, "late")[0] == timedelta(days=2)
    with _gradebook(course_folder) as gradebook:
        gradebook.remove_submission(ASSIGNMENT, "late")
        gradebook.add_submission(ASSIGNMENT, "late", timestamp=parse_utc(LATE))
    assert stored(course_folder, "late")[0] is None
    submitted = course_folder / "submitted" / "late" / ASSIGNMENT
    submitted.mkdir(parents=True)
    (submitted / "timestamp.txt").write_text(LATE)
    shutil.rmtree(course_folder / "autograded" / "late")
    assert _autograde_app(course_folder).init_destination(ASSIGNMENT, "late")
    assert stored(course_folder, "late")[:1] == (timedelta(days=2),)
    assert _late_penalty_as_autograde(course_folder, "late") is None


def test_own_due_date_is_the_extensions_or_the_assignments(course_folder):
    """Is a student's own due date their extension's, the assignment's without one, and the
    assignment's again once the assignment's moves past the extension's?"""
    grant(course_folder, "--student", "waiting", "--days", "3")
    own = own_due_date(course_folder, ASSIGNMENT, "waiting", DUE_AT)
    assert own == datetime(2026, 12, 4, 17)
    assert own_due_date(course_folder, ASSIGNMENT, "late", DUE_AT) == DUE_AT
    later = datetime(2026, 12, 10, 17)
    assert own_due_date(course_folder, ASSIGNMENT, "waiting", later) == later


def test_an_unreadable_extensions_file_is_refused_not_ignored(course_folder):
    """Is a broken extensions.json refused by the command in one line, and by autograde
    (which would otherwise grade without the extensions)?"""
    (course_folder / FILE).write_text("{not json")
    done = grant(course_folder, "--list")
    assert done.returncode == 2 and "extensions.json: not JSON" in done.stderr
    with pytest.raises(ValueError, match="not JSON"):
        honour_extension(CourseDirectory(root=str(course_folder)), ASSIGNMENT, "late")


@pytest.mark.nbgrader
def test_nbgrader_export_shows_the_penalty_after_the_extension(course_folder):
    """Through a real `nbgrader export` on the course's config: is the late student, given
    1 day 16 h, 0 s late with no penalty and the full score, and 10 % off again once it is
    removed?"""
    grant(course_folder, "--student", "late", "--until", "2026-12-03 09:00 UTC")

    def exported() -> dict:
        course.nbgrader(course_folder, "export", "--to", "grades.csv")
        with (course_folder / "grades.csv").open(newline="") as fh:
            return {row["student_id"]: row for row in csv.DictReader(fh)}

    late = exported()["late"]
    columns = ("status", "seconds_late", "raw_score", "late_submission_penalty", "score")
    assert tuple(late[c] for c in columns) == ("graded", "0.0", "10.0", "0.0", "10.0")
    assert late["duedate"] == "2026-12-03 09:00:00"  # the student's own
    grant(course_folder, "--student", "late", "--remove")
    late = exported()["late"]
    assert tuple(late[c] for c in columns) == ("graded", "59400.0", "10.0", "1.0", "9.0")
    assert late["duedate"] != "2026-12-03 09:00:00"


def test_nbgrader_export_stops_in_one_line_on_a_broken_extensions_file(course_folder):
    """Through a real `nbgrader export`: does an extensions file that is not JSON stop the
    export with exit 1 and one line naming the file, writing no grades.csv with due dates
    that ignore it, and no traceback?"""
    (course_folder / "extensions.json").write_text("{not json")
    done = course.nbgrader(course_folder, "export", "--to", "grades.csv", check=False)
    assert done.returncode == 1
    assert f"{course_folder / 'extensions.json'}: not JSON" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (course_folder / "grades.csv").exists()
