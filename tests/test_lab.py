"""The student's JupyterLab leaves nbgrader's instructor tools out, and only for that run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from learning.workshops.lab import (
    INSTRUCTOR_PLUGINS,
    INSTRUCTOR_SERVER_EXTENSIONS,
    TERMINAL_ENV,
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


PROFILE_LIKE = """# what a login shell's /etc/profile and a conda hook in ~/.bashrc do
PATH=/usr/local/bin:/usr/bin:/bin
export VIRTUAL_ENV=/somewhere/else CONDA_PREFIX=/opt/conda CONDA_DEFAULT_ENV=base
unset PYTHONPATH
"""

WHICH_PYTHON = """command -v python
python -c 'import sys, learning; print(sys.executable); print(learning.__file__)'
echo "VIRTUAL_ENV=${VIRTUAL_ENV-unset} CONDA_PREFIX=${CONDA_PREFIX-unset}"
"""


def terminal_shell(folder: Path) -> list[str]:
    """The shell command the student configuration gives Jupyter's terminals, as Jupyter
    reads it (tests/test_browser.py runs the real terminal)."""
    config = json.loads((folder / "jupyter_server_config.json").read_text())
    return config["ServerApp"]["terminado_settings"]["shell_command"]


def test_jupyter_reads_the_terminal_shell(tmp_path):
    """Does Jupyter's server, given the student configuration, take its terminal shell: bash
    with the lab's start-up file, interactive, not a login shell (no -l)?"""
    write_student_config(tmp_path)
    shown = jupyter("server", "--show-config", env=student_env(tmp_path))
    assert "terminado_settings" in shown and str(tmp_path / "terminal_bashrc") in shown, shown
    shell = terminal_shell(tmp_path)
    assert Path(shell[0]).name == "bash" and shell[1:] == [
        "--rcfile",
        str(tmp_path / "terminal_bashrc"),
        "-i",
    ]
    assert "-l" not in shell and "--login" not in shell


def test_a_terminal_runs_the_kernels_python_whatever_the_start_up_files_do(tmp_path):
    """With a ~/.bashrc that resets PATH as /etc/profile does, unsets PYTHONPATH and names
    another environment, does the lab's terminal shell still run this Python as `python`,
    import the course from it, and name this environment (the issue: `No module named
    'learning'` in every command the notebook gives)?"""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text(PROFILE_LIKE)
    config = tmp_path / "config"
    config.mkdir()
    env = dict(student_env(config), HOME=str(home), PYTHONPATH=str(REPO))
    env.pop("CONDA_PREFIX", None)
    write_student_config(config, env)
    done = subprocess.run(
        [*terminal_shell(config), "-c", WHICH_PYTHON],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    lines = done.stdout.splitlines()
    here = Path(sys.executable).parent
    assert lines[:2] == [str(here / "python"), str(here / "python")], done.stdout + done.stderr
    assert lines[2] == str(REPO / "learning" / "__init__.py")
    virtual_env = sys.prefix if sys.prefix != sys.base_prefix else "unset"
    assert lines[3] == f"VIRTUAL_ENV={virtual_env} CONDA_PREFIX=unset"


def test_the_lab_puts_its_python_first_and_names_only_its_own_environment(tmp_path, monkeypatch):
    """Does the lab's environment put this Python's folder first on PATH, once, and is
    VIRTUAL_ENV this Python's virtual environment, or unset outside one?"""
    here = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", os.pathsep.join(["/usr/bin", "/bin"]))
    monkeypatch.setenv("VIRTUAL_ENV", "/somewhere/else")
    env = student_env(tmp_path)
    assert env["PATH"].split(os.pathsep) == [here, "/usr/bin", "/bin"]
    monkeypatch.setenv("PATH", env["PATH"])
    assert student_env(tmp_path)["PATH"] == env["PATH"]
    if sys.prefix != sys.base_prefix:
        assert env["VIRTUAL_ENV"] == sys.prefix
    else:
        assert "VIRTUAL_ENV" not in env
    assert {"PATH", "PYTHONPATH", "VIRTUAL_ENV"} <= set(TERMINAL_ENV)


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
