"""Collecting an LMS download: `nbgrader zip_collect` with the course's filename pattern."""

from __future__ import annotations

import zipfile

import nbformat
import pytest

from grader import course

pytestmark = pytest.mark.nbgrader


def test_zip_collect_files_canvas_submissions_under_their_user_ids(tmp_path):
    """Does `nbgrader zip_collect` on a Canvas-style zip put each notebook (a late one and a
    resubmission's `-1` name included) under submitted/<Canvas user id>/, and skip what
    is not a notebook of the assignment?"""
    root = course.new_course(tmp_path / "course")
    notebook = nbformat.writes(
        nbformat.read(root / "release" / course.ASSIGNMENT / course.NOTEBOOK, 4)
    )
    archive = root / "downloaded" / course.ASSIGNMENT / "archive"
    archive.mkdir(parents=True)
    with zipfile.ZipFile(archive / "submissions.zip", "w") as download:
        download.writestr("doejane_12345_987001_strided_softmax.ipynb", notebook)
        download.writestr("roebob_late_23456_987002_strided_softmax-1.ipynb", notebook)
        download.writestr("roebob_late_23456_987003_notes.txt", "not a notebook")
    course.nbgrader(root, "zip_collect", course.ASSIGNMENT)
    submitted = sorted(p.relative_to(root).as_posix() for p in root.glob("submitted/*/*/*"))
    assert submitted == [
        f"submitted/12345/{course.ASSIGNMENT}/{course.NOTEBOOK}",
        f"submitted/23456/{course.ASSIGNMENT}/{course.NOTEBOOK}",
    ]
