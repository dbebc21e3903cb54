"""Tampering is caught: a fresh, isolated recheck disagrees with a faked gradebook."""

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
    root = course.new_course(tmp_path_factory.mktemp("tamper"))
    course.submit(root, "solution", course.solved_notebook(root))
    course.submit(root, "honest-bug", course.solved_notebook(root, BUGGY))
    for student, edits in TAMPERING.items():
        course.submit(root, student, course.solved_notebook(root, edits))
    course.autograde(root)
    scores = {(s.student, s.cell): s.score for s in course.cell_scores(root)}
    return root, scores, recheck_course(root)


FOOLS_NBGRADER = {
    "patches-grader": {"hidden_pass3"},
    "rewrites-later-cells": {"hidden_pass3", "hidden_timing"},
}
"""Tampering that fakes hidden cells in the gradebook, acting on the grading kernel, with
the cells the recheck must flag. Rewriting every later cell into `pass` also fakes the
worksheet and the timing cells; the worksheet is the solution's, so only the timing (which
never measured) disagrees."""
DEFEATED = ("patches-torch", "hides-tracebacks")
"""Tampering that fakes nothing: hidden checks run isolated, and a cell whose traceback is
hidden still ends in an error reply, which nbgrader scores zero."""


@pytest.mark.parametrize("student", FOOLS_NBGRADER)
def test_tampering_fakes_the_gradebook(graded, student):
    """Does this tampering really fool nbgrader (so the recheck has work to do)?"""
    _, scores, _ = graded
    for cell in FOOLS_NBGRADER[student]:  # cells after the tampering cell
        assert scores[(student, cell)] > scores[("honest-bug", cell)] == 0


@pytest.mark.parametrize("student", DEFEATED)
def test_other_tampering_fakes_nothing(graded, student):
    """Do patched torch functions or hidden tracebacks leave the hidden cell at zero, and
    does the recheck agree?"""
    _, scores, found = graded
    assert scores[(student, "hidden_pass3")] == 0
    assert not [d for d in found if d.student == student]


@pytest.mark.parametrize("student", FOOLS_NBGRADER)
def test_recheck_flags_tampering(graded, student):
    """Does the recheck list the faked cell, with the failing case as evidence?"""
    _, _, found = graded
    flagged = {d.cell: d for d in found if d.student == student}
    assert set(flagged) == FOOLS_NBGRADER[student]
    assert flagged["hidden_pass3"].recheck_score == 0
    assert flagged["hidden_pass3"].evidence.startswith("hidden-")  # the first failing case
    if "hidden_timing" in flagged:
        assert "the timing cell never measured" in flagged["hidden_timing"].evidence


def test_honest_submissions_agree(graded):
    """Do the solution and an honest bug agree with the gradebook (no false alarms)?"""
    _, _, found = graded
    assert {d.student for d in found} == set(FOOLS_NBGRADER)


def test_cli_exit_status_and_text(graded, capsys):
    """Does the command exit 1 and name each student, cell and score when they disagree?"""
    root, _, _ = graded
    assert main(["i1_strided_softmax", "--course", str(root)]) == 1
    out = capsys.readouterr().out
    assert (
        "patches-grader: hidden_pass3 scored 3.0/3 in the gradebook, but the recheck gives 0" in out
    )


def test_cli_refuses_a_course_without_gradebook(tmp_path, capsys):
    """Does a course with no gradebook give one line and exit 2?"""
    assert main(["i1_strided_softmax", "--course", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no gradebook at" in err
