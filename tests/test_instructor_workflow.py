"""The README's instructor workflow, run as written: every line of its block, in order, in a
scratch course that starts with only the course's config and source, a roster and an LMS
download of two Canvas submissions (a solution and a bug, late and resubmitted) and a file
that is not a notebook."""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import zipfile

import nbformat
import pytest

from grader import course, zoo

pytestmark = pytest.mark.nbgrader

SECTION = "## Instructor workflow"
CANVAS_NAMES = {"12345": "doejane_12345_987001_", "23456": "roebob_late_23456_987002_"}
"""Canvas user id -> how Canvas starts the name of that student's file (the second one late,
and a resubmission, which Canvas names strided_softmax-1.ipynb)."""


def workflow_commands() -> list[str]:
    """The command lines of the README's instructor workflow block, comments left out."""
    readme = (course.REPO / "README.md").read_text()
    section = readme[readme.index(SECTION) :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)[1]
    lines = [line.split("  #")[0].strip() for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def canvas_download(root, notebooks: dict[str, nbformat.NotebookNode]) -> None:
    """downloaded/<assignment>/archive/submissions.zip as Canvas names its files."""
    archive = root / "downloaded" / course.ASSIGNMENT / "archive"
    archive.mkdir(parents=True)
    names = {"12345": "strided_softmax.ipynb", "23456": "strided_softmax-1.ipynb"}
    with zipfile.ZipFile(archive / "submissions.zip", "w") as download:
        for student, notebook in notebooks.items():
            download.writestr(CANVAS_NAMES[student] + names[student], nbformat.writes(notebook))
        download.writestr(CANVAS_NAMES["23456"] + "notes.txt", "not a notebook: skipped")


def test_the_readme_instructor_workflow_runs_as_written(tmp_path):
    """Does each line of the README's workflow succeed in turn, from an empty course to
    feedback and grades.csv, with the solution scoring more than the bug?"""
    commands = workflow_commands()
    assert len(commands) >= 12, commands
    bug = next(b for b in zoo.BUGS if b.name == "ignores-column-stride")
    notebooks = {  # from the committed release (tests/test_release.py keeps it fresh)
        "12345": course.solved_notebook(course.REPO),
        "23456": course.solved_notebook(course.REPO, bug.edits),
    }
    root = tmp_path / "course"
    root.mkdir()
    shutil.copy(course.REPO / "nbgrader_config.py", root)
    shutil.copytree(course.REPO / "source", root / "source")
    (root / "roster.csv").write_text("id,first_name,last_name\n12345,Jane,Doe\n23456,Bob,Roe\n")
    canvas_download(root, notebooks)
    env = {k: v for k, v in os.environ.items() if k != "I1_COURSE_SECRET"}  # its own secret
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", command], cwd=root, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    submitted = sorted(p.relative_to(root).as_posix() for p in root.glob("submitted/*/*/*"))
    assert submitted == [
        f"submitted/{student}/{course.ASSIGNMENT}/{course.NOTEBOOK}" for student in CANVAS_NAMES
    ]
    with (root / "grades.csv").open() as grades:
        rows = {row["student_id"]: row for row in csv.DictReader(grades)}
    assert sorted(rows) == ["12345", "23456"]
    assert float(rows["12345"]["raw_score"]) > float(rows["23456"]["raw_score"]) > 0
    feedback = sorted(p.relative_to(root).parts[1] for p in root.glob("feedback/*/*/*.html"))
    assert feedback == ["12345", "23456"]
    assert (root / "reports" / "cohort" / "index.html").is_file()
    assert (root / "dist" / "i1-student.zip").is_file()
    assert (root / "course_secret.txt").is_file()
