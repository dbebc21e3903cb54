"""What a grading log says about a submission nbgrader could not grade, and what it leaves
out: nbgrader's false alarms for untouched cells (grader.grading.grading_log,
grader.grading.execute, grader.grading.restore)."""

from __future__ import annotations

import copy
import logging
import re

import nbformat
import pytest

from grader import course
from grader.grading.execute import killing_cell
from grader.grading.grading_log import GradingLog, Hold, read_record, record_paths
from grader.grading.restore import RestoreGradeCells
from learning.workshops.checking.notebook_runner import DEAD_KERNEL, fail_from

ASSIGNMENT = course.ASSIGNMENT

CAUSES = {
    "invalid notebook strided_softmax.ipynb: Notebook does not appear to be JSON: '{no'": (
        "the file in submitted/ada/i1_strided_softmax/ is not a notebook Jupyter can open",
        "ask the student to submit the notebook again",
    ),
    "dead kernel: the student's code killed the kernel in test_pass3 (cell 26 of 60: 'x')": (
        "ask for a resubmission that runs top to bottom",
        "or grade it by hand outside nbgrader",
    ),
    "timeout: the notebook was still running after 900 s": (
        "ask for a resubmission that finishes in time",
        "raise c.Execute.timeout",
    ),
    "submission refused: strided_softmax.ipynb is a symbolic link": (
        "ask the student to submit the notebook file itself",
    ),
    "internal error: grading the hidden cells failed: KeyError": (
        "this is the grader's failure, not the submission's",
        "python -m grader.parallel i1_strided_softmax --student ada",
    ),
}


@pytest.mark.parametrize("cause", list(CAUSES), ids=[c.split(":")[0] for c in CAUSES])
def test_a_cause_ends_the_grading_ungradable_with_what_to_do(tmp_path, cause):
    """Does recording why a grading stops make the record ungradable and finished at once
    (nbgrader runs no hook for a submission it fails), with a line saying what the
    instructor can do about that kind of cause?"""
    GradingLog(tmp_path, ASSIGNMENT, "ada").begin().cause(cause)
    record = read_record(tmp_path, ASSIGNMENT, "ada")
    assert (record.status, record.cause) == ("ungradable", cause)
    assert record.finished and record.outcome == ("ungradable", cause)
    text = record_paths(tmp_path, ASSIGNMENT, "ada")[0].read_text()
    assert text.splitlines()[0] == f"status: ungradable ({cause})"
    advice = next(line for line in text.splitlines() if "  what to do: " in line)
    for words in CAUSES[cause]:
        assert words in advice


def test_a_grading_that_finishes_after_a_cause_is_graded(tmp_path):
    """Should a grading finish after all, is it graded, with no cause left?"""
    log = GradingLog(tmp_path, ASSIGNMENT, "ada").begin()
    log.cause("timeout: the notebook was still running after 900 s")
    log.finish()
    assert read_record(tmp_path, ASSIGNMENT, "ada").outcome == ("graded", "")


def test_the_log_for_people_shows_a_students_control_characters(tmp_path):
    """Does the .log an instructor reads (with `cat`) show what a student's code said with
    its escape sequences as escapes, while the record keeps the words as they were?"""
    said = "expect_hidden('strided_softmax'): ValueError: \x1b]52;c;aGk=\x07\x1b[2K\u202e"
    log = GradingLog(tmp_path, ASSIGNMENT, "ada").begin()
    log.say(said)
    text = record_paths(tmp_path, ASSIGNMENT, "ada")[0].read_text()
    assert "ValueError: \\x1b]52;c;aGk=\\x07\\x1b[2K\\u202e\n" in text
    assert not any(c in text for c in "\x1b\x07\u202e")
    assert read_record(tmp_path, ASSIGNMENT, "ada").lines[-1].endswith(said)


