"""Checker faults are the checker's: an exception in the checks is an internal error, never
the student's crash, failure or hint.

The fault injected is a real one in the checker's own code: `compare.TOLERANCES` loses its
float16 entry, so comparing any float16 case raises KeyError inside `compare.compare`.
"""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
import torch

import grader.grading.hidden as hidden
from grader import recheck
from grader.reference import address_table, strided_softmax
from grader.zoo.bug import REFERENCE
from learning.workshops import check
from learning.workshops.checking import child, compare, isolation
from learning.workshops.checking.cases import Case, CaseResult, Failure, Verdict
from learning.workshops.checking.faults import (
    INTERNAL_ERROR,
    REPORT_IT,
    CheckerFault,
    StudentRaised,
    internal_result,
)
from learning.workshops.checking.hint_rules import diagnose
from learning.workshops.notebook.testing import HINTS_SIDECAR, expect_cases, verdict

FAULTY_CHILD = """
import torch

from learning.workshops.contracts import select_mode

select_mode(verbose=False)
from learning.workshops.checking import child, compare

del compare.TOLERANCES[torch.float16]  # the checker's own table loses an entry
child.main()
"""
STUDENT = (
    REFERENCE.read_text()
    + """
reference = strided_softmax  # its kernels are this file's own: the clean room replays them


def strided_softmax(x, num_warps=4):
    if x.shape[1] == 4:
        raise ValueError("the student's own bug")
    if x.shape[1] == 9 and x.shape[0] == 2:
        __import__("ctypes").string_at(0)
    return reference(x, num_warps)
"""
)
FAULT = "Internal error in the checker (not your code): "
FAULT_RE = re.escape(FAULT)


UNSANDBOXED = ("--sandbox", "off")
"""The check's own sandbox would not see `faulty_child`, which lives in the test's folder."""


@pytest.fixture
def faulty_child(tmp_path, monkeypatch):
    """Children run `faulty_child`: the real child, with the checker's fp16 tolerance gone."""
    (tmp_path / "faulty_child.py").write_text(FAULTY_CHILD)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setattr(isolation, "CHILD_MODULE", "faulty_child")


@pytest.fixture
def autograde(tmp_path, monkeypatch):
    """Run as nbgrader autograde does, in a folder where the hints sidecar is written."""
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.chdir(tmp_path)
    return tmp_path / HINTS_SIDECAR


def _sidecar(path) -> dict:
    return json.loads(path.read_text())["tests"]


def test_the_child_reports_a_fault_in_the_checks_and_goes_on(monkeypatch):
    """Does an exception escaping run_case become an internal-error event naming the place
    in the checker, with the next case run by the same child?"""
    monkeypatch.delitem(compare.TOLERANCES, torch.float16)
    from dataclasses import asdict

    from learning.workshops.checking.exchange import build_inputs

    sent = [Case("half", "transpose", dtype="float16"), Case("after", "slice")]
    job = {
        "op": "strided_softmax",
        "function": "strided_softmax",
        "seed": 1,
        "cases": [{**asdict(c), "inputs": build_inputs("new", c, 1).to_wire()} for c in sent],
    }
    events = []
    child.serve(REFERENCE, [job], lambda event, **fields: events.append((event, fields)))
    fault = next(fields for event, fields in events if event == "internal-error")
    assert fault["case"] == "half"
    assert fault["detail"] == "KeyError: torch.float16"
    assert fault["where"].startswith("learning/workshops/checking/compare.py:")
    assert events[-2][0] == "result" and events[-2][1]["passed"]
    assert events[-1][0] == "done"


def test_cli_exits_3_with_the_internal_error_and_no_hint(faulty_child, capsys):
    """Does the check command print the checker's fault in its own section, no student hint,
    every other case passing, and exit 3?"""
    code = check.main(["strided_softmax", "--hint", "--impl", str(REFERENCE), *UNSANDBOXED])
    out = capsys.readouterr().out
    assert code == 3, out
    assert (
        "  ERROR float16-transpose  KeyError: torch.float16 at "
        "learning/workshops/checking/compare.py:" in out
    )
    assert f"{FAULT}float16-transpose: KeyError: torch.float16 at learning/" in out
    assert REPORT_IT in out
    assert "Every other case passes." in out
    assert "Hint [" not in out and "FAIL" not in out


def test_cli_json_lists_internal_errors(faulty_child, capsys):
    """Does --json carry the fault under internal_errors, with no hint, and exit 3?"""
    assert check.main(["strided_softmax", "--json", "--impl", str(REFERENCE), *UNSANDBOXED]) == 3
    report = json.loads(capsys.readouterr().out)
    assert [e["case"] for e in report["internal_errors"]] == ["float16-transpose"]
    assert (
        "KeyError: torch.float16 at learning/workshops/checking/compare.py:"
        in (report["internal_errors"][0]["detail"])
    )
    assert report["hints"] == [] and report["passed"] is False


def test_the_students_exception_and_segfault_keep_their_kinds(faulty_child, tmp_path):
    """Beside a checker fault, is the student's exception still `exception`, a segfault still
    `crash`, and the cases between them still run?"""
    impl = tmp_path / "student.py"
    impl.write_text(STUDENT)
    chosen = [
        Case("fault", "transpose", 7, 5, dtype="float16"),
        Case("fine", "transpose", 7, 5),
        Case("raises", "contiguous", 3, 4),
        Case("segfault", "contiguous", 2, 9),
        Case("after", "slice", 6, 9),
    ]
    with isolation.Session(impl) as session:
        run = session.run_cases("strided_softmax", "strided_softmax", chosen, 1, 120)
    kinds = {r.name: r.failure for r in run.results}
    assert kinds == {
        "fault": INTERNAL_ERROR,
        "fine": None,
        "raises": "exception",
        "segfault": "crash",
        "after": None,
    }
    assert "the student's own bug" in next(r.detail for r in run.results if r.name == "raises")


