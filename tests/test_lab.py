"""The student's JupyterLab leaves nbgrader's instructor tools out, and only for that run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from learning.workshops.lab import (
    INSTRUCTOR_PLUGINS,
    INSTRUCTOR_SERVER_EXTENSIONS,
    kernel_metadata,
    match_kernel_metadata,
    served_folder,
    student_env,
    write_student_config,
)

pytest.importorskip("jupyterlab")

REPO = Path(__file__).resolve().parents[1]
COURSE_NOTEBOOKS = (
    "source/i1_strided_softmax/strided_softmax.ipynb",
    "release/i1_strided_softmax/strided_softmax.ipynb",
    "notebooks/setup_check.ipynb",
    "notebooks/address_explorer.ipynb",
    "notebooks/instructor_cohort.ipynb",
)
"""Every notebook the course ships or an instructor opens (release/ is generated from source/,
notebook metadata and all)."""


def jupyter(*args: str, env: dict) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", *args], env=env, capture_output=True, text=True
    )
    return done.stdout + done.stderr


def test_jupyter_reads_the_instructor_tools_as_disabled(tmp_path):
    """Does Jupyter itself, given the student configuration, list every instructor plugin
    as disabled and every instructor server extension as disabled, and the students' own
    (validate, assignment list) as enabled?"""
    write_student_config(tmp_path)
    env = student_env(tmp_path)
    listed = jupyter("labextension", "list", env=env)
    disabled = listed.split("Disabled extensions:")[1]
    assert all(plugin in disabled for plugin in INSTRUCTOR_PLUGINS), listed
    assert "@jupyter/nbgrader:validate-assignment" not in disabled
    assert "@jupyter/nbgrader:assignment-list" not in disabled
    config = (tmp_path / "jupyter_server_config.json").read_text()
    assert all(f'"{name}": false' in config for name in INSTRUCTOR_SERVER_EXTENSIONS)


def test_the_environment_itself_is_untouched(tmp_path):
    """Without the student configuration, are the instructor plugins still enabled?"""
    write_student_config(tmp_path)
    listed = jupyter("labextension", "list", env=student_env(tmp_path / "elsewhere"))
    assert "@jupyter/nbgrader:create-assignment" not in listed.split("Disabled extensions:")[-1]


def notebook_at(path, kernel: str = "python3") -> None:
    cell = nbformat.v4.new_code_cell("x = 1", outputs=[], execution_count=None)
    metadata = {
        "kernelspec": {"name": kernel, "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[cell], metadata=metadata), path)


def test_notebooks_get_the_kernels_metadata_and_nothing_else(tmp_path):
    """Do python3 notebooks in the served folder (not in hidden folders, not other kernels')
    get exactly the kernel metadata JupyterLab would write, cells untouched, and a second
    start rewrite nothing?"""
    metadata = kernel_metadata()
    assert metadata is not None, "the environment's python3 kernel runs this Python"
    assert metadata["language_info"]["version"] == sys.version.split()[0]
    for path in ("a.ipynb", "assignment/b.ipynb", ".ipynb_checkpoints/a-checkpoint.ipynb"):
        notebook_at(tmp_path / path)
    notebook_at(tmp_path / "julia.ipynb", kernel="julia-1.10")
    changed = match_kernel_metadata(tmp_path, metadata)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in changed) == [
        "a.ipynb",
        "assignment/b.ipynb",
    ]
    rewritten = nbformat.read(tmp_path / "assignment" / "b.ipynb", as_version=4)
    assert rewritten.metadata == metadata
    assert [c.source for c in rewritten.cells] == ["x = 1"]
    assert match_kernel_metadata(tmp_path, metadata) == []


def test_the_served_folder_is_read_from_the_arguments(tmp_path):
    """Is the folder JupyterLab serves the root_dir or notebook-dir given, else here?"""
    assert served_folder([f"--ServerApp.root_dir={tmp_path}", "--no-browser"]) == tmp_path
    assert served_folder(["--notebook-dir", str(tmp_path)]) == tmp_path
    assert served_folder(["--no-browser"]) == Path.cwd()


def course_python() -> str:
    """The Python release environment.yml pins, e.g. 3.11."""
    text = (REPO / "environment.yml").read_text()
    return re.search(r"^\s*-\s*python=(\d+\.\d+)\s*$", text, re.M)[1]


@pytest.mark.parametrize("path", COURSE_NOTEBOOKS)
def test_the_course_notebooks_open_unmodified(path):
    """Does each course notebook carry the kernel metadata JupyterLab writes on opening it with
    the course's python3 kernel (any difference marks it modified): the kernelspec, every field
    of language_info, and a version of the Python environment.yml pins (its patch number is the
    one field that depends on the machine; the students' lab matches it)?"""
    notebook = nbformat.read(REPO / path, as_version=nbformat.NO_CONVERT)
    metadata = kernel_metadata()
    assert metadata is not None, "the environment's python3 kernel runs this Python"
    assert notebook.metadata.get("kernelspec") == metadata["kernelspec"]
    language = dict(notebook.metadata.get("language_info", {}))
    version = language.pop("version", "")
    assert language == {k: v for k, v in metadata["language_info"].items() if k != "version"}
    assert re.fullmatch(re.escape(course_python()) + r"\.\d+", version), version
