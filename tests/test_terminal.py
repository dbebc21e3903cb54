"""Student text as the instructor's terminal shows it (grader.terminal)."""

from __future__ import annotations

import logging

import pytest

from grader.terminal import visible


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),  # erase the screen, cursor home
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # the window's title
        ("\x1b]52;c;aGk=\x1b\\", "\\x1b]52;c;aGk=\\x1b\\"),  # OSC 52: the clipboard
        ("\x9b2J\x9d0;t\x9c", "\\x9b2J\\x9d0;t\\x9c"),  # the same as C1 controls
        ("ok\rFAKE", "ok\\rFAKE"),  # a carriage return overwrites the line
        ("\x00\x08\x7f", "\\x00\\x08\\x7f"),
        (
            "abc\u202edcba\u202c \u2066x\u2069 \u200f",
            "abc\\u202edcba\\u202c \\u2066x\\u2069 \\u200f",
        ),
        ("a\udcffb", "a\\udcffb"),  # a file name that is not UTF-8
    ],
)
def test_controls_show_as_escapes(raw, shown):
    """Is each control, bidi override and lone surrogate written as its escape?"""
    assert visible(raw) == shown
    assert visible(raw).isprintable()


def test_ordinary_text_is_unchanged():
    """Do letters of any script, punctuation, quotes and backslashes pass as they are?"""
    text = "Ada Lovelace, Zoë 中村 «quoted» 'x' \\x1b ±1e4 ✓"
    assert visible(text) == text


def test_line_breaks_stay_only_when_asked():
    """Does one line of a listing stay one line, and an answer of several keep its breaks
    and tabs (and still lose its carriage returns)?"""
    assert visible("a\nb\tc") == "a\\nb\\tc"
    assert visible("a\r\n\tb", newlines=True) == "a\\r\n\tb"


def test_anything_is_shown_as_text():
    """Is a non-string (an exception, a path) shown through its str?"""
    assert visible(ValueError("bad\x1b[0m")) == "bad\\x1b[0m"


HOSTILE_ID = "mallory\x1b]0;all graded\x07"
SHOWN_ID = "mallory\\x1b]0;all graded\\x07"


def test_parallel_reports_student_ids_and_causes_as_escapes():
    """Does grader.parallel's report show a student id and a failed student's cause (the
    student's own output in it) as escapes, on that student's one line, its columns
    aligned?"""
    from pathlib import Path

    from grader.autograde_workers import StudentRun
    from grader.parallel import ParallelRun, _report

    cause = "dead kernel: ValueError: \x1b[2K\x1b]52;c;aGk=\x07\nnext line"
    log = Path("grading_log/i1_strided_softmax/x.log")
    runs = (
        StudentRun("ada", True, 1, 12.0, 0, None, ""),
        StudentRun(HOSTILE_ID, False, 1, 3.0, 1, None, "[ERROR] ...", cause, log),
    )
    report = _report(ParallelRun(runs, (HOSTILE_ID,), 15.0, 2))
    assert not any(c in report for c in "\x1b\x07"), repr(report)
    lines = report.splitlines()
    assert lines[0].index("graded") == lines[1].index("FAILED")
    assert lines[1].endswith(
        f"dead kernel: ValueError: \\x1b[2K\\x1b]52;c;aGk=\\x07\\nnext line (its log: {log})"
    )
    assert lines[1].startswith(SHOWN_ID)


def test_recheck_shows_student_ids_and_evidence_as_escapes():
    """Does grader.recheck's progress line show a student id, and a disagreement its
    evidence (a student's exception's message), as escapes, each on one line?"""
    from grader.recheck import Disagreement, disagreement_line, progress_line

    assert progress_line(1, 2, HOSTILE_ID, [], 3.0) == f"recheck [1/2] {SHOWN_ID}: agrees (3 s)"
    evidence = "could not load: ValueError: \x1b[1A\x1b[2K\nrecheck agrees\u202e"
    line = disagreement_line(Disagreement(HOSTILE_ID, "hidden_pass3", 0.0, 3.0, 3.0, evidence))
    assert line == (
        f"{SHOWN_ID}: hidden_pass3 scored 0.0/3 in the gradebook, but the recheck gives 3: "
        "could not load: ValueError: \\x1b[1A\\x1b[2K\\nrecheck agrees\\u202e"
    )


def test_export_warns_with_student_ids_as_escapes(caplog):
    """Does the export's warning about scores not final name a student id as escapes?"""
    from grader.export import HAND_PENDING, NO_TIME, StatusCsvExport

    rows = [
        {"assignment": "a", "student_id": HOSTILE_ID, "status": HAND_PENDING, "cause": ""},
        {"assignment": "a", "student_id": HOSTILE_ID, "status": "graded", "cause": NO_TIME},
    ]
    exporter = StatusCsvExport()
    exporter.log = logging.getLogger("test-export")
    with caplog.at_level(logging.WARNING, logger="test-export"):
        exporter._warn(rows)
    said = caplog.text
    assert said.count(SHOWN_ID) == 2 and "\x1b" not in said and "\x07" not in said
