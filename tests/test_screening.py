"""The source screen when a submission is graded (grader/grading/screening.py): each finding
holds the grade for an instructor's review and costs no point, a reading that could not
finish holds the notebook, and the grading log names each hold beside every check that
passed."""

from __future__ import annotations

from types import SimpleNamespace

import nbformat

from grader import course
from grader.grading.grading_log import GradingLog, Hold, read_record, record_paths
from grader.grading.runner import Runner
from grader.grading.screening import screen_holds, screen_notebook, screen_summary
from grader.grading.trusted import GradeHiddenCells
from learning.workshops.screen import Finding, Screened
from learning.workshops.screen.rules import RULES

HELPER = "import subprocess\n\ndef gpu_name():\n    return subprocess.run(['nvidia-smi'])\n"
FINDING = Finding(
    "process", "#27", 4, "calls subprocess.run", "return subprocess.run(['nvidia-smi'])"
)


def test_each_finding_holds_the_whole_grade_with_its_line():
    """Does a finding become a hold of the screen's on the whole grade, naming its cell,
    line, code and reason?"""
    [hold] = screen_holds(Screened((FINDING,)))
    why = RULES["process"].why
    text = f"`return subprocess.run(['nvidia-smi'])` calls subprocess.run: {why}"
    assert hold == Hold("screen", "process", "#27", 4, text)
    assert hold.cells == ()


def test_a_reading_that_could_not_finish_holds_the_notebook():
    """Is a notebook the screen could not read within its bounds held whole, with why?"""
    [hold] = screen_holds(Screened(unfinished="it took more than 10 s"))
    assert (hold.rule, hold.cell, hold.line) == ("unfinished", "(whole notebook)", 0)
    assert hold.text == "the screen could not finish reading: it took more than 10 s"
    assert screen_summary(Screened(unfinished="it took more than 10 s", seconds=10.0)) == (
        "source screen: could not finish reading (it took more than 10 s) (10.0 s)"
    )


def test_the_notebook_being_graded_is_read_as_it_is():
    """Does grading's screen read the notebook it grades (a helper of the student's that
    starts a process), and nothing in the solution?"""
    nb = course.solved_notebook(course.REPO)
    assert screen_notebook(nb).findings == ()
    nb.cells.append(nbformat.v4.new_code_cell(HELPER))
    [finding] = screen_notebook(nb).findings
    assert (finding.rule, finding.cell, finding.line) == ("process", f"#{len(nb.cells)}", 4)


def test_the_log_names_each_hold_beside_what_passed(tmp_path):
    """Does the grading log say what the screen found, name each hold, and never log a
    held grade's check as passed without saying it is held?"""
    log = GradingLog(tmp_path, course.ASSIGNMENT, "ada").begin()
    note = GradeHiddenCells()._held(Screened((FINDING,), seconds=0.4), log)
    runner = Runner(tmp_path, None, None, SimpleNamespace(impl=None))
    runner.say, runner.held = log.say, note
    runner.checked = lambda: []  # a check that passed, outputs aside
    runner.run("checked", [], {})
    text = record_paths(tmp_path, course.ASSIGNMENT, "ada")[0].read_text()
    assert "source screen: 1 finding (0.4 s)" in text
    assert f"held for review: cell #27, line 4: `{FINDING.code}` calls subprocess.run" in text
    assert "checked() (0.0 s): passed, held for review (1 source-screen hold above)" in text
    assert read_record(tmp_path, course.ASSIGNMENT, "ada").held == screen_holds(
        Screened((FINDING,))
    )


def test_nothing_found_holds_nothing(tmp_path):
    """Does a submission the screen finds nothing in get no hold and plain "passed" lines?"""
    log = GradingLog(tmp_path, course.ASSIGNMENT, "bob").begin()
    assert GradeHiddenCells()._held(Screened(seconds=0.3), log) == ""
    assert read_record(tmp_path, course.ASSIGNMENT, "bob").holds == []
    text = record_paths(tmp_path, course.ASSIGNMENT, "bob")[0].read_text()
    assert "source screen: nothing to hold (0.3 s)" in text