def test_internal_errors_build_no_hint():
    """Is a case the checker failed on no evidence for a hint (here: empty-rows)?"""
    fault = internal_result(Case("zero-rows", "transpose", 0, 7), "KeyError: x at here:1")
    assert diagnose([fault]) == []
    assert [
        h.id for h in diagnose([CaseResult("zero-rows", Verdict(Failure.EXCEPTION, ""), ["empty"])])
    ]


def test_verdict_blames_the_checker_first_and_keeps_the_students_failures():
    """With a fault and a student failure, does the cell raise CheckerFault naming both?"""
    fault = internal_result(Case("half"), "KeyError: torch.float16 at learning/x.py:3")
    failed = CaseResult("transpose", Verdict(Failure.VALUES, "wrong values"), ["col-strided"])
    error = verdict([fault, failed], "strided_softmax, public cases")
    assert isinstance(error, CheckerFault) and not isinstance(error, AssertionError)
    lines = str(error).splitlines()
    assert lines[0] == f"{FAULT}half: KeyError: torch.float16 at learning/x.py:3."
    assert lines[1:3] == [REPORT_IT, "strided_softmax, public cases: 1 of 1 cases fail."]
    assert isinstance(verdict([failed], "t"), AssertionError)


def test_expect_cases_raises_the_checkers_fault_and_records_it(monkeypatch, autograde):
    """In a visible test cell, does a fault in the checks raise CheckerFault saying it is not
    the student's, with the sidecar entry's status internal-error?"""
    monkeypatch.delitem(compare.TOLERANCES, torch.float16)
    with pytest.raises(CheckerFault, match=f"^{FAULT_RE}float16-transpose: KeyError") as info:
        expect_cases(strided_softmax, "strided_softmax", ["transpose", "float16-transpose"])
    assert "learning/workshops/checking/compare.py:" in str(info.value)
    entry = _sidecar(autograde)["public:strided_softmax:float16-transpose+transpose"]
    assert entry["status"] == INTERNAL_ERROR
    assert entry["failed"] == [] and entry["hints"] == []
    assert "KeyError" in entry["internal_errors"][0]


def _draw_fails(monkeypatch) -> None:
    """A fault in the hidden checks' own code: drawing the cases raises (as a bad secret
    once made it; a bad secret is now refused before grading starts)."""

    def course_draw(root=None):
        raise ValueError("the draw's own code failed")

    monkeypatch.setattr(hidden, "course_draw", course_draw)


def test_expect_hidden_raises_a_fault_of_its_own_code(monkeypatch, tmp_path):
    """When the hidden cell's own code fails (its draw raises) as an instructor validates
    the source, is it the checker's fault? (Under autograde the trusted side grades it.)"""
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    monkeypatch.chdir(tmp_path)
    _draw_fails(monkeypatch)
    with pytest.raises(CheckerFault, match=f"^{FAULT_RE}hidden:strided_softmax: ValueError"):
        hidden.expect_hidden("strided_softmax", REFERENCE)


def test_function_checks_tell_a_checker_fault_from_the_students(monkeypatch, autograde):
    """Is a raising address_table the student's failure, and a broken draw the checker's,
    in the check the trusted side runs?"""

    def raises(view):
        raise ValueError("the student's own bug")

    with pytest.raises(StudentRaised, match="address_table raised ValueError: the student's"):
        hidden.check_address_table(raises)
    assert _sidecar(autograde)["hidden:address_table"]["status"] == "failed"
    _draw_fails(monkeypatch)
    with pytest.raises(CheckerFault, match=r"at grader/grading/hidden\.py:\d+\.\n"):
        hidden.check_address_table(address_table)
    assert _sidecar(autograde)["hidden:address_table"]["status"] == INTERNAL_ERROR


def test_function_check_fails_when_the_students_function_raises(tmp_path):
    """Is a student's function that raises in the child a failed check, saying what it
    raised, while the session goes on serving the next check?"""
    impl = tmp_path / "student.py"
    impl.write_text(
        "def address_table(view):\n    raise ValueError('the student bug')\n\n"
        "def worksheet(results):\n    return {}\n"
    )
    with isolation.Session(impl) as session:
        passed, said = hidden.run_function_check("address_table", session, hidden.Draw("7"))
        assert not passed and "address_table raised ValueError" in said
        assert "the student bug" not in said  # a hidden cell: the grader's words alone
        passed, said = hidden.run_function_check("worksheet", session, hidden.Draw("7"))
        assert not passed and "worksheet must return a dict" in said


def test_recheck_names_a_checker_fault(monkeypatch, tmp_path):
    """Does the recheck's evidence say a fault was the checker's, not the submission's?"""
    fault = internal_result(Case("half"), "KeyError: torch.float16 at learning/x.py:3")
    monkeypatch.setattr(recheck, "run_hidden", lambda *args: isolation.IsolatedRun([fault]))
    runner = SimpleNamespace(session=None, draw=None)
    passed, why = recheck.recheck_submission(runner, "strided_softmax")
    assert not passed
    assert why == (
        "internal error in the checker, not the submission: half: KeyError: torch.float16 "
        "at learning/x.py:3"
    )
