"""Tampering from the kernel fakes nothing, and a recheck catches a grade faked in the gradebook."""

from __future__ import annotations

import pytest

from grader import course
from grader.recheck import main, recheck_course
from grader.zoo import BUGS, Edit

pytestmark = pytest.mark.nbgrader

BUGGY = next(b for b in BUGS if b.name == "ignores-column-stride").edits
"""A bug the visible tests miss (they use contiguous inputs) and the hidden ones catch."""


def tamper(payload: str) -> tuple[Edit, ...]:
    """A buggy kernel plus `payload`, run at the top level of the wrapper's cell."""
    return (
        *BUGGY,
        Edit("strided_softmax", "\n    return y", f"\n    return y\n\n\n{payload}\n"),
    )


TAMPERING = {
    "patches-grader": tamper(
        "import grader.hidden\n"
        "grader.hidden.expect_hidden = lambda *args, **kwargs: print('all hidden cases pass')"
    ),
    "patches-torch": tamper(
        "torch.isclose = lambda a, b, **kwargs: torch.ones_like(a, dtype=torch.bool)\n"
        "torch.allclose = lambda *args, **kwargs: True"
    ),
    "hides-tracebacks": tamper("get_ipython().showtraceback = lambda *args, **kwargs: None"),
    "rewrites-later-cells": tamper(
        'get_ipython().input_transformers_post.append(lambda lines: ["pass\\n"])'
    ),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade a solution, an honest bug and the tampering, recheck, then fake one grade in
    the gradebook itself (as a broken grader or a hand edit would) and recheck again."""
    root = course.new_course(tmp_path_factory.mktemp("tamper"))
    course.submit(root, "solution", course.solved_notebook(root))
    course.submit(root, "honest-bug", course.solved_notebook(root, BUGGY))
    for student, edits in TAMPERING.items():
        course.submit(root, student, course.solved_notebook(root, edits))
    course.autograde(root)
    scores = {(s.student, s.cell): s.score for s in course.cell_scores(root)}
    before = recheck_course(root)
    with course.open_gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        grade = gradebook.find_grade("hidden_pass3", "strided_softmax", course.ASSIGNMENT, FAKED)
        grade.auto_score = grade.max_score
        gradebook.db.commit()
    return root, scores, before, recheck_course(root)


FAKED = "honest-bug"
"""The student whose hidden pass-3 grade is raised by hand in the gradebook."""


@pytest.mark.parametrize("student", TAMPERING)
def test_tampering_from_the_kernel_fakes_nothing(graded, student):
    """Patching the grader or torch, hiding tracebacks, rewriting later cells into `pass`:
    the hidden cells are graded outside the kernel, so each scores what the bug earns."""
    _, scores, before, _ = graded
    for cell in ("hidden_pass2", "hidden_pass3", "hidden_timing"):
        assert scores[(student, cell)] == scores[("honest-bug", cell)] == 0
    assert not [d for d in before if d.student == student]


def test_honest_submissions_agree(graded):
    """Before the gradebook is touched, does the recheck agree on everyone?"""
    _, _, before, _ = graded
    assert before == []


def test_recheck_flags_a_faked_grade(graded):
    """Does the recheck list the grade raised by hand, with the failing case as evidence?"""
    _, _, _, after = graded
    [flagged] = after
    assert (flagged.student, flagged.cell, flagged.recheck_score) == (FAKED, "hidden_pass3", 0)
    assert flagged.gradebook_score == 3
    assert flagged.evidence.startswith("hidden-")  # the first failing case


def test_cli_exit_status_and_text(graded, capsys):
    """Does the command exit 1 and name each student, cell and score when they disagree?"""
    root, _, _, _ = graded
    assert main(["i1_strided_softmax", "--course", str(root)]) == 1
    out = capsys.readouterr().out
    assert "honest-bug: hidden_pass3 scored 3.0/3 in the gradebook, but the recheck gives 0" in out


def test_cli_refuses_a_course_without_gradebook(tmp_path, capsys):
    """Does a course with no gradebook give one line and exit 2?"""
    assert main(["i1_strided_softmax", "--course", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no gradebook at" in err
