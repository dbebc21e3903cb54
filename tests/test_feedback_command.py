"""`python -m grader.feedback`: what an ungradable or resubmitted student reads, on a gradebook
filled through nbgrader's API (no autograde; the graded case is in
tests/test_instructor_workflow.py)."""

from __future__ import annotations

import warnings

from nbgrader.api import Gradebook
from nbgrader.utils import parse_utc

from grader import feedback
from grader.course import ASSIGNMENT, NOTEBOOK
from grader.grading.grading_log import GradingLog
from grader.sample_cohort import ON_TIME

PAGE = NOTEBOOK.replace(".ipynb", ".html")


def test_ungradable_and_resubmitted_students_read_no_old_feedback(tmp_path, capsys):
    """Does a student whose submission is not JSON get one page saying it could not be
    graded and why, with no score; does a resubmission not autograded yet lose its old
    feedback and get none, named with exit status 1?"""
    root = tmp_path
    (root / "nbgrader_config.py").write_text("c = get_config()\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's add_submission trips SQLAlchemy warnings
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
            gradebook.add_assignment(ASSIGNMENT)
            gradebook.add_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT)
            for student in ("broken", "again"):
                gradebook.add_student(student)
                gradebook.add_submission(ASSIGNMENT, student, timestamp=parse_utc(ON_TIME))
    GradingLog(root, ASSIGNMENT, "broken").begin().cause(
        "invalid notebook strided_softmax.ipynb: Notebook does not appear to be JSON: 'hi'"
    )
    GradingLog(root, ASSIGNMENT, "again").begin().finish()
    again = root / "submitted" / "again" / ASSIGNMENT
    again.mkdir(parents=True)
    (again / NOTEBOOK).write_text("{}")  # not what the record graded
    old = root / "feedback" / "again" / ASSIGNMENT
    old.mkdir(parents=True)
    (old / PAGE).write_text("Score: 20 / 20")
    assert feedback.main([ASSIGNMENT, "--course", str(root)]) == 1
    said = capsys.readouterr()
    assert "could not be graded, told so: broken" in said.out
    assert "RESUBMITTED since graded, no feedback until autograded: again" in said.err
    assert not old.exists()
    page = (root / "feedback" / "broken" / ASSIGNMENT / PAGE).read_text()
    assert "your submission could not be graded" in page and "Score" not in page
    assert "the file is not a notebook Jupyter can open (Notebook does not appear" in page
    assert "Submitted: 2026-12-01 12:00:00" in page


def test_the_reason_a_student_reads_names_no_grader_internals():
    """Is each cause put in a student's words, and an unknown one in none of the grader's?"""
    reason = feedback.student_reason
    assert reason("dead kernel: the student's code killed the kernel (after 3 s)").startswith(
        "running it stopped the kernel"
    )
    assert reason("timeout: the notebook was still running after 900 s").startswith("it was")
    assert reason("internal error: grading the hidden cells failed: grader/x.py") == (
        "grading it failed"
    )
    page = feedback.ungradable_page("strided_softmax", "", "internal error: /course/secret")
    assert "/course/" not in page and "time unknown" in page


def test_student_ids_print_as_escapes(tmp_path, capsys):
    """Does the command name an ungradable student whose id carries an escape sequence
    (the window's title) with it shown as escapes, on the instructor's terminal?"""
    root, student = tmp_path, "mallory\x1b]0;all graded\x07"
    (root / "nbgrader_config.py").write_text("c = get_config()\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's add_submission trips SQLAlchemy warnings
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
            gradebook.add_assignment(ASSIGNMENT)
            gradebook.add_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT)
            gradebook.add_student(student)
            gradebook.add_submission(ASSIGNMENT, student, timestamp=parse_utc(ON_TIME))
    GradingLog(root, ASSIGNMENT, student).begin().cause("timeout: still running after 900 s")
    assert feedback.main([ASSIGNMENT, "--course", str(root)]) == 0
    out = capsys.readouterr().out
    assert "could not be graded, told so: mallory\\x1b]0;all graded\\x07\n" in out
