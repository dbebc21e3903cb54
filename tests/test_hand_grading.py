"""Hand grading (grader.grading.hand_grading, grader.handgrade) and a regrade's fresh start
(grader.grading.fresh_start), on a gradebook filled through nbgrader's API: no autograde.

The fake assignment has the course's names: a hand-graded prediction (a written answer, 2
points) and one autograded cell (3 points)."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory
from nbgrader.utils import parse_utc
from traitlets.config import Config

from grader import handgrade
from grader.course import ASSIGNMENT
from grader.grading.fresh_start import forget_previous_grading
from grader.grading.grading_log import GradingLog, read_record
from grader.grading.hand_grading import KeepHandGrades, NotGradedYet
from grader.sample_cohort import DUE, LATE

NOTEBOOK = "strided_softmax"
ANSWER = "The copy moves four times the bytes, so it takes about twice as long."


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> Path:
    """A gradebook: ada graded (test_a 3 of 3, the prediction waiting), 16.5 h late."""
    root = tmp_path_factory.mktemp("filled")
    (root / "nbgrader_config.py").write_text(
        'c = get_config()\nc.AssignLatePenalties.plugin_class = "grader.grading.late.'
        'DailyLatePenalty"\n'
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's add_submission trips SQLAlchemy warnings
        with Gradebook(url(root)) as gradebook:
            gradebook.add_assignment(ASSIGNMENT, duedate=parse_utc(DUE))
            gradebook.add_notebook(NOTEBOOK, ASSIGNMENT)
            gradebook.add_grade_cell(
                "prediction", NOTEBOOK, ASSIGNMENT, max_score=2, cell_type="markdown"
            )
            gradebook.add_solution_cell("prediction", NOTEBOOK, ASSIGNMENT)
            gradebook.add_grade_cell("test_a", NOTEBOOK, ASSIGNMENT, max_score=3, cell_type="code")
            gradebook.add_student("ada")
            gradebook.add_submission(ASSIGNMENT, "ada", timestamp=parse_utc(LATE))
            grade = gradebook.find_grade("test_a", NOTEBOOK, ASSIGNMENT, "ada")
            grade.auto_score = 3.0
            gradebook.db.commit()
    folder = root / "autograded" / "ada" / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(notebook(ANSWER), folder / f"{NOTEBOOK}.ipynb")
    GradingLog(root, ASSIGNMENT, "ada").begin().finish()
    return root


@pytest.fixture
def root(filled, tmp_path) -> Path:
    return Path(shutil.copytree(filled, tmp_path / "course"))


def url(root: Path) -> str:
    return f"sqlite:///{root / 'gradebook.db'}"


def notebook(answer: str):
    """A graded notebook as the preprocessors meet it: the prediction's answer, test_a."""
    prediction = new_markdown_cell(answer)
    prediction.metadata["nbgrader"] = {
        "grade": True,
        "solution": True,
        "grade_id": "prediction",
        "points": 2,
    }
    test = new_code_cell("assert True")
    test.metadata["nbgrader"] = {
        "grade": True,
        "solution": False,
        "grade_id": "test_a",
        "points": 3,
    }
    return new_notebook(cells=[prediction, test])


def resources(root: Path) -> dict:
    ids = {"notebook": NOTEBOOK, "assignment": ASSIGNMENT, "student": "ada", "db_url": url(root)}
    return {"nbgrader": ids}


def config(root: Path) -> Config:
    config = Config()
    config.CourseDirectory.root = str(root)
    return config


def keep(root: Path, answer: str) -> None:
    KeepHandGrades(config=config(root)).preprocess(notebook(answer), resources(root))


def prediction(root: Path):
    with Gradebook(url(root)) as gradebook:
        grade = gradebook.find_grade("prediction", NOTEBOOK, ASSIGNMENT, "ada")
        comment = gradebook.find_comment("prediction", NOTEBOOK, ASSIGNMENT, "ada")
        return grade.manual_score, grade.needs_manual_grade, comment.manual_comment


