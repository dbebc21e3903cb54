"""The graded cells of a submitted notebook, checked directly: which cells it loses, without
nbgrader, a kernel or a sandbox.

A notebook's definitions load as the hidden tests load them (`learning.workshops.checking.loader`);
each graded cell's visible code, as the course's source notebook has it (nbgrader grades
the source's test cells, hidden regions included), then runs in that namespace, and each
check its hidden region calls runs here on the cases the draw gives: in this process, or
in child processes for a submission that may crash or hang them, or that only the clean
room's replay fails (`isolated`: the visible cells' public cases too). The shared
course's one full autograde shows nbgrader takes the same cells (tests/test_nbgrader_e2e.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat

from grader.course import ASSIGNMENT, NOTEBOOK, REPO
from grader.grading.hidden import (
    CASE_TIMEOUT_S,
    Draw,
    check_address_table,
    check_worksheet,
    hidden_cases,
    hidden_views,
    run_hidden,
)
from grader.grading.hidden_regions import hidden_checks, split_hidden_tests
from learning.workshops.checking.cases import OPS
from learning.workshops.checking.isolation import Session
from learning.workshops.checking.loader import load_module, notebook_definitions
from learning.workshops.checking.suites import suite
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
    path: Path,
    draw: Draw,
    isolated: bool = False,
    skip: frozenset[str] = frozenset(),
    like: Path | None = None,
) -> set[str]:
    """The autograded cells of the notebook at `path` that fail, GPU-only cells and those
    in `skip` left out. With `like` (a notebook that loses no cell, the solution), the cells
    whose code is the same in both (`same_cells`) are not run: they score as that
    notebook's. (The source screen costs no cell: it holds a grade for review.)"""
    skip = skip | (same_cells(path, like) if like is not None else set())
    namespace = dict(vars(load_module(path)), RESULTS=load(H200_SAMPLE))
    if isolated:
        namespace["expect_cases"] = _isolated_expect_cases(path)
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
    return lost


def definitions(path: Path) -> dict[str, tuple[str, set[str]]]:
    """Each top-level name the notebook at `path` defines (as its hidden tests load it):
    the source of its statement and the names that statement refers to."""
    tree = ast.parse(notebook_definitions(path))
    found = {}
    for node in tree.body:
        text = ast.unparse(node)
        used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            targets = [(a.asname or a.name).split(".")[0] for a in node.names]
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            targets = [node.name]
        else:
            assigned = node.targets if isinstance(node, ast.Assign) else [node.target]
            targets = [n.id for t in assigned for n in ast.walk(t) if isinstance(n, ast.Name)]
        for name in targets:
            found[name] = (text, used)
    return found


def reached(roots: set[str], defined: dict[str, tuple[str, set[str]]]) -> set[str]:
    """The names of `defined` that code referring to `roots` can reach, through the names
    each definition refers to."""
    seen, todo = set(), [r for r in roots if r in defined]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += [n for n in defined[name][1] if n in defined and n not in seen]
    return seen


def same_cells(path: Path, like: Path) -> set[str]:
    """The graded cells whose code is the same in the notebooks at `path` and `like`: every
    definition the cell's visible code and hidden checks reach (the functions they call, and
    all those call) has the same source in both. Such a cell runs the same code on the same
    draw in both, so it scores in `path` as in `like`."""
    mine, theirs = definitions(path), definitions(like)
    same = set()
    for grade_id, source in graded_cells(nbformat.read(SOURCE, as_version=4)):
        visible, region = split_hidden_tests(source)
        roots = {n.id for n in ast.walk(ast.parse(visible)) if isinstance(n, ast.Name)}
        for name, args, _ in hidden_checks(region) if region else []:
            roots |= {str(a) for a in args[:1]}
            if name == "expect_hidden" and args:
                roots.add(OPS[args[0]].function)
        names = reached(roots, mine) | reached(roots, theirs)
        if all(n in mine and n in theirs and mine[n][0] == theirs[n][0] for n in names):
            same.add(grade_id)
    return same


def _isolated_expect_cases(path: Path):
    """The course's `expect_cases` as the trusted side runs it: the public cases in a child
    that serves the notebook at `path`, each passing case replayed in the clean room."""

    def expect_cases(fn, op: str, names=None) -> None:
        chosen = [c for c in suite(op) if names is None or c.name in names]
        with Session(path) as session:
            run = session.run_cases(op, fn.__name__, chosen, 0, CASE_TIMEOUT_S)
        error = verdict(run.results, f"{op}, public cases")
        if error is not None:
            raise error

    return expect_cases


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
