"""Visible test cells scored on the trusted side: the course's own assertions, run here.

In the sandboxed notebook a visible test cell runs beside the student's code, which can
rebind what the cell calls (`expect_cases`, `quiet`, the student's own functions). So the
trusted side runs the cell again: the cell's source as the gradebook keeps it, executed
in this process with the course's helpers, where every name the cell takes from the
student's notebook is a `Remote` that calls the student's definition in the sandboxed child
and gets back data. `expect_cases` runs its public cases through the child too, judged here
(`learning.workshops.checking.judge`). What the cell's assertions then say is its grade.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
from collections.abc import Callable

import nbformat
import torch
from nbformat import NotebookNode

from grader.grading.course_cells import claimed_id
from grader.grading.hidden import replay, view_input
from learning.workshops.checking.faults import CheckerFault
from learning.workshops.measuring.results import H200_SAMPLE, Results, load
from learning.workshops.notebook.testing import quiet

CELL_TEXT_LIMIT = 1500
"""Characters kept of a visible cell's failure: it may quote values the child sent."""


class Remote:
    """A function of the student's notebook, called in the sandboxed child with one argument
    sent as data (a view, or benchmark results) and its answer returned as data."""

    def __init__(self, name: str, call: Callable[[str, list[dict]], list[dict]]) -> None:
        self.name, self._call = name, call

    def __call__(self, *args, **kwargs):

        if len(args) != 1 or kwargs:
            raise CheckerFault(
                f"the course's test cell calls {self.name} with {len(args)} arguments and "
                f"{sorted(kwargs)} keywords; the trusted side sends one argument"
            )
        return replay(self._call(self.name, [argument_spec(args[0])]))(args[0])


def visible_cells(nb: NotebookNode, course) -> list[tuple[int, object]]:
    """The visible test cells of `nb` to score here: (cell index, its course cell) for each
    code cell whose grade id is a course grade cell with no hidden region and no solution
    (the last cell claiming an id, as with hidden regions). The source run is the course's."""

    tests = {
        c.grade_id: c
        for c in course
        if c.grade and c.cell_type == "code" and c.hidden is None and not c.solution
    }
    last = {}
    for index, cell in enumerate(nb.cells):
        gid = claimed_id(cell)
        if gid in tests and cell.cell_type == "code":
            last[gid] = index
    return sorted((index, tests[gid]) for gid, index in last.items())


def argument_spec(value) -> dict:
    """What the child rebuilds `value` from (`learning.workshops.checking.calls.argument`)."""

    if isinstance(value, torch.Tensor):
        return view_input(value.float())
    if isinstance(value, Results):
        return {"results": value.to_json()}
    raise CheckerFault(f"the trusted side cannot send a {type(value).__name__} to the child")


def course_namespace(expect_cases: Callable) -> dict:
    """What a visible cell finds without the student's notebook: torch, the course's helpers
    and the measurements the notebook loads when graded."""

    return {
        "torch": torch,
        "quiet": quiet,
        "expect_cases": expect_cases,
        "RESULTS": load(H200_SAMPLE),
    }


def public_runs(source: str) -> list[tuple[str, str, tuple[str, ...] | None]]:
    """The public runs a course cell asks for: (the student's function, the op, the case
    names or None for all), from each `expect_cases(function, "op", [names])` call in it."""
    runs = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "expect_cases":
            try:
                function, op = node.args[0].id, ast.literal_eval(node.args[1])
                names = ast.literal_eval(node.args[2]) if len(node.args) > 2 else None
            except (AttributeError, IndexError, ValueError):
                continue
            runs.append((function, op, tuple(names) if names is not None else None))
    return runs


def free_names(source: str) -> set[str]:
    """The names `source` reads but neither binds nor finds among Python's builtins."""
    tree = ast.parse(source)
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return read - bound - set(dir(builtins))


def rescore(source: str, namespace: dict, call: Callable) -> list[NotebookNode]:
    """The outputs of the course's cell `source` run here: what it printed, and the error
    its assertions raised (cut to CELL_TEXT_LIMIT), which is what nbgrader scores."""
    scope = dict(namespace)
    for name in free_names(source) - set(scope):
        scope[name] = Remote(name, call)
    printed = io.StringIO()
    outputs = []
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(source, "<course test cell>", "exec"), scope)  # noqa: S102 - course code
    except Exception as exc:  # the assertions failed, or the student's data broke them
        error = exc
    else:
        error = None
    if printed.getvalue().strip():
        text = printed.getvalue()[:CELL_TEXT_LIMIT]
        outputs.append(nbformat.v4.new_output("stream", name="stdout", text=text))
    if error is not None:
        name, message = type(error).__name__, str(error)[:CELL_TEXT_LIMIT]
        outputs.append(
            nbformat.v4.new_output(
                "error", ename=name, evalue=message, traceback=[f"{name}: {message}"]
            )
        )
    return outputs
