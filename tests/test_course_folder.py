"""One notion of "the course": every grader command works on --course, else $I1_COURSE, else
the folder it runs in, never on this repository by default, and says where it looked."""

from __future__ import annotations

import argparse

import pytest

from grader import collect, feedback, handgrade, parallel, recheck, review
from grader.cohort import cli as cohort
from grader.course_folder import COURSE_VARIABLE, add_course_option, not_a_course

COMMANDS = {
    "collect": collect.main,
    "parallel": parallel.main,
    "handgrade": lambda argv: handgrade.main([*argv, "--list"]),
    "review": review.main,
    "cohort": cohort.main,
    "feedback": feedback.main,
    "recheck": recheck.main,
}
"""Each command that works on a course, called with the assignment and nothing else."""


@pytest.mark.parametrize("name", COMMANDS)
def test_a_command_run_outside_a_course_says_so_in_one_line(name, tmp_path, monkeypatch, capsys):
    """Run with no --course in a folder that is no course (this repository's course is not
    a fallback), does each command exit 2 with one line naming that folder, and leave it as
    it was (no gradebook made there)?"""
    monkeypatch.delenv(COURSE_VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    assert COMMANDS[name](["i1_strided_softmax"]) == 2
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and said.startswith(f"{name}: ")
    assert str(tmp_path) in said
    assert "nbgrader_config.py" in said or "no gradebook" in said
    assert list(tmp_path.iterdir()) == []


def test_the_course_is_the_option_else_the_variable_else_here(tmp_path, monkeypatch):
    """Does --course win over $I1_COURSE, and $I1_COURSE over the current folder ('.')?"""

    def course(*argv: str) -> str:
        parser = argparse.ArgumentParser()
        add_course_option(parser)
        return parser.parse_args(argv).course

    monkeypatch.delenv(COURSE_VARIABLE, raising=False)
    assert course() == "."
    monkeypatch.setenv(COURSE_VARIABLE, str(tmp_path / "named"))
    assert course() == str(tmp_path / "named")
    assert course("--course", "given") == "given"


def test_a_folder_is_a_course_when_it_has_an_nbgrader_config(tmp_path):
    """Does not_a_course name a folder without nbgrader_config.py, and pass one with it?"""
    said = not_a_course(tmp_path)
    assert f"{tmp_path} is not a course: it has no nbgrader_config.py; run this from" in said
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n")
    assert not_a_course(tmp_path) is None
