"""Edits of a Python source inside one function: a zoo bug's, or a course's solved cell's."""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class Edit:
    """Replace `old` by `new` inside the source of function `function` (exactly once)."""

    function: str
    old: str
    new: str


def function_span(source: str, function: str) -> tuple[int, int]:
    """Character offsets of `function`'s definition (decorators included) in `source`."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return starts[first - 1], starts[node.end_lineno]
    raise KeyError(f"no function {function!r} in the source")


def apply(source: str, edits: tuple[Edit, ...], skip_absent: bool = False) -> str:
    """`source` with every edit applied; each `old` must occur once in its function.

    With `skip_absent`, edits to functions `source` does not define are left out (a
    notebook cell holds one function of the reference, not all of them).
    """
    for edit in edits:
        try:
            begin, end = function_span(source, edit.function)
        except KeyError:
            if skip_absent:
                continue
            raise
        body = source[begin:end]
        count = body.count(edit.old)
        if count != 1:
            raise ValueError(f"edit {edit.old!r} matches {count} times in {edit.function}")
        source = source[:begin] + body.replace(edit.old, edit.new) + source[end:]
    return source
