"""A course of one's own: `python -m grader.make_course` makes it outside the repository, and
the student bundle built there ships that course's release, not the repository's."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest
from test_instructor_workflow import workflow_commands

from grader import make_course
from grader.course import ASSIGNMENT, NOTEBOOK, REPO
from grader.course_tie import RECORD, read_tie
from grader.seeding import FILE as SECRET_FILE

STUDENT_DATA = (
    "/submitted/",
    "/autograded/",
    "/feedback/",
    "gradebook.db",
    "/grading_log/",
    "/reviews/",
    f"/{SECRET_FILE}",
)


def command(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`python -m ARGS` in `cwd`, with this Python's folder first on PATH (for `nbgrader`)."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {k: v for k, v in os.environ.items() if k != "I1_COURSE_SECRET"}  # its own secret
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=cwd,
        env=dict(env, PATH=path),
        capture_output=True,
        text=True,
    )


def test_the_course_folder_holds_the_config_the_source_and_a_gitignore(tmp_path):
    """Does `make_course FOLDER` make FOLDER with this repository's config and source, a
    .gitignore that keeps the students' data and the secret out, and nothing else (the
    instructor guide's term draws the secret and generates the release), and say what comes
    next, naming the guide's section that holds the term?"""
    folder = tmp_path / "term" / "i1-2026"
    done = command("grader.make_course", str(folder), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    made = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert made == [
        ".gitignore",
        RECORD,
        "nbgrader_config.py",
        "scripts/slurm_autograde.sbatch",
        f"source/{ASSIGNMENT}/{NOTEBOOK}",
    ]
    assert filecmp.cmp(folder / "nbgrader_config.py", REPO / "nbgrader_config.py", shallow=False)
    source = REPO / "source" / ASSIGNMENT / NOTEBOOK
    assert filecmp.cmp(folder / "source" / ASSIGNMENT / NOTEBOOK, source, shallow=False)
    ignored = (folder / ".gitignore").read_text().splitlines()
    assert set(STUDENT_DATA) <= set(ignored)
    assert f'{make_course.GUIDE} ("{make_course.TERM}")' in done.stdout
    term = workflow_commands()  # the section it names, "from" its first line "to" export
    assert term[0] == "python -m grader.seeding new --course ." and "nbgrader export" in term
    assert "`python -m grader.seeding new --course .` to `nbgrader export`" in done.stdout
    assert str(REPO / "grader") in done.stdout  # where its nbgrader imports the code from


def test_the_course_slurm_script_is_the_repositorys_with_the_tied_checkout(tmp_path):
    """Is the course's scripts/slurm_autograde.sbatch the repository's, executable and valid
    bash, with only a note and the defaults of I1_REPO and I1_PYTHON changed, to the checkout
    and Python in the course's record (quoted, for a path with a space)?"""
    folder = tmp_path / "my term"
    make_course.make_course(folder)
    tie = read_tie(folder)
    script = folder / make_course.BATCH_SCRIPT
    assert os.access(script, os.X_OK)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    ours = script.read_text().splitlines()
    theirs = (REPO / make_course.BATCH_SCRIPT).read_text().splitlines()
    changed = [line for line in ours if line not in theirs]
    assert changed == [
        *make_course.BATCH_NOTE.splitlines(),
        f"REPO=${{I1_REPO:-{tie.checkout}}}",
        f"PYTHON=${{I1_PYTHON:-{tie.python}}}",
    ]
    assert len(ours) == len(theirs) + len(make_course.BATCH_NOTE.splitlines())
    spaced = make_course.batch_script(replace(tie, checkout="/a b"), script.read_text())
    assert "REPO=${I1_REPO:-'/a b'}" in spaced and spaced.count(make_course.BATCH_NOTE) == 1


def test_a_folder_inside_the_repository_or_not_empty_is_refused(tmp_path):
    """Is a folder inside this repository refused (its students' work would sit in a git
    checkout), and so are a non-empty folder and a file, each with nothing written?"""
    inside = REPO / "scratch" / f"make-course-{os.getpid()}"
    done = command("grader.make_course", str(inside), cwd=tmp_path)
    assert done.returncode == 2 and "inside this repository" in done.stderr, done.stderr
    assert not inside.exists()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    done = command("grader.make_course", str(busy), cwd=tmp_path)
    assert done.returncode == 2 and "is not empty" in done.stderr, done.stderr
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]
    done = command("grader.make_course", str(busy / "notes.txt"), cwd=tmp_path)
    assert done.returncode == 2 and "is a file" in done.stderr, done.stderr


def test_refused_where_the_folders_nbgrader_could_not_import_the_course(tmp_path, monkeypatch):
    """With a Python that cannot import `grader` from the new folder (the repository not
    installed, only on the path inside it), is the folder refused, saying how to install,
    and left unmade?"""
    python = tmp_path / "python-without-site"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    python.chmod(0o755)
    monkeypatch.setattr(make_course.sys, "executable", str(python))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    folder = tmp_path / "course"
    with pytest.raises(make_course.CourseFolderError, match="cannot import the course's code"):
        make_course.make_course(folder)
    assert not folder.exists()


def guide_step(word: str) -> str:
    """The instructor guide's term line that contains `word`."""
    return next(line for line in workflow_commands() if word in line)


@pytest.mark.nbgrader
def test_the_bundle_of_a_course_of_ones_own_ships_its_release(tmp_path):
    """In a course made by make_course whose source the instructor edited, do the guide's
    own lines (the secret, generate_assignment, the bundle) give a bundle whose notebook is
    that course's release, edit included, with a note that it differs from the repository's,
    and no secret?"""
    folder = tmp_path / "course"
    assert command("grader.make_course", str(folder), cwd=tmp_path).returncode == 0
    source = folder / "source" / ASSIGNMENT / NOTEBOOK
    notebook = nbformat.read(source, as_version=4)
    notebook.cells[0].source += "\n\nThis term: office hours on Tuesdays."
    nbformat.write(notebook, source)
    for word in ("grader.seeding", "generate_assignment", "grader.bundle"):
        line = guide_step(word)
        done = subprocess.run(
            ["bash", "-c", line],
            cwd=folder,
            env=dict(
                os.environ,
                PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
            ),
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
    assert "differs from this repository's" in done.stderr, done.stderr
    archive = folder / guide_step("grader.bundle").split("--out ")[1].split()[0]
    with zipfile.ZipFile(archive) as bundle:
        shipped = bundle.read(f"i1-student/release/{ASSIGNMENT}/{NOTEBOOK}")
        names = bundle.namelist()
    release = folder / "release" / ASSIGNMENT / NOTEBOOK
    assert shipped == release.read_bytes()
    assert "office hours on Tuesdays" in nbformat.reads(shipped, as_version=4).cells[0].source
    secret = (folder / SECRET_FILE).read_text().strip()
    assert not [n for n in names if SECRET_FILE in n]
    assert secret.encode() not in shipped
