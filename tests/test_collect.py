"""Collecting the LMS's downloads (grader.collect): every download in turn, newest winning,
times from the LMS's export, refused without them when late work loses points.

No autograde runs: one scratch course (the release and a due date in its gradebook) is
built once and copied for each test."""

from __future__ import annotations

import json
import os
import shutil
import time
import zipfile
from datetime import datetime
from pathlib import Path

import pytest

from grader import collect, collected, course, uploads
from grader.collect import CollectError
from grader.lms_times import LmsTime, TimesError, load_times
from grader.sample_cohort import DUE

pytestmark = pytest.mark.nbgrader

A = "doejane_12345_987001_strided_softmax.ipynb"
A_AGAIN = "doejane_12345_987101_strided_softmax-1.ipynb"
B_LATE = "roebob_late_23456_987002_strided_softmax.ipynb"
ON_TIME = "2026-12-01T12:00:00Z"
LATE = "2026-12-02T09:30:00Z"  # 16.5 h after DUE


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    root = course.new_course(tmp_path_factory.mktemp("made") / "course")
    course.nbgrader(root, "db", "assignment", "add", course.ASSIGNMENT, f"--duedate={DUE}")
    return root


@pytest.fixture
def root(made, tmp_path) -> Path:
    return Path(shutil.copytree(made, tmp_path / "course"))


def download(root: Path, name: str, files: dict[str, bytes], age: float) -> Path:
    """A zip in the archive folder, saved `age` seconds ago."""
    archive = root / "downloaded" / course.ASSIGNMENT / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    path = archive / name
    with zipfile.ZipFile(path, "w") as zipped:
        for member, data in files.items():
            zipped.writestr(member, data)
    stamp = time.time() - age
    os.utime(path, (stamp, stamp))
    return path


def times(root: Path, name: str, text: str) -> None:
    folder = root / "downloaded" / course.ASSIGNMENT / "times"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def submitted(root: Path, student: str) -> Path:
    return root / "submitted" / student / course.ASSIGNMENT


def test_a_second_download_replaces_what_the_first_gave_and_nothing_else(root, capsys):
    """With the first download still in archive/, does the second (saved later) replace the
    notebook of the student it holds, keep the other's, write each time from the export,
    and does a third run find nothing to do, touching no file?"""
    download(root, "submissions.zip", {A: b"first", B_LATE: b"bob"}, age=600)
    times(root, "1.csv", f"user_id,submitted_at\n12345,{ON_TIME}\n23456,{LATE}\n")
    assert collect.main([course.ASSIGNMENT, "--course", str(root)]) == 0
    assert "new: 12345, 23456" in capsys.readouterr().out
    download(root, "submissions (1).zip", {A_AGAIN: b"second"}, age=0)
    times(root, "2.csv", "user_id,submitted_at\n12345,2026-12-01T16:00:00Z\n")
    assert collect.main([course.ASSIGNMENT, "--course", str(root)]) == 0
    out = capsys.readouterr().out
    assert "resubmitted: 12345" in out and "unchanged: 1" in out
    assert "--changed" in out  # says how to grade them
    assert (submitted(root, "12345") / course.NOTEBOOK).read_bytes() == b"second"
    assert (submitted(root, "23456") / course.NOTEBOOK).read_bytes() == b"bob"
    assert (submitted(root, "12345") / "timestamp.txt").read_text() == "2026-12-01 16:00:00 UTC\n"
    assert (submitted(root, "23456") / "timestamp.txt").read_text() == "2026-12-02 09:30:00 UTC\n"
    before = {p: p.stat().st_mtime_ns for p in root.glob("submitted/*/*/*")}
    done = collect.collect(root, course.ASSIGNMENT)
    assert (done.changed, done.unchanged) == ([], ["12345", "23456"])
    assert {p: p.stat().st_mtime_ns for p in root.glob("submitted/*/*/*")} == before


