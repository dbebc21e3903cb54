"""The graded cells of a submitted notebook, checked directly: which cells it loses, without
nbgrader, a kernel or a sandbox.

A notebook's definitions load as the hidden tests load them (`learning.workshops.checking.loader`);
each graded cell's visible code, as the course's source notebook has it (nbgrader grades
the source's test cells, hidden regions included), then runs in that namespace, and each
check its hidden region calls runs here on the cases the draw gives: in this process, or
in child processes for a submission that may crash or hang them (`isolated`). The shared
course's one full autograde shows nbgrader takes the same cells (tests/test_nbgrader_e2e.py).
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from grader.course import ASSIGNMENT, NOTEBOOK, REPO
from grader.grading.course_cells import course_cells_of
from grader.grading.hidden import (
    Draw,
    check_address_table,
    check_worksheet,
    hidden_cases,
    hidden_views,
    run_hidden,
)
from grader.grading.hidden_regions import hidden_checks, split_hidden_tests
from grader.grading.screening import cells_lost, screen_submission
from learning.workshops.checking.cases import OPS
from learning.workshops.checking.isolation import Session
from learning.workshops.checking.loader import load_module
from learning.workshops.measuring.results import H200_SAMPLE, load
from learning.workshops.notebook.testing import quiet, run_cases, verdict

SOURCE = REPO / "source" / ASSIGNMENT / NOTEBOOK
GPU_ONLY = ("timing_points",)
"""Hidden checks that score only on a GPU: a cell calling one is left out here."""


def graded_cells(notebook) -> list[tuple[str, str]]:
    """The (grade_id, source) of every autograded test cell, in notebook order."""
    cells = []
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            cells.append((meta["grade_id"], cell.source))
    return cells


def lost_cells(
    path: Path, draw: Draw, isolated: bool = False, skip: frozenset[str] = frozenset()
) -> set[str]:
    """The autograded cells of the notebook at `path` that fail, GPU-only cells and those
    in `skip` left out."""
    namespace = dict(vars(load_module(path)), RESULTS=load(H200_SAMPLE))
    lost = set()
    for grade_id, source in graded_cells(nbformat.read(SOURCE, as_version=4)):
        if grade_id in skip:
            continue
        visible, region = split_hidden_tests(source)
        checks = hidden_checks(region) if region else []
        if any(name in GPU_ONLY for name, _, _ in checks):
            continue
        try:
            with quiet():
                exec(compile(visible, f"<{grade_id}>", "exec"), namespace)
            for name, args, _ in checks:
                _hidden_check(name, args, namespace, path, draw, isolated)
        except Exception:  # noqa: BLE001 - any exception fails the cell, as in nbgrader
            lost.add(grade_id)
    return lost | (screened(path) - skip)


def screened(path: Path) -> set[str]:
    """The cells the source screen's flags cost the notebook at `path` (as grading scores
    them, `grader.grading.screening`), GPU-only cells left out."""
    source = nbformat.read(SOURCE, as_version=4)
    flags = screen_submission(nbformat.read(path, as_version=4), SOURCE)
    gpu_only = {
        grade_id
        for grade_id, text in graded_cells(source)
        if any(name in GPU_ONLY for name, _, _ in hidden_checks(split_hidden_tests(text)[1] or ""))
    }
    return set(cells_lost(flags, course_cells_of(source))) - gpu_only


def _hidden_check(name: str, args: list, namespace: dict, path: Path, draw: Draw, isolated: bool):
    """Run one hidden check as the trusted side does; AssertionError when it fails."""
    if name == "expect_hidden":
        op = args[0]
        if isolated:
            with Session(path) as session:
                results = run_hidden(op, session, draw).results
        else:
            function = namespace[OPS[op].function]
            results = run_cases(function, op, hidden_cases(op, draw), draw.seed)
        error = verdict(results, f"{op}, hidden cases")
        if error is not None:
            raise error
    elif name == "expect_address_table":
        check_address_table(namespace[args[0]], hidden_views(draw))
    elif name == "expect_worksheet":
        check_worksheet(namespace[args[0]])
    else:
        raise ValueError(f"no direct runner for the hidden check {name}")