def test_a_hand_grade_lasts_exactly_as_long_as_its_answer(root):
    """Graded by hand, then regraded with the same answer (trailing space aside): is the
    grade kept with no review asked; and with another answer, is it cleared, grade and
    comment, with the old ones in the grading log?"""
    keep(root, ANSWER)  # the first autograde: nothing graded yet, the answer recorded
    assert prediction(root) == (None, True, None)
    assert (
        handgrade.main(
            [
                ASSIGNMENT,
                "--course",
                str(root),
                "--student",
                "ada",
                "--points",
                "2",
                "--comment",
                "Right, and why.",
            ]
        )
        == 0
    )
    GradingLog(root, ASSIGNMENT, "ada").begin()  # a regrade starts a new record
    keep(root, ANSWER + "  \n")
    assert prediction(root) == (2.0, False, "Right, and why.")
    keep(root, "The direct kernel is slower.")
    assert prediction(root) == (None, True, None)
    lines = "\n".join(read_record(root, ASSIGNMENT, "ada").lines)
    assert "its grade (2) is cleared (its comment was: 'Right, and why.')" in lines


def test_feedback_says_not_graded_yet_until_it_is(root):
    """Does the feedback's notebook lose the prediction's score heading and say "Not graded
    yet", in the cell and above the notebook, until it is graded; and then say nothing?"""
    nb, res = notebook(ANSWER), resources(root)
    res["nbgrader"]["max_score"] = 5.0
    nb, _ = NotGradedYet(config=config(root)).preprocess(nb, res)
    assert nb.cells[0].source.startswith("**Not graded yet:** prediction (2 of the 5 points) is")
    assert nb.cells[1].metadata["nbgrader"]["grade"] is False  # no "Score: 0 / 2"
    assert nb.cells[1].source.startswith("**Not graded yet.** This answer is graded by hand")
    assert nb.cells[2].metadata["nbgrader"]["grade"] is True  # test_a has its score
    handgrade.grade(root, ASSIGNMENT, "ada", "prediction", 1.5, None)
    nb, _ = NotGradedYet(config=config(root)).preprocess(notebook(ANSWER), res)
    assert [c.source for c in nb.cells] == [c.source for c in notebook(ANSWER).cells]


def test_handgrade_lists_grades_and_refuses(root, capsys):
    """Does --list print the waiting answer; a grade store the late penalty of the new
    score (10 % of 3 + 2); and are another cell, too many points and an ungradable
    submission refused, each with its reason?"""
    assert handgrade.main([ASSIGNMENT, "--course", str(root), "--list"]) == 0
    out = capsys.readouterr().out
    assert f"--- ada prediction (2 points)\n{ANSWER}" in out and "1 answer still to" in out
    said = handgrade.grade(root, ASSIGNMENT, "ada", "prediction", 2, None)
    assert said == "ada prediction: 2 of 2 points by hand (was: not graded yet)"
    with Gradebook(url(root)) as gradebook:
        graded = gradebook.find_submission_notebook(NOTEBOOK, ASSIGNMENT, "ada")
        assert graded.late_submission_penalty == pytest.approx(0.5)
    for args, reason in (
        (["--cell", "test_a", "--points", "1"], "'test_a' is not graded by hand"),
        (["--points", "3"], "--points 3: prediction is worth 0 to 2 points"),
    ):
        assert handgrade.main([ASSIGNMENT, "--course", str(root), "--student", "ada", *args]) == 2
        assert reason in capsys.readouterr().err
    GradingLog(root, ASSIGNMENT, "ada").begin().cause("dead kernel: it crashed")
    assert (
        handgrade.main([ASSIGNMENT, "--course", str(root), "--student", "ada", "--points", "1"])
        == 2
    )
    assert "ada's latest submission is ungradable (dead kernel: it crashed)" in (
        capsys.readouterr().err
    )


