"""Submissions are regular files: a symlink or special file anywhere in a submission folder
is refused before nbgrader copies anything (grader/grading/submission_files.py). The real
`nbgrader autograde` refusing linked submissions beside honest ones: the attack suite
(tests/exploits/test_exploits.py, `test_linked_submissions_are_refused_before_grading`)."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from grader import course
from grader.grading.submission_files import irregular_entries, refusal
from learning.workshops.checking.child import child_env

NOTEBOOK = "strided_softmax.ipynb"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A clean submission folder, submitted/alice/i1, with a notebook and a data file."""
    folder = tmp_path / "submitted" / "alice" / "i1"
    (folder / "data").mkdir(parents=True)
    (folder / NOTEBOOK).write_text("{}")
    (folder / "data" / "notes.txt").write_text("mine")
    (tmp_path / "course_secret.txt").write_text("s3cret")
    return folder


def test_a_folder_of_regular_files_is_accepted(folder):
    """Is a submission of plain files and folders graded as it is?"""
    assert irregular_entries(folder) == []
    assert refusal(folder) is None


def test_a_symlink_to_the_secret_is_refused_with_its_name(folder):
    """Is a symlink deep in the folder refused, named, with where it points?"""
    (folder / "data" / "key.txt").symlink_to(folder.parents[2] / "course_secret.txt")
    cause = refusal(folder)
    assert cause.startswith("submission refused, not graded: data/key.txt is a symbolic link")
    assert "course_secret.txt" in cause and "s3cret" not in cause


def test_a_symlinked_notebook_is_refused(folder, tmp_path):
    """Is a notebook that is a link to another student's notebook refused?"""
    other = tmp_path / "submitted" / "bob" / "i1" / NOTEBOOK
    other.parent.mkdir(parents=True)
    other.write_text("{}")
    (folder / NOTEBOOK).unlink()
    (folder / NOTEBOOK).symlink_to(other)
    assert irregular_entries(folder) == [f"{NOTEBOOK} is a symbolic link (to {str(other)!r})"]


def test_linked_folders_are_refused_and_not_walked(folder, tmp_path):
    """Are a linked subfolder, a linked assignment folder and a linked student folder each
    refused (and the linked folder's contents never listed as the student's)?"""
    (folder / "grader").symlink_to(tmp_path, target_is_directory=True)
    assert irregular_entries(folder) == [f"grader is a symbolic link (to {str(tmp_path)!r})"]
    (folder / "grader").unlink()
    linked = tmp_path / "submitted" / "mallory" / "i1"
    linked.parent.mkdir()
    linked.symlink_to(folder, target_is_directory=True)
    assert irregular_entries(linked) == [f"i1/ is a symbolic link (to {str(folder)!r})"]
    student = tmp_path / "submitted" / "eve"
    student.symlink_to(folder.parent, target_is_directory=True)
    assert irregular_entries(student / "i1")[0].startswith("eve/ is a symbolic link")


def test_fifos_sockets_and_hard_links_are_refused(folder):
    """Is each special file refused by kind: a FIFO where nbgrader reads timestamp.txt (it
    would block the run), a socket, a hard link to a course file?"""
    os.mkfifo(folder / "timestamp.txt")
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(folder / "data" / "sock"))
    os.link(folder.parents[2] / "course_secret.txt", folder / "copy.txt")
    try:
        found = irregular_entries(folder)
    finally:
        listening.close()
    assert found == [
        "copy.txt is a hard link (2 names for one file)",
        "timestamp.txt is a FIFO",
        "data/sock is a socket",
    ]


def test_device_nodes_are_refused(folder):
    """Is a device node (made by root, as a tar extracted as root can make one) refused?"""
    try:
        os.mknod(folder / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")
    assert irregular_entries(folder) == ["null is a character device"]


def test_a_long_list_is_cut_and_counted(folder):
    """Does a folder of many links give a cause of bounded length that counts the rest?"""
    for index in range(40):
        (folder / f"link{index:02}").symlink_to("/etc/passwd")
    cause = refusal(folder)
    assert "link04" in cause and "link05" not in cause and "and 35 more" in cause
    assert len(cause) < 1200


AS_A_WORKER = """
from nbgrader.apps.nbgraderapp import NbGraderApp
from grader.grading.submission_files import refuses_irregular
before = refuses_irregular()
NbGraderApp.instance().initialize(["autograde", "i1_strided_softmax", "--force"])
print(before, refuses_irregular())
"""


def test_every_autograde_loads_the_refusal(tmp_path):
    """Does starting nbgrader's autograde app in a course, as `nbgrader autograde` and each
    grader.parallel worker (so grader.demo) do, put the refusal in front of nbgrader?"""
    shutil.copy(course.REPO / "nbgrader_config.py", tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", AS_A_WORKER],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.split()[-2:] == ["False", "True"], done.stdout + done.stderr


def test_a_config_that_grades_in_the_sandbox_refuses_without_the_call(tmp_path):
    """Does a course config that dropped the call (an older copy, say) still refuse linked
    submissions, because grading through SandboxedExecute, which grading requires of every
    config, brings the refusal with it?"""
    config = (course.REPO / "nbgrader_config.py").read_text()
    call = "\nrefuse_irregular_submissions()\n"
    assert call in config
    (tmp_path / "nbgrader_config.py").write_text(config.replace(call, "\n"))
    done = subprocess.run(
        [sys.executable, "-c", AS_A_WORKER],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.split()[-2:] == ["False", "True"], done.stdout + done.stderr