def test_no_times_under_a_late_policy_is_refused_before_anything_is_written(root, capsys):
    """Without the LMS's times, is the run refused, naming the students and the one the LMS
    marked late, with nothing in submitted/; and does --no-times collect, warning for each?"""
    download(root, "submissions.zip", {A: b"a", B_LATE: b"b"}, age=0)
    assert collect.main([course.ASSIGNMENT, "--course", str(root)]) == 2
    said = capsys.readouterr().err
    assert "no submission time for 2 new or changed submissions: 12345, 23456" in said
    assert "(23456 marked late by the LMS)" in said and "--no-times" in said
    assert not (root / "submitted").exists()
    assert collect.main([course.ASSIGNMENT, "--course", str(root), "--no-times"]) == 0
    out = capsys.readouterr().out
    assert "WARNING: 23456 has no submission time (the LMS marked it late)" in out
    assert "WARNING: 12345 has no submission time" in out
    assert not (submitted(root, "23456") / "timestamp.txt").exists()


def test_the_late_marker_is_kept_as_evidence_and_checked_against_the_time(root, capsys):
    """Is Canvas's `late_` marker kept in i1_collected.json with the download, the file and
    where the time came from; and is a marker that the time contradicts reported?"""
    download(root, "submissions.zip", {A: b"a", B_LATE: b"b"}, age=0)
    times(root, "export.csv", f"user_id,submitted_at\n12345,{LATE}\n23456,{ON_TIME}\n")
    assert collect.main([course.ASSIGNMENT, "--course", str(root)]) == 0
    out = capsys.readouterr().out
    assert "NOTE: 23456: the LMS marked it late, but 2026-12-01 12:00:00 UTC is before" in out
    assert "NOTE: 12345: the LMS marked it on time, but 2026-12-02 09:30:00 UTC is after" in out
    evidence = collected.load_evidence(submitted(root, "23456"))
    assert evidence.lms_late is True and evidence.time_from == "export.csv"
    assert evidence.files == (("submissions.zip", B_LATE),)
    assert collected.load_evidence(submitted(root, "12345")).lms_late is False


def test_file_names_from_a_download_print_their_control_characters(root, capsys):
    """Does a file in a download whose name carries escape sequences (a window title, the
    clipboard) and a bidi override, skipped as no LMS name, show them as escapes?"""
    hostile = "x\x1b]0;all graded\x07\x1b]52;c;aGk=\x07\u202ebnpyi.txt.ipynb"
    download(root, "submissions.zip", {A: b"a", hostile: b"b"}, age=0)
    times(root, "1.csv", f"user_id,submitted_at\n12345,{ON_TIME}\n")
    assert collect.main([course.ASSIGNMENT, "--course", str(root)]) == 0
    out = capsys.readouterr().out
    assert "x\\x1b]0;all graded\\x07\\x1b]52;c;aGk=\\x07\\u202ebnpyi.txt.ipynb: not named" in out
    assert not any(c in out for c in "\x1b\x07\u202e"), repr(out)


def test_two_notebooks_for_one_student_in_one_download_are_refused(root):
    """Does a download holding two files for one student stop the run, naming both?"""
    download(root, "submissions.zip", {A: b"a", A_AGAIN: b"b"}, age=0)
    with pytest.raises(CollectError, match=f"two files for student 12345: {A}"):
        collect.collect(root, course.ASSIGNMENT, no_times=True)


def test_times_from_canvas_csv_and_json_exports(tmp_path):
    """Are a CSV (Canvas's column names, a BOM, students without a submission) and a JSON
    list read, the latest time per student, in UTC; and is a time without a zone refused?"""
    (tmp_path / "a.csv").write_text(
        "\ufeffuser_id,submitted_at,late\n1,2026-12-01T12:00:00Z,false\n2,,\n"
    )
    (tmp_path / "b.json").write_text(
        json.dumps(
            [
                {"user_id": 1, "submitted_at": "2026-12-02T10:30:00+01:00", "late": True},
                {"user_id": 3, "submitted_at": None},
            ]
        )
    )
    found = load_times([tmp_path / "a.csv", tmp_path / "b.json"])
    assert found == {"1": LmsTime(datetime(2026, 12, 2, 9, 30), "b.json", True)}
    (tmp_path / "c.csv").write_text("user_id,submitted_at\n1,2026-12-01 12:00:00\n")
    with pytest.raises(TimesError, match="c.csv, row 2: .* has no time zone"):
        load_times([tmp_path / "c.csv"])


