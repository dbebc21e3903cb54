"""A recheck agrees with honest grading and catches a grade faked in the gradebook.

Tampering and forged verdicts meet the recheck in the attack suite's course
(tests/exploits/test_recheck_attacks.py)."""

from __future__ import annotations

import shutil

import pytest

from grader import course
from grader.gradebook import open_gradebook
from grader.recheck import main, recheck_course

pytestmark = pytest.mark.nbgrader

FAKED = "bug-ignores-column-stride"
"""The student whose hidden pass-3 grade is raised by hand in the gradebook: a bug that the
hidden cells catch."""
RECHECKED = ("solution", FAKED)


@pytest.fixture(scope="module")
def graded(shared_course, tmp_path_factory):
    """Recheck the solution and the honest bug in the shared course; then, in
    a copy of it, fake one grade in the gradebook itself (as a broken grader or a hand edit
    would) and recheck that student again."""
    root = shared_course.root
    before = recheck_course(root, RECHECKED)
    faked = tmp_path_factory.mktemp("faked") / "course"
    shutil.copytree(root, faked, symlinks=True)
    with open_gradebook(f"sqlite:///{faked / 'gradebook.db'}") as gradebook:
        grade = gradebook.find_grade("hidden_pass3", "strided_softmax", course.ASSIGNMENT, FAKED)
        grade.auto_score = grade.max_score
        gradebook.db.commit()
    return faked, before, recheck_course(faked, [FAKED])


def test_honest_submissions_agree(graded):
    """Before the gradebook is touched, does the recheck agree on everyone?"""
    _, before, _ = graded
    assert before == []


def test_recheck_flags_a_faked_grade(graded):
    """Does the recheck list the grade raised by hand, with the failing case as evidence?"""
    _, _, after = graded
    [flagged] = after
    assert (flagged.student, flagged.cell, flagged.recheck_score) == (FAKED, "hidden_pass3", 0)
    assert flagged.gradebook_score == 3
    assert flagged.evidence.startswith("hidden-")  # the first failing case


def test_cli_exit_status_and_text(graded, capsys):
    """Does the command exit 1 and name each student, cell and score when they disagree?"""
    root, _, _ = graded
    assert main(["i1_strided_softmax", "--course", str(root), "--student", FAKED]) == 1
    out, err = capsys.readouterr()
    assert f"{FAKED}: hidden_pass3 scored 3.0/3 in the gradebook, but the recheck gives 0" in out
    assert err.startswith(f"recheck [1/1] {FAKED}: 1 cell disagrees (") and err.count("\n") == 1
    assert main(["i1_strided_softmax", "--course", str(root), "--student", "nobody"]) == 2
    assert "no autograded submission of nobody" in capsys.readouterr().err


def test_cli_refuses_a_course_without_gradebook(tmp_path, capsys):
    """Does a course with no gradebook give one line and exit 2?"""
    assert main(["i1_strided_softmax", "--course", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no gradebook at" in err


def test_progress_lines():
    """Does each rechecked student get one line: where the recheck is, and what it found?"""
    from grader.recheck import progress_line

    assert progress_line(2, 5, "ada", [], 12.4) == "recheck [2/5] ada: agrees (12 s)"
    assert progress_line(5, 5, "bo", [1, 2], 3) == "recheck [5/5] bo: 2 cells disagree (3 s)"