def _executed(dies_at: int) -> nbformat.NotebookNode:
    """A notebook as the sandbox's runner returns it when the kernel died in cell `dies_at`
    (0-based): that cell and every code cell after it carry the dead-kernel error."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# 1. Setup"),
        nbformat.v4.new_code_cell("import torch"),
        nbformat.v4.new_code_cell("# my own check\ny = strided_softmax(x)\nprint(y)"),
        nbformat.v4.new_code_cell(
            "expect_cases(\n    strided_softmax,\n    'strided_softmax',\n    ['contiguous', "
            "'transpose', 'slice', 'row-broadcast'],\n)"
        ),
        nbformat.v4.new_code_cell("print('later')"),
    ]
    nb.cells[3].metadata["nbgrader"] = {"grade_id": "test_pass3", "grade": True}
    error = {**DEAD_KERNEL, "traceback": list(DEAD_KERNEL["traceback"])}
    fail_from(nb, dies_at, error)
    return nb


def test_the_cell_that_killed_the_kernel_is_named():
    """Is the cell that was running when the kernel died named (its grade id when it has
    one, its position, its code on one line and cut short), not the cells after it?"""
    assert killing_cell(_executed(3)) == (
        "in test_pass3 (cell 4 of 5: \"expect_cases( strided_softmax, 'strided_softmax', "
        "['contiguo...\")"
    )
    assert killing_cell(_executed(2)) == "in cell 3 of 5: 'y = strided_softmax(x) print(y)'"


# -- the shared graded course (tests/shared_course.py) ---------------------------------------


@pytest.mark.nbgrader
def test_ungradable_logs_say_what_happened_and_what_to_do(shared_course):
    """Is the notebook that is not JSON ungradable and finished, not "grading" forever; does
    the crasher's log name the cell that killed its kernel; does each say what to do?"""
    for student, advice in (
        ("invalid-json", "ask the student to submit the notebook again"),
        ("crasher", "ask for a resubmission that runs top to bottom"),
    ):
        record = read_record(shared_course.root, ASSIGNMENT, student)
        assert record.status == "ungradable" and record.finished
        assert any("what to do: " in line and advice in line for line in record.lines)
    cause = read_record(shared_course.root, ASSIGNMENT, "crasher").cause
    assert re.search(r"killed the kernel in \w+ \(cell \d+ of \d+: '.+'\)", cause), cause


def _sections(log: str) -> dict[str, str]:
    """nbgrader autograde's log, split into one section per student graded."""
    sections = {}
    for part in log.split("Running pre-convert hook")[1:]:
        found = re.search(r"/submitted/([^/]+)/", part)
        if found:
            sections[found.group(1)] = part
    return sections


@pytest.mark.nbgrader
def test_an_untouched_submission_logs_no_checksum_or_sqlalchemy_warning(shared_course):
    """Does nbgrader's log of the untouched release (and of every other submission) carry no
    "checksum ... has changed!" warning for its hidden cells (nbgrader compares them with the
    source's, hidden tests included) and no SQLAlchemy warning from add_submission?"""
    sections = _sections(shared_course.run.log)
    assert {"untouched", "solution", "crasher"} <= set(sections)
    assert "Attribute 'checksum'" not in sections["untouched"]
    assert "SAWarning" not in sections["untouched"]
    assert "Attribute 'checksum'" not in shared_course.run.log
    assert "SAWarning" not in shared_course.run.log


@pytest.mark.nbgrader
def test_an_edited_locked_cell_is_still_told(shared_course):
    """With nbgrader's checksum warning gone, is a hidden cell the student edited still
    restored and told, and the untouched release told nothing?"""
    release = nbformat.read(shared_course.root / "release" / ASSIGNMENT / course.NOTEBOOK, 4)
    edited = copy.deepcopy(release)
    cell = next(
        c for c in edited.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "hidden_pass1"
    )
    cell.source = cell.source.replace("expect_cases(", "# expect_cases(", 1)
    assert _restore_warnings(shared_course.root, release) == []
    assert _restore_warnings(shared_course.root, edited) == [
        "Restored cell hidden_pass1 (edited: its source restored)"
    ]


def _restore_warnings(root, nb) -> list[str]:
    """What RestoreGradeCells logs at warning level restoring `nb` against the course's
    gradebook (outside an autograde: no student, so no grading log is written)."""
    restore = RestoreGradeCells()
    said: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                said.append(record.getMessage())

    handler = Collect()
    restore.log.addHandler(handler)
    try:
        resources = {"nbgrader": {"db_url": f"sqlite:///{root / 'gradebook.db'}"}}
        resources["nbgrader"].update(assignment=ASSIGNMENT, notebook="strided_softmax")
        restore.preprocess(copy.deepcopy(nb), resources)
    finally:
        restore.log.removeHandler(handler)
    return said


def test_holds_are_kept_once_each_in_the_record(tmp_path):
    """Does a record keep each hold once, in order, and read them back as Holds?"""
    log = GradingLog(tmp_path, "a1", "ada").begin()
    shell = Hold("screen", "process", "#3", 2, "runs the shell command !ls")
    replay = Hold("replay", "replay", "hidden_pass3", 0, "no launch", ("hidden_pass3",))
    log.hold([shell, replay])
    log.hold([shell])
    record = read_record(tmp_path, "a1", "ada")
    assert record.held == [shell, replay]
    assert "held for review: cell #3, line 2: runs the shell command !ls [process]" in (
        record_paths(tmp_path, "a1", "ada")[0].read_text()
    )


def test_a_hold_that_is_not_one_is_refused():
    """Is a record's hold with a wrong field refused with its reason, not taken as given?"""
    with pytest.raises(ValueError, match="wrong types"):
        Hold.from_json({"source": "screen", "rule": 1, "cell": "#1", "line": 1, "text": "x"})
    with pytest.raises(ValueError, match="not a hold"):
        Hold.from_json({"source": "screen"})