def test_the_course_pattern_reads_canvas_names():
    """Does nbgrader_config.py's pattern give the Canvas user id, the notebook and the late
    marker, for a late resubmission's name too?"""
    import re

    pattern = collect.course_config(course.REPO).FileNameCollectorPlugin.named_regexp
    match = re.match(pattern, "x.zip/roebob_late_23456_987002_strided_softmax-1.ipynb")
    assert (match["student_id"], match["file_id"], match["late"]) == (
        "23456",
        "strided_softmax",
        "late_",
    )
    assert re.match(pattern, "x.zip/doejane_12345_987001_strided_softmax.ipynb")["late"] is None


PY = "smithann_34567_987003_strided_softmax.py"
RENAMED = "roebob_23456_987004_strided_softmax (1).ipynb"
NOTES = "doejane_12345_987005_notes.txt"


def test_every_upload_is_reported_by_student_with_its_fix(root, capsys):
    """Does a .py, a browser-renamed notebook and a stray notes.txt each come out by student
    with the fix, and does not_gradable name exactly those without a submission?"""
    download(root, "submissions.zip", {A: b"a", PY: b"x", RENAMED: b"{}", NOTES: b"n"}, age=0)
    times(root, "1.csv", f"user_id,submitted_at\n12345,{ON_TIME}\n23456,{LATE}\n")
    assert collect.main([course.ASSIGNMENT, "--course", str(root)]) == 0
    out = capsys.readouterr().out
    take = f"python -m grader.collect {course.ASSIGNMENT} --take 23456 '{RENAMED}'"
    assert (
        "NOT GRADABLE AS IS: 23456: strided_softmax (1).ipynb in submissions.zip (a renamed "
        f"copy of strided_softmax.ipynb): take it with: {take}"
    ) in out
    assert (
        "NOT GRADABLE AS IS: 34567: strided_softmax.py in submissions.zip (a .py file, not the "
        "notebook): cannot be autograded: ask the student to upload strided_softmax.ipynb"
    ) in out
    assert "NOTE: 12345 also uploaded notes.txt in submissions.zip (a .txt file, not the " in out
    assert "new: 12345\n" in out
    reasons = uploads.not_gradable(root, course.ASSIGNMENT)
    assert set(reasons) == {"23456", "34567"}
    assert reasons["34567"].startswith(
        "submitted, not gradable as is: strided_softmax.py (a .py file, not the notebook); "
    )


def test_take_a_renamed_notebook_with_its_lms_time(root, capsys):
    """Does --take write a renamed notebook as the release notebook, with the LMS's time and
    the evidence, leave not_gradable, count as changed for grader.parallel --changed, and
    stay through the next collect run without being reported again?"""
    from grader.grading.grading_log import changed_since_graded

    download(root, "submissions.zip", {A: b"a", RENAMED: b"{}"}, age=0)
    times(root, "1.csv", f"user_id,submitted_at\n12345,{ON_TIME}\n23456,{LATE}\n")
    assert collect.main([course.ASSIGNMENT, "--course", str(root)]) == 0
    capsys.readouterr()
    argv = [course.ASSIGNMENT, "--course", str(root), "--take", "23456", RENAMED]
    assert collect.main(argv) == 0
    out = capsys.readouterr().out
    assert "taken: 23456: strided_softmax (1).ipynb in submissions.zip (a renamed copy" in out
    assert "new: 23456" in out and "--changed" in out
    folder = submitted(root, "23456")
    assert (folder / course.NOTEBOOK).read_bytes() == b"{}"
    assert (folder / "timestamp.txt").read_text() == "2026-12-02 09:30:00 UTC\n"
    evidence = collected.load_evidence(folder)
    assert evidence.files == (("submissions.zip", RENAMED),)
    assert evidence.taken == "a renamed copy of strided_softmax.ipynb"
    assert evidence.time_from == "1.csv"
    assert uploads.not_gradable(root, course.ASSIGNMENT) == {}
    assert changed_since_graded(root, course.ASSIGNMENT, "23456")
    assert collect.main(argv) == 0 and "unchanged: 1" in capsys.readouterr().out
    done = collect.collect(root, course.ASSIGNMENT)
    assert (done.changed, done.uploads) == ([], [])
    assert (folder / course.NOTEBOOK).read_bytes() == b"{}"


