"""When nbgrader's config for the course does not load, nbgrader logs the error and grades
with its default Execute: the hidden cells would then run in the student's kernel. Grading
refuses that course up front, and the hidden cells refuse to run in an autograding kernel."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest

import grader.reference as reference
from grader import course
from grader.grading import execute, gpu_timing, readiness
from grader.grading.hidden import expect_address_table, expect_hidden, expect_worksheet
from grader.isolation.sandbox import SandboxUnavailable
from grader.seeding import ENV
from learning.workshops.checking.faults import CheckerFault

REPO = Path(__file__).resolve().parents[1]
CONFIG = (REPO / "nbgrader_config.py").read_text()
BROKEN = {
    "does not load": CONFIG.replace(
        "from grader.grading.restore import", "from grader.restored import"
    ),
    "does not list grader.grading.execute.SandboxedExecute": CONFIG.replace(
        "    StartChecksAhead,\n    SandboxedExecute,",
        "    StartChecksAhead,",
    ),
}


@pytest.fixture
def root(tmp_path) -> Path:
    """A course folder holding the course's own nbgrader_config.py (and the test secret)."""
    shutil.copy(REPO / "nbgrader_config.py", tmp_path)
    return tmp_path


def test_the_course_config_is_accepted(root):
    """Does the repository's own config pass the check (so the check is not always 'no')?"""
    readiness.require_course_config(root)


@pytest.mark.parametrize("reason", sorted(BROKEN))
def test_grading_refuses_a_config_nbgrader_would_skip(root, reason, monkeypatch):
    """Do ready_to_grade and course.autograde refuse a config that fails to load or drops
    the sandbox, before nbgrader runs, saying which?"""
    (root / "nbgrader_config.py").write_text(BROKEN[reason])
    for unsafe in (False, True):
        with pytest.raises(SandboxUnavailable, match=reason):
            readiness.ready_to_grade(root, unsafe)
    monkeypatch.setattr(course, "nbgrader", pytest.fail)
    with pytest.raises(course.CourseError, match=reason):
        course.autograde(root)


def test_hidden_cells_refuse_an_autograding_kernel(monkeypatch, tmp_path):
    """Does each hidden cell's entry point raise CheckerFault naming the config when it runs
    inside the kernel nbgrader autogrades, and run as before when validating?"""
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    calls = {
        "expect_hidden": lambda: expect_hidden("strided_softmax", tmp_path / "x.ipynb"),
        "expect_address_table": lambda: expect_address_table(reference.address_table),
        "expect_worksheet": lambda: expect_worksheet(reference.worksheet),
        "timing_points": lambda: gpu_timing.timing_points(2),
    }
    for name, call in calls.items():
        with pytest.raises(CheckerFault, match="nbgrader_config.py") as info:
            call()
        assert str(info.value).startswith(name), name
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    expect_address_table(reference.address_table)


def test_sandboxed_execute_refuses_without_the_secret(root, monkeypatch):
    """Does SandboxedExecute refuse before running anything when the course lost its secret
    between the start of grading and this notebook, recording why in the grading log?"""
    from traitlets.config import Config

    from grader.grading.grading_log import read_record

    monkeypatch.delenv(ENV)
    monkeypatch.setattr(execute, "run_sandboxed", pytest.fail)
    config = Config({"CourseDirectory": {"root": str(root)}})
    resources = {
        "metadata": {"path": str(root)},
        "nbgrader": {"student": "ada", "assignment": "a1"},
    }
    with pytest.raises(SandboxUnavailable, match="no course secret"):
        execute.SandboxedExecute(config=config).preprocess(nbformat.v4.new_notebook(), resources)
    record = read_record(root, "a1", "ada")
    assert record.cause.startswith("no course secret")


def test_a_python_that_would_compile_torch_each_time_is_named(monkeypatch, tmp_path):
    """Writing no bytecode over a torch installed without any, is the instructor told the one
    command that compiles it, and told nothing where torch has its bytecode?"""
    import importlib.util
    import sys

    compiled = tmp_path / "__init__.cpython.pyc"
    compiled.write_bytes(b"")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(importlib.util, "cache_from_source", lambda _: str(compiled))
    assert readiness.torch_bytecode_note() is None
    compiled.unlink()
    note = readiness.torch_bytecode_note()
    packages = Path(importlib.util.find_spec("torch").origin).parent.parent
    assert note.endswith(f"python -m compileall -q -j 0 {packages}")
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert readiness.torch_bytecode_note() is None
