"""Hidden-test regions: where a cell's source has them, and the checks they call.

One parser for every side that reads the markers: the sandbox cuts the regions out of the
notebook it runs, the trusted side grades the course's regions, restore and feedback cut
them out of what students wrote or read. The markers are nbgrader's own (its
`ClearHiddenTests`), found as it finds them, so no line can be hidden from one side and
visible to another. Only the course's source cells are ever parsed for checks
(`grader.grading.course_cells`); a region in a student's cell is text, never a check.
"""

from __future__ import annotations

import ast

import nbformat
from nbformat import NotebookNode
from nbgrader.preprocessors.clearhiddentests import ClearHiddenTests

HIDDEN_BEGIN = ClearHiddenTests.begin_test_delimeter.default_value
HIDDEN_END = ClearHiddenTests.end_test_delimeter.default_value
CHECKS = ("expect_address_table", "expect_hidden", "expect_worksheet", "timing_points")
"""The checks a hidden region may call; each runs on the trusted side, not in the kernel."""

Check = tuple[str, list, dict]
"""One call of a hidden region: (check name, positional args, keyword args)."""


def split_hidden_tests(source: str) -> tuple[str, str | None]:
    """`source` without its hidden-test regions (markers included, as nbgrader's
    ClearHiddenTests finds them; an unterminated region runs to the end of the cell), and
    the regions' own lines, or None when it has none. The sandbox runs the first; the
    trusted side grades the second, so both read the markers the same way."""
    kept, hidden, region = [], False, None
    for line in source.split("\n"):
        if HIDDEN_BEGIN in line:
            hidden, region = True, region or []
        elif HIDDEN_END in line and hidden:
            hidden = False
        elif hidden:
            region.append(line)
        else:
            kept.append(line)
    return "\n".join(kept), None if region is None else "\n".join(region)


def strip_hidden_tests(source: str) -> str:
    """`source` without its hidden-test regions (see `split_hidden_tests`)."""
    return split_hidden_tests(source)[0]


def stripped(nb: NotebookNode) -> NotebookNode:
    """A copy of `nb` with every cell's hidden-test regions removed: what a sandbox sees."""
    copy = nbformat.from_dict(nb)
    for cell in copy.cells:
        cell.source = strip_hidden_tests(cell.source)
    return copy


def hidden_region(source: str) -> str | None:
    """The code between a cell's BEGIN and END HIDDEN TESTS markers, or None: exactly what
    the sandbox cuts out of the cell."""
    return split_hidden_tests(source)[1]


def hidden_checks(region: str) -> list[Check]:
    """The checks a hidden region calls: (name, positional args, keyword args),
    each argument a literal or, for a bare name, that name as a string. Calls of anything
    but `CHECKS` are left out."""

    def value(node: ast.expr):
        return node.id if isinstance(node, ast.Name) else ast.literal_eval(node)

    calls = []
    for node in ast.walk(ast.parse(region)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in CHECKS:
            args = [value(a) for a in node.args]
            kwargs = {k.arg: value(k.value) for k in node.keywords}
            calls.append((node.func.id, args, kwargs))
    return calls
