"""The course folder every grader command works on: `--course`, else $I1_COURSE, else here.

One notion of "the course" (collect, parallel, handgrade, review, cohort, feedback, recheck):
no command falls back to this repository, so a command run from an instructor's course
folder grades that course; each says in one line when the folder it was given is no course.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

COURSE_VARIABLE = "I1_COURSE"
"""The environment variable that names the course folder when --course is not given."""


def add_course_option(parser: argparse.ArgumentParser) -> None:
    """--course: by default $I1_COURSE, else the current folder."""
    parser.add_argument(
        "--course",
        default=os.environ.get(COURSE_VARIABLE, "."),
        help=f"the nbgrader course folder (default: ${COURSE_VARIABLE}, else this folder)",
    )


def not_a_course(root: Path) -> str | None:
    """Why `root` is no course folder (it has no nbgrader_config.py), in one line with what to
    pass; None when it is one. Every command that needs a course says it in these words."""
    if (Path(root) / "nbgrader_config.py").is_file():
        return None
    return (
        f"{Path(root).absolute()} is not a course: it has no nbgrader_config.py; run this from "
        f"your course folder, or pass --course PATH (or set {COURSE_VARIABLE}=PATH)"
    )
