"""The student's JupyterLab leaves nbgrader's instructor tools out, and only for that run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from learning.workshops.lab import (
    INSTRUCTOR_PLUGINS,
    INSTRUCTOR_SERVER_EXTENSIONS,
    student_env,
    write_student_config,
)

pytest.importorskip("jupyterlab")


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