HOSTILE_ANSWER = (
    "Twice as long.\x1b[2K\x1b[1A\x1b]0;grades: all done\x07"
    "\x1b]52;c;cm0gLXJmIH4K\x07\u202egnol sa ecivt\u202c\r\x9b31m\n\tsecond line"
)
"""An answer that, printed raw, erases a line, retitles the window, writes the clipboard
(OSC 52), reverses its own text, returns the cursor and sets a C1 colour."""


def test_listed_answers_show_their_control_characters(root, capsys):
    """Does --list print a student's escape sequences, bidi override, carriage return and C1
    controls as visible escapes, none of them raw, with their line breaks and tabs kept?"""
    path = root / "autograded" / "ada" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    nbformat.write(notebook(HOSTILE_ANSWER), path)
    assert handgrade.main([ASSIGNMENT, "--course", str(root), "--list"]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\x07\x9b\u202e\u202c\r"), repr(out)
    assert "Twice as long.\\x1b[2K\\x1b[1A\\x1b]0;grades: all done\\x07" in out
    assert "\\x1b]52;c;cm0gLXJmIH4K\\x07\\u202egnol sa ecivt\\u202c\\r\\x9b31m\n\tsecond" in out


def test_a_regrade_forgets_the_last_grading_but_not_its_hand_grade(root):
    """Before a regrade: are the autograde scores, extra credit, late penalty and feedback
    gone, the submission time the one in submitted/ now, and the hand grade kept?"""
    handgrade.grade(root, ASSIGNMENT, "ada", "prediction", 2, None)
    feedback = root / "feedback" / "ada" / ASSIGNMENT
    feedback.mkdir(parents=True)
    (feedback / f"{NOTEBOOK}.html").write_text("old feedback")
    submitted = root / "submitted" / "ada" / ASSIGNMENT
    submitted.mkdir(parents=True)
    (submitted / "timestamp.txt").write_text("2026-12-01 12:00:00 UTC\n")
    forget_previous_grading(CourseDirectory(root=str(root)), ASSIGNMENT, "ada")
    assert not feedback.exists()
    with Gradebook(url(root)) as gradebook:
        graded = gradebook.find_submission_notebook(NOTEBOOK, ASSIGNMENT, "ada")
        assert {g.name: (g.auto_score, g.manual_score) for g in graded.grades} == {
            "prediction": (None, 2.0),
            "test_a": (None, None),
        }
        assert graded.late_submission_penalty is None
        assert str(gradebook.find_submission(ASSIGNMENT, "ada").timestamp) == (
            "2026-12-01 12:00:00"
        )
    (submitted / "timestamp.txt").unlink()
    forget_previous_grading(CourseDirectory(root=str(root)), ASSIGNMENT, "ada")
    with Gradebook(url(root)) as gradebook:
        assert gradebook.find_submission(ASSIGNMENT, "ada").timestamp is None


def test_the_list_is_sorted_by_student_id_numbers_by_value(root, capsys, monkeypatch):
    """Run in the course folder, does --list print the answers by student id, numeric ids
    by value (9 before 10, as an LMS lists them), whatever order the gradebook holds them in?"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Gradebook(url(root)) as gradebook:
            for student in ("10", "9", "b2", "b10"):
                gradebook.add_student(student)
                gradebook.add_submission(ASSIGNMENT, student, timestamp=parse_utc(DUE))
                gradebook.find_grade("test_a", NOTEBOOK, ASSIGNMENT, student).auto_score = 3.0
            gradebook.db.commit()
    for student in ("10", "9", "b2", "b10"):
        folder = root / "autograded" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(notebook(f"the answer of {student}"), folder / f"{NOTEBOOK}.ipynb")
        GradingLog(root, ASSIGNMENT, student).begin().finish()
    monkeypatch.chdir(root)
    assert handgrade.main([ASSIGNMENT, "--list"]) == 0
    out = capsys.readouterr().out
    listed = [line.split()[1] for line in out.splitlines() if line.startswith("--- ")]
    assert listed == ["9", "10", "ada", "b2", "b10"]
    assert out.endswith("5 answers still to grade by hand\n")
