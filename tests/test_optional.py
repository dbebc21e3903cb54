"""The optional exercises stay optional: a submission that leaves both extra-credit sections
as their stubs is "not attempted" there, with no unfinished hint and no page of failed
cases, in `check`, in a test cell and a hidden cell's feedback, and in the hint sidecar the
cohort counts."""

from __future__ import annotations

import json
import os

import nbformat
import pytest
from in_process import run_main

from grader import course
from grader.grading.feedback import hidden_failure
from grader.grading.hidden import hidden_cases
from learning.workshops.check import main, run_check
from learning.workshops.checking.cases import OPS, suite
from learning.workshops.checking.hint_rules import diagnose
from learning.workshops.checking.hints import HintId
from learning.workshops.checking.loader import load_module
from learning.workshops.checking.sidecars import HINTS_SIDECAR, load_hints
from learning.workshops.notebook.testing import failure_message, record_outcome, run_cases

OPTIONAL = ("strided_softmax_", "strided_softmax_backward")
OPTIONAL_CELLS = ("inplace_kernel", "inplace", "backward_kernel", "backward")


@pytest.fixture(scope="module")
def untouched(tmp_path_factory):
    """The solved notebook with both optional sections as the release hands them out."""
    release = nbformat.read(
        course.REPO / "release" / course.ASSIGNMENT / course.NOTEBOOK, as_version=4
    )
    stubs = {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in release.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") in OPTIONAL_CELLS
    }
    notebook = course.solved_notebook(course.REPO)
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in stubs:
            cell.source = stubs[grade_id]
    path = tmp_path_factory.mktemp("untouched") / course.NOTEBOOK
    nbformat.write(notebook, path)
    return path


@pytest.mark.parametrize("op", OPTIONAL)
def test_check_says_not_attempted_in_one_line(op, untouched):
    """Does `check OP --hint` on an untouched optional section say "not attempted" with no
    FAIL line and no unfinished hint, and exit 0 (leaving it costs nothing)?"""
    done = run_main(main, (op, "--hint", "--impl", str(untouched)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not attempted" in done.stdout and "extra credit" in done.stdout
    assert "FAIL" not in done.stdout and "unfinished" not in done.stdout
    assert len(done.stdout.strip().splitlines()) == 2, done.stdout


def test_the_json_report_says_not_attempted(untouched):
    """Does `--json` say attempted false, its one hint not-attempted?"""
    done = run_main(main, ("strided_softmax_backward", "--json", "--impl", str(untouched)))
    report = json.loads(done.stdout)
    assert report["attempted"] is False and report["passed"] is False
    assert [h["id"] for h in report["hints"]] == ["not-attempted"]


def test_the_required_passes_are_checked_as_before(untouched):
    """Does the pass-3 check of the same notebook pass, its optional sections unseen?"""
    report = run_check("strided_softmax", untouched)
    assert report.passed and report.attempted


@pytest.mark.parametrize("op", OPTIONAL)
def test_a_test_cell_and_its_feedback_say_not_attempted(op, untouched, monkeypatch, tmp_path):
    """Does a visible test cell's message, a hidden cell's feedback and the hint sidecar
    say not attempted, in one line, with no fresh example run and no unfinished hint?"""
    fn = getattr(load_module(untouched), OPS[op].function)
    results = run_cases(fn, op, suite(op, None, "cpu"), seed=1)
    assert {r.failure for r in results if not r.passed} == {"not-attempted"}
    assert [h.id for h in diagnose(results)] == [HintId.NOT_ATTEMPTED]
    message = failure_message(results, f"{op}, public cases")
    assert message.startswith(f"{op}, public cases: not attempted.") and "FAIL" not in message

    def no_examples(cases):
        raise AssertionError("no example is drawn for an exercise not attempted")

    said = hidden_failure(op, hidden_cases(op), results, no_examples)
    assert said.startswith(f"{op}: not attempted.") and "\n" not in said
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(os.environ, "NBGRADER_EXECUTION", "autograde")
    record_outcome(f"hidden:{op}", results)
    recorded = load_hints(tmp_path / HINTS_SIDECAR).tests[f"hidden:{op}"]
    assert recorded.hints == ("not-attempted",) and recorded.status == "failed"
