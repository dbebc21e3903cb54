"""What the source screen's flags cost a submission, when it is graded.

`grader.grading.screen` reads the student's code as data and flags what the instructions
forbid (torch computing or copying on a graded function's path) and what tampers with the
checker. The checks beside the student's code in the child can be switched off by that
code; the screen cannot. So a flag costs cells: an instruction flag the cells that test the
functions it reaches, a tampering flag every test cell. The flags and the cells they cost
go into the grading log, and from there into the cohort report.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Sequence
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from grader.grading.course_cells import CourseCell
from grader.grading.hidden_regions import hidden_checks, strip_hidden_tests

OP_FUNCTIONS = {
    "copy_rows": "copy_rows",
    "softmax_kernel": "launch_softmax",
    "strided_softmax": "strided_softmax",
    "strided_softmax_": "strided_softmax_",
    "strided_softmax_backward": "strided_softmax_backward",
}
"""The function each op's cases call (as `learning.workshops.checking.cases.OPS` has it,
without importing torch when the course config loads)."""


@functools.lru_cache(maxsize=4)
def course_screen(source: Path):
    """What the screen knows of the course, from its source notebook (read once)."""
    from grader.grading.screen import Course

    return Course.of(nbformat.read(source, as_version=4))


def screen_submission(nb: NotebookNode, source: Path) -> list:
    """The screen's flags on `nb`, the notebook being graded, against the course's `source`."""
    from grader.grading.screen import screen

    return screen(nb, course_screen(source))


def functions_tested(cell: CourseCell) -> set[str]:
    """The student's functions a course test cell runs: the first argument of each
    `expect_cases`, the function of each `expect_hidden`'s op, and strided_softmax for the
    timing. The address table and the worksheet are judged from their answers alone."""
    functions = set()
    visible = strip_hidden_tests(cell.source)
    for node in ast.walk(ast.parse(visible)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "expect_cases":
            if node.args and isinstance(node.args[0], ast.Name):
                functions.add(node.args[0].id)
    for name, args, _ in hidden_checks(cell.hidden) if cell.hidden is not None else ():
        if name == "expect_hidden" and args:
            functions.add(OP_FUNCTIONS.get(str(args[0]), str(args[0])))
        elif name == "timing_points":
            functions.add("strided_softmax")
    return functions


TIMED_COPY = "tensor-copy"
"""The instruction rule a timing cell lets pass: copying the input first is the workshop's
own copy-first variant, slower but honest, and the timing prices it (1.5 of 2 points on an
H200); computing the softmax in torch is not, and costs the timing too."""


def cells_lost(flags: Sequence, course: Sequence[CourseCell]) -> dict[str, str]:
    """The course test cells the flags cost, each with the first flag's words: a tampering
    flag costs every test cell, an instruction flag those that run a function it reaches
    (a copy of the input aside, for the timing: `TIMED_COPY`)."""
    lost: dict[str, str] = {}
    for cell in course:
        if not cell.grade or cell.cell_type != "code" or cell.solution:
            continue
        reached = functions_tested(cell)
        timed = any(name == "timing_points" for name, *_ in hidden_checks(cell.hidden or ""))
        for flag in flags:
            if timed and flag.rule == TIMED_COPY:
                continue
            if flag.tampering or reached & set(flag.functions):
                lost.setdefault(cell.grade_id, str(flag))
    return lost


def cost(cell: NotebookNode, reason: str) -> None:
    """Score `cell` 0 for the flag `reason`: its error goes first, since nbgrader scores a
    cell by its first error or result value (a timing cell's points come as a value)."""
    cell.outputs.insert(0, flag_output(reason))


def flag_output(reason: str) -> NotebookNode:
    """The error that scores a flagged cell 0, saying why and what to do."""
    message = (
        f"Not scored: the grader's reading of your code found {reason}. Compute in your Triton "
        "kernel and leave the checker alone; ask your instructor if you think this is wrong."
    )
    return nbformat.v4.new_output(
        "error", ename="Flagged", evalue=message, traceback=[f"Flagged: {message}"]
    )
