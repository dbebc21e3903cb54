"""A course tied to the code that grades it: `make_course` records the checkout, its version
and commit; the grading commands refuse another checkout or version in one line that names
both and the fix; `--retie` changes the record on purpose; a folder without one grades as
before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from in_process import run_main

from grader import course_tie, make_course, parallel, recheck
from grader.course import ASSIGNMENT, REPO
from grader.course_tie import RECORD, CourseTieError

ELSEWHERE = "/srv/other-checkout/i1"


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A course folder made by make_course, outside the repository; tests copy its record."""
    return make_course.make_course(tmp_path_factory.mktemp("tie") / "course")


def tied_elsewhere(made: Path, tmp_path: Path, **fields: str) -> Path:
    """A copy of the made course (its config and record) whose record says `fields`."""
    folder = tmp_path / "course"
    folder.mkdir()
    (folder / "nbgrader_config.py").write_text((made / "nbgrader_config.py").read_text())
    tie = replace(course_tie.read_tie(made), **fields)
    course_tie.write_tie(folder, tie)
    return folder


def test_make_course_records_this_checkout_its_version_and_commit(made):
    """Does the record name the checkout that holds the running grader, the version in its
    pyproject.toml, its git commit and this Python?"""
    tie = course_tie.read_tie(made)
    assert tie.checkout == str(REPO.resolve())
    assert tie.version == course_tie.checkout_version(REPO) != "?"
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True)
    assert tie.commit == head.stdout.decode().strip() and len(tie.commit) == 40
    assert tie.python == os.path.abspath(sys.executable)
    assert course_tie.check_tie(made, "grader.parallel") is None


def test_a_folder_without_a_record_grades_as_before(tmp_path):
    """Do the repository root and a course made before the record (a config, no record)
    pass the check without a word?"""
    assert not (REPO / RECORD).exists()
    assert course_tie.check_tie(REPO, "grader.parallel") is None
    (tmp_path / "nbgrader_config.py").write_text("")
    assert course_tie.check_tie(tmp_path, "grader.parallel") is None


def test_parallel_refuses_another_checkout_naming_both_and_the_fix(made, tmp_path):
    """Tied to another checkout run by another Python, does grader.parallel exit 2 with one
    line naming both checkouts, that checkout's Python and the retie command?"""
    other = tied_elsewhere(
        made, tmp_path, checkout=ELSEWHERE, python=f"{ELSEWHERE}/.venv/bin/python"
    )
    done = run_main(parallel.main, (ASSIGNMENT, "--course", str(other), "--changed"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"parallel: {other} is tied to {ELSEWHERE} (version ")
    assert f"but this is {REPO.resolve()} (version " in done.stderr
    assert (
        f"run it with that checkout's Python: {ELSEWHERE}/.venv/bin/python -m grader.parallel"
        in done.stderr
    )
    assert done.stderr.endswith(f"python -m grader.make_course --retie {other}\n")
    assert done.stdout == ""


def test_recheck_refuses_when_this_python_imports_another_checkout(made, tmp_path):
    """When the course's own Python now imports another checkout (a `pip install -e` of it
    mid-term), does grader.recheck refuse in one line, saying to install the tied one again?"""
    other = tied_elsewhere(made, tmp_path, checkout=ELSEWHERE)
    done = run_main(recheck.main, (ASSIGNMENT, "--course", str(other)))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert (
        f'this Python now imports another checkout: pip install -e "{ELSEWHERE}[course]"'
        in done.stderr
    )


def test_another_version_of_this_checkout_is_refused(made, tmp_path):
    """Tied to another version of this same checkout, is grading refused, naming both
    versions?"""
    other = tied_elsewhere(made, tmp_path, version="0.0.1")
    with pytest.raises(CourseTieError) as refused:
        course_tie.check_tie(other, "grader.parallel")
    said = str(refused.value)
    assert "(version 0.0.1, commit" in said and "check out version 0.0.1 again" in said
    assert "\n" not in said


def test_another_commit_of_this_checkout_and_version_is_noted_not_refused(made, tmp_path):
    """Tied to another commit of this checkout and version (the instructor's own git pull),
    is the course graded, with a note naming both commits and how to record the new one?"""
    other = tied_elsewhere(made, tmp_path, commit="0123456789ab" + "0" * 28)
    note = course_tie.check_tie(other, "grader.parallel")
    head = course_tie.read_tie(made).commit
    assert note == (
        f"note: {other} was tied to commit 0123456789ab of {REPO.resolve()}, which is now at "
        f"{head[:12]} (same version {course_tie.read_tie(made).version}): grades may differ "
        f"from earlier ones; python -m grader.make_course --retie {other} records this commit"
    )


def test_an_unreadable_record_is_refused_with_the_retie(tmp_path):
    """Is a record that is not JSON, or not a course record, refused in one line that says
    how to record this checkout?"""
    for text in ("{not json", json.dumps({"schema": "other"}), json.dumps([1])):
        (tmp_path / RECORD).write_text(text)
        with pytest.raises(CourseTieError, match="--retie") as refused:
            course_tie.check_tie(tmp_path, "grader.parallel")
        assert "\n" not in str(refused.value)


def test_retie_says_what_changed_and_grading_then_passes(made, tmp_path):
    """Does `make_course --retie FOLDER` tie a course to this checkout, saying what changed,
    and refill its Slurm script with this checkout?"""
    other = tied_elsewhere(made, tmp_path, checkout=ELSEWHERE, python="/srv/python")
    script = other / make_course.BATCH_SCRIPT
    script.parent.mkdir()
    script.write_text((made / make_course.BATCH_SCRIPT).read_text().replace("=/", "=/srv/x"))
    done = run_main(make_course.main, ("--retie", str(other)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Re-tied {other} to {REPO.resolve()} (version ")
    assert f"checkout {ELSEWHERE} -> {REPO.resolve()}; Python /srv/python -> " in done.stdout
    assert course_tie.check_tie(other, "grader.parallel") is None
    assert f"REPO=${{I1_REPO:-{REPO.resolve()}}}\n" in script.read_text()


def test_retie_refuses_the_repository_and_a_folder_that_is_no_course(tmp_path):
    """Is --retie refused, in one line, for this repository (it needs no record) and for a
    folder with no nbgrader_config.py?"""
    inside = run_main(make_course.main, ("--retie", str(REPO)))
    assert inside.returncode == 2 and "needs no record" in inside.stderr
    assert not (REPO / RECORD).exists()
    nothing = run_main(make_course.main, ("--retie", str(tmp_path)))
    assert nothing.returncode == 2 and "is not a course" in nothing.stderr
    assert nothing.stderr.count("\n") == 1


def test_nbgrader_autograde_refuses_a_course_tied_elsewhere(made, tmp_path):
    """Does nbgrader's own `autograde`, run in a course tied to another checkout, stop before
    grading with that one line as its error, and no traceback?"""
    other = tied_elsewhere(made, tmp_path, checkout=ELSEWHERE)
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    done = subprocess.run(
        ["nbgrader", "autograde", ASSIGNMENT],
        cwd=other,
        env=dict(os.environ, PATH=path),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and f"{other} is tied to {ELSEWHERE}" in errors[0], done.stderr
    assert "Traceback" not in done.stderr
