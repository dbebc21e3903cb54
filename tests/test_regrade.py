"""Which submissions need grading (grader.grading.grading_log's fingerprints, and
`grader.parallel --changed`): what a grading record says it graded, against submitted/."""

from __future__ import annotations

from pathlib import Path

from grader import parallel
from grader.course import ASSIGNMENT, NOTEBOOK
from grader.grading.grading_log import (
    GradingLog,
    changed_since_graded,
    read_record,
    submission_fingerprint,
)


def submit(root: Path, student: str, text: str, stamp: str | None) -> Path:
    folder = root / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    (folder / NOTEBOOK).write_text(text)
    if stamp:
        (folder / "timestamp.txt").write_text(stamp)
    return folder


def graded(root: Path, student: str, folder: Path) -> None:
    log = GradingLog(root, ASSIGNMENT, student).begin()
    log.grading(submission_fingerprint(folder))
    log.finish()


def test_a_resubmission_or_a_new_time_is_changed_the_evidence_file_is_not(tmp_path):
    """Is a submission unchanged once graded, changed when its notebook or its time changes
    or when it was never graded, and unchanged by collect's i1_collected.json?"""
    folder = submit(tmp_path, "ada", "{}", "2026-12-01 12:00:00 UTC")
    assert changed_since_graded(tmp_path, ASSIGNMENT, "ada")  # no record yet
    graded(tmp_path, "ada", folder)
    assert not changed_since_graded(tmp_path, ASSIGNMENT, "ada")
    (folder / "i1_collected.json").write_text("{}")
    assert not changed_since_graded(tmp_path, ASSIGNMENT, "ada")
    (folder / "timestamp.txt").write_text("2026-12-02 09:30:00 UTC")
    assert changed_since_graded(tmp_path, ASSIGNMENT, "ada")
    graded(tmp_path, "ada", folder)
    (folder / NOTEBOOK).write_text('{"cells": []}')
    assert changed_since_graded(tmp_path, ASSIGNMENT, "ada")


def test_a_new_record_carries_the_hand_graded_answers_and_nothing_else(tmp_path):
    """Does a regrade's fresh record keep the answers' fingerprints of the last one (which
    hand grades are checked against) and drop its submission, cause and lines?"""
    log = GradingLog(tmp_path, ASSIGNMENT, "ada").begin()
    log.grading("abc")
    log.answered({"strided_softmax:prediction": "123"})
    log.cause("dead kernel: it crashed")
    GradingLog(tmp_path, ASSIGNMENT, "ada").begin()
    record = read_record(tmp_path, ASSIGNMENT, "ada")
    assert record.answers == {"strided_softmax:prediction": "123"}
    assert (record.submission, record.cause, record.status) == ("", "", "grading")


def test_parallel_changed_takes_only_the_new_and_resubmitted(tmp_path, capsys):
    """Does `grader.parallel --changed` pick the submissions no record names, and say so?"""
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n")
    graded(tmp_path, "ada", submit(tmp_path, "ada", "{}", None))
    submit(tmp_path, "bob", "{}", None)
    assert parallel._changed(tmp_path, ASSIGNMENT, None) == ["bob"]
    assert "--changed: 1 of 2 submissions: bob" in capsys.readouterr().err
    graded(tmp_path, "bob", tmp_path / "submitted" / "bob" / ASSIGNMENT)
    assert parallel.main([ASSIGNMENT, "--course", str(tmp_path), "--changed"]) == 0
    assert "--changed: 0 of 2 submissions: nothing to grade" in capsys.readouterr().err
