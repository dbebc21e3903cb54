"""Which hint-sidecar entries a test cell writes, read from its source with `ast`."""

from __future__ import annotations

import ast
import functools

from grader.grading.timing_record import TEST
from learning.workshops.checking.sidecars import hidden_key, public_key


@functools.cache
def check_keys() -> dict[str, str]:
    """The sidecar key of each hidden check that tests one function (`grader.grading.hidden`'s
    `expect_NAME` records `hidden:NAME`), and of the timing cell, by the function called.
    Imported when first needed: `grader.grading.hidden` imports torch, which the report does not
    need until it reads cells."""
    from grader.grading.hidden import FUNCTION_CHECKS

    return {f"expect_{name}": hidden_key(name) for name in FUNCTION_CHECKS} | {
        "timing_points": TEST
    }


def sidecar_keys(source: str) -> tuple[str, ...]:
    """The hint-sidecar keys a test cell writes: its expect_cases / expect_hidden calls and
    the checks of `check_keys()`, read with `ast` from the cell's source, in order, once each."""
    keys = (_key(call) for call in _calls(source))
    return tuple(dict.fromkeys(key for key in keys if key))


def _key(call: ast.Call) -> str | None:
    """The key one call writes (see `learning.workshops.checking.sidecars`), or None:
    `expect_hidden(op, impl=...)` names its op first, `expect_cases(fn, op, names)` second."""
    name, args = _call_name(call), call.args
    if name in check_keys():
        return check_keys()[name]
    if name == "expect_hidden":
        op = _string(args[0] if args else _keyword(call, "op"))
        return None if op is None else hidden_key(op)
    if name != "expect_cases":
        return None
    op = _string(args[1] if len(args) > 1 else _keyword(call, "op"))
    if op is None:
        return None
    names = args[2] if len(args) > 2 else _keyword(call, "names")
    listed = _strings(names)
    if listed is not None or names is None or _string(names) is None:  # not one name
        return public_key(op, listed)
    return None


def calls_function(source: str, function: str) -> bool:
    """Whether a cell's source calls `function` (by name or attribute)."""
    return any(_call_name(call) == function for call in _calls(source))


def _calls(source: str) -> list[ast.Call]:
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return []
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    return sorted(calls, key=lambda c: (c.lineno, c.col_offset))


def _call_name(call: ast.Call) -> str:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return ""


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _string(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _strings(node: ast.expr | None) -> list[str] | None:
    """The strings of a literal list/tuple/set of strings; None for anything else."""
    if not isinstance(node, ast.List | ast.Tuple | ast.Set):
        return None
    values = [_string(e) for e in node.elts]
    return None if any(v is None for v in values) else values