def test_a_newer_download_replaces_a_taken_notebook(root):
    """Is a taken notebook replaced when a later download brings the student's notebook
    under its own name, and kept against an older download's?"""
    download(root, "old.zip", {"roebob_23456_987000_strided_softmax.ipynb": b"old"}, age=900)
    download(root, "mid.zip", {RENAMED: b"{}"}, age=600)
    times(root, "1.csv", f"user_id,submitted_at\n23456,{ON_TIME}\n")
    collect.collect(root, course.ASSIGNMENT)
    collect.take(root, course.ASSIGNMENT, "23456", RENAMED)
    assert collect.collect(root, course.ASSIGNMENT).changed == []
    assert (submitted(root, "23456") / course.NOTEBOOK).read_bytes() == b"{}"
    download(root, "new.zip", {"roebob_23456_987009_strided_softmax-1.ipynb": b"new"}, age=0)
    assert collect.collect(root, course.ASSIGNMENT).resubmitted == ["23456"]
    assert (submitted(root, "23456") / course.NOTEBOOK).read_bytes() == b"new"


def test_take_refuses_a_py_another_students_file_and_no_time(root, capsys):
    """Is a .py refused with the reason and what to ask for, another student's file refused,
    and a take without an LMS time under a late policy refused, each writing nothing?"""
    download(root, "submissions.zip", {PY: b"x", RENAMED: b"{}"}, age=0)
    base = [course.ASSIGNMENT, "--course", str(root), "--take"]
    assert collect.main([*base, "34567", PY]) == 2
    said = capsys.readouterr().err
    assert said.startswith("collect: strided_softmax.py is a .py file, not the notebook, and ")
    assert "ask the student to upload strided_softmax.ipynb" in said and "\n" == said[-1]
    assert collect.main([*base, "34567", RENAMED]) == 2
    assert "is student 23456's upload (its name says so), not 34567's" in capsys.readouterr().err
    assert collect.main([*base, "23456", RENAMED]) == 2
    assert "no submission time for 1 new or changed submission: 23456" in capsys.readouterr().err
    assert collect.main([*base, "23456", "nothing.ipynb"]) == 2
    assert "no file named 'nothing.ipynb' in the downloads" in capsys.readouterr().err
    assert not (root / "submitted").exists()


def test_help_ends_its_sentences(capsys):
    """Does `collect --help` give the whole first sentence of its description, ending with a
    full stop, and an epilog of whole sentences?"""
    with pytest.raises(SystemExit):
        collect.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "newest winning, with each submission's time taken from the LMS's own record of it." in text
    )
    assert text.endswith("Exit status: 0 collected, 2 refused or a usage error.")


def test_an_unreadable_record_of_collects_is_noted_and_read_as_no_take(root, capsys):
    """When collect's record beside a submission is not its record, does the next collect
    say so in one line, with the file and the fault, read it as no --take, and carry on?"""
    download(root, "submissions.zip", {A: b"a", B_LATE: b"b"}, age=10)
    times(root, "1.csv", f"user_id,submitted_at\n12345,{ON_TIME}\n23456,{LATE}\n")
    assert collect.main([course.ASSIGNMENT, "--course", str(root)]) == 0
    capsys.readouterr()
    evidence = submitted(root, "23456") / collected.EVIDENCE
    evidence.write_text("{")
    download(root, "again.zip", {A_AGAIN: b"a2"}, age=0)
    assert collect.main([course.ASSIGNMENT, "--course", str(root)]) == 0
    out = capsys.readouterr().out
    assert (
        f"NOTE: {evidence}: not JSON (Expecting property name enclosed in double quotes, "
        "line 1): read as no --take; collect writes it again with the student's next "
        "submission, or --take the file in again"
    ) in out.splitlines()
    assert out.count(f"NOTE: {evidence}") == 1 and "resubmitted: 12345" in out
    assert (submitted(root, "12345") / course.NOTEBOOK).read_bytes() == b"a2"


def test_a_broken_extensions_file_is_refused_before_anything_is_written(root, capsys):
    """Does an extensions file that is not JSON (its due dates decide collect's notes) stop
    collect with exit 2 and one line naming the file, before any submission is written?"""
    download(root, "submissions.zip", {A: b"a"}, age=0)
    times(root, "export.csv", f"user_id,submitted_at\n12345,{ON_TIME}\n")
    (root / "extensions.json").write_text("{not json")
    assert collect.main([course.ASSIGNMENT, "--course", str(root)]) == 2
    said = capsys.readouterr().err
    assert said.startswith(f"collect: {root / 'extensions.json'}: not JSON")
    assert not (root / "submitted").exists()
