"""Run All, as a student runs the notebook: only a graded test cell may stop it.

An exception in any cell stops Run All and leaves every cell after it unrun, so the cells
that are not graded (the demos, the full public suite, the PTX evidence, the gradient
report) print what went wrong instead of raising. Each notebook runs in a Jupyter kernel
with errors allowed, and every cell that raised is listed.
"""

from __future__ import annotations

import os

import nbformat
import pytest
from nbclient import NotebookClient

from grader import course

RELEASE = course.REPO / "release" / course.ASSIGNMENT / course.NOTEBOOK


def run_all(notebook: nbformat.NotebookNode, folder) -> list[tuple[int, str, str]]:
    """Run every cell of `notebook` in `folder`, errors allowed; each cell that raised, as
    (index, grade id or '', the error's name)."""
    client = NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(folder)}},
    )
    client.execute()
    raised = []
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
                raised.append((index, grade_id, output.ename))
    return raised


def graded(notebook: nbformat.NotebookNode, grade_id: str) -> bool:
    """Whether the cell with `grade_id` is a graded test cell."""
    return any(
        c.metadata.get("nbgrader", {}).get("grade_id") == grade_id and c.metadata.nbgrader["grade"]
        for c in notebook.cells
    )


def test_a_persistent_kernel_runs_every_cell(tmp_path):
    """With a correct persistent kernel (grader/shapes/persistent.py, whose kernel takes
    seven arguments), does Run All reach the last cell with no error, the PTX cell included?"""
    notebook = course.shape_notebook(course.REPO, "persistent")
    assert run_all(notebook, tmp_path) == []
    (evidence,) = [c for c in notebook.cells if "loads_report(" in c.source]
    assert "128 bits" in "".join(o.get("text", "") for o in evidence.outputs)


def test_only_graded_cells_raise_in_the_untouched_release(tmp_path):
    """In the release as a student first opens it, every function a stub, is each error
    raised by a graded test cell, never by a cell that is not graded?"""
    notebook = nbformat.read(RELEASE, as_version=4)
    raised = run_all(notebook, tmp_path)
    assert raised, "the untouched release's tests should fail"
    ungraded = [(index, name) for index, grade_id, name in raised if not graded(notebook, grade_id)]
    assert ungraded == [], "cells that are not graded raised"


@pytest.fixture(autouse=True)
def kernel(monkeypatch):
    """A python3 Jupyter kernel that imports learning/ and grader/ as the lab's does."""
    from jupyter_client.kernelspec import KernelSpecManager

    if "python3" not in KernelSpecManager().find_kernel_specs():
        pytest.skip("no python3 Jupyter kernel: pip install ipykernel")
    path = os.pathsep.join(filter(None, [str(course.REPO), os.environ.get("PYTHONPATH")]))
    monkeypatch.setenv("PYTHONPATH", path)
