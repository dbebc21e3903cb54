"""Scratch courses never touch a real course: a non-scratch folder is refused."""

from __future__ import annotations

import pytest

from grader import course
from grader.demo import main as demo


def test_new_course_refuses_a_folder_it_did_not_make(tmp_path):
    """Does new_course refuse a non-empty folder without the scratch mark, leaving it intact?"""
    (tmp_path / "gradebook.db").write_text("real students")
    with pytest.raises(course.CourseError, match="is not a scratch course"):
        course.new_course(tmp_path)
    assert (tmp_path / "gradebook.db").read_text() == "real students"


def test_demo_refuses_the_repository(capsys):
    """Does `make demo --course <the real course>` refuse with one line and exit 2?"""
    assert demo(["--course", str(course.REPO)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("demo: ")
    assert "is not a scratch course" in err
    assert (course.REPO / "source").is_dir()
