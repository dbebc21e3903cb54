"""Which of the notebook's three passes are still stubs, and the check that covers each.

`check strided_softmax` on a notebook whose earlier passes are unfinished fails every case
with the same NotImplementedError; this says where to start instead: the first unfinished
pass, and its own check. Read from the source alone (the definitions are not run).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from learning.workshops.checking.loader import LoadError, notebook_definitions


@dataclass(frozen=True)
class Pass:
    """One pass of the notebook: its number, what the student writes, and its check's op."""

    number: int
    functions: tuple[str, ...]
    op: str


PASSES = (
    Pass(1, ("copy_rows_kernel",), "copy_rows"),
    Pass(2, ("softmax_kernel",), "softmax_kernel"),
    Pass(3, ("strided_softmax",), "strided_softmax"),
)


def stubs(source: str) -> set[str]:
    """The functions defined in `source` whose body still raises NotImplementedError."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and any(
            isinstance(n, ast.Raise) and "NotImplementedError" in ast.unparse(n)
            for n in ast.walk(node)
        ):
            found.add(node.name)
    return found


def unfinished(impl: Path) -> list[Pass]:
    """The passes of the notebook or .py file at `impl` that are still stubs; [] when the
    source cannot be read (the check itself says why)."""
    try:
        source = notebook_definitions(impl) if impl.suffix == ".ipynb" else impl.read_text()
        left = stubs(source)
    except (LoadError, OSError, SyntaxError, UnicodeDecodeError):
        return []
    return [p for p in PASSES if left.intersection(p.functions)]


def where_to_start(impl: Path, op: str | None = None) -> str | None:
    """One line naming the unfinished passes and the check of the first; None when none is.
    When the first is the pass `op` (the check being run) checks, it says to finish that pass
    and run this check again instead of naming the same check."""
    passes = unfinished(impl)
    if not passes:
        return None
    first = passes[0]
    names = ", ".join(f"pass {p.number} ({', '.join(p.functions)})" for p in passes)
    if first.op == op:
        this = f"pass {first.number} ({', '.join(first.functions)})"
        unwritten = "" if len(passes) == 1 else f"Unfinished: {names}. "
        return f"{unwritten}Next: {this} is not written yet; finish it, then run this check again."
    return (
        f"Unfinished: {names}. Start with pass {first.number} and its own check: "
        f"python -m learning.workshops.check {first.op} --hint --impl {impl.name}"
    )
