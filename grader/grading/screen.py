"""The source screen: read a submission's own code cells as data, before any of it runs,
and flag what the instructions forbid or what tampers with the checker.

The checks that run beside the student's code (torch reading the input, no kernel
launched, the ownership audit) can be switched off by that code, so they stay hints; this
screen is the evidence that cannot be. It reads every code cell the student wrote (solution
cells, cells they added, the course's unlabelled cells they edited) with `ast`, never
running or matching text, after IPython's own rewriting of magics and shell escapes. The
rules, each with a stable id, are in `grader.grading.screen_rules`; the checks in
`grader.grading.screen_checks`.

    course = Course.of(nbformat.read(root / "source" / assignment / notebook, 4))
    flags = screen(submitted_notebook, course)
    log.flagged([str(flag) for flag in flags])
"""

from __future__ import annotations

import ast
import shlex
from dataclasses import dataclass
from functools import cached_property

from nbformat import NotebookNode

from grader.grading.screen_checks import check
from grader.grading.screen_rules import (
    INSTRUCTION_RULES,
    WHY,
    Finding,
    Program,
    Unit,
    imported,
    top_statements,
)

__all__ = ["INSTRUCTION_RULES", "WHY", "Course", "Flag", "flags_to_text", "screen"]

SAFE_MAGICS = frozenset(
    "matplotlib autoreload who whos who_ls pdb xmode precision pprint lsmagic".split()
)
"""Magics that run no code of the student's and change nothing the checks see."""
CODE_MAGICS = frozenset({"time", "timeit", "pinfo", "pinfo2", "capture"})
"""Magics whose argument (or cell body) is Python: the screen reads it as code."""
SHELL_MAGICS = frozenset({"bash", "sh", "script", "system", "sx", "perl", "ruby", "pip"})
WHAT_CHARS = 120
MAX_DEPTH = 3
"""Magics inside magics' code read this deep; deeper is flagged."""


@dataclass(frozen=True)
class Flag:
    """One line of a submission that breaks a rule: which rule, where, and why."""

    rule: str  # a key of WHY
    cell: str  # the cell's grade id, or "#N": its position in the notebook (1 = first)
    line: int  # 1-based, in the cell's source
    reason: str  # what the line does and why that is not allowed
    functions: tuple[str, ...] = ()  # graded functions whose kernel path it is on (rule 1)

    def __str__(self) -> str:
        return f"cell {self.cell}, line {self.line}: {self.reason} [{self.rule}]"

    @property
    def tampering(self) -> bool:
        """Does the flag say the code tampers with the checker (not just the instructions)?"""
        return self.rule not in INSTRUCTION_RULES


@dataclass(frozen=True)
class Course:
    """What the screen knows of the course's own notebook (trusted: the course folder's)."""

    restored: frozenset[str]  # grade ids of locked cells: grading puts their source back
    restored_code: tuple[str, ...] = ()  # those cells' source: what they import is protected
    other_code: tuple[str, ...] = ()  # the course's code cells without a grade id

    @classmethod
    def of(cls, notebook: NotebookNode) -> Course:
        """The course as its source (or release) notebook has it."""
        restored, restored_code, other = set(), [], []
        for cell in notebook.cells:
            info = cell.get("metadata", {}).get("nbgrader", {})
            if cell.cell_type != "code" or info.get("solution"):
                continue
            if info.get("grade_id") and info.get("locked"):
                restored.add(info["grade_id"])
                restored_code.append(_text(cell.source))
            elif not info.get("grade_id"):
                other.append(_text(cell.source))
        return cls(frozenset(restored), tuple(restored_code), tuple(other))

    @cached_property
    def trees(self) -> tuple[list[ast.Module], list[ast.Module]]:
        """The restored cells' and the other cells' code, parsed once (read, never changed)."""
        return _parsed(self.restored_code), _parsed(self.other_code)


def screen(nb: NotebookNode, course: Course) -> list[Flag]:
    """Every flag for the student's code cells of `nb`, in notebook order."""
    if not isinstance(course, Course):
        raise TypeError(
            f"screen needs a Course, got {type(course).__name__}: build it with "
            "Course.of(the course's source notebook)"
        )
    restored, others = course.trees
    known = {ast.dump(tree) for tree in restored + others}
    units: list[Unit] = []
    kept: set[str] = set()
    findings: list[Finding] = []
    order: dict[str, int] = {}
    for index, cell in enumerate(nb.get("cells", [])):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        grade_id = _grade_id(cell)
        if grade_id in course.restored:
            continue
        label = " ".join(grade_id.split())[:80] if grade_id else f"#{index + 1}"
        try:
            tree = _parse(_text(cell.get("source", "")))
        except Unreadable as exc:
            findings.append(Finding("dynamic-code", label, 1, f"cannot be read ({exc})"))
            order.setdefault(label, index)
            continue
        if tree is not None and ast.dump(tree) in known:
            kept.add(ast.dump(tree))  # the course's own text: not the student's to answer for
        if tree is None or ast.dump(tree) in known:
            continue  # a cell that does not parse runs nothing
        order.setdefault(label, index)
        findings += _read(label, tree, units, 0)
    protected = {name for tree in restored for name in _module_names(tree)}
    context = [tree for tree in others if ast.dump(tree) in kept]
    findings += check(Program(units, restored + others, protected, context))
    flags = {
        (f.rule, f.cell, f.line): Flag(
            f.rule, f.cell, f.line, f"{_short(f.what)}; {WHY[f.rule]}", f.functions
        )
        for f in findings
    }
    return sorted(flags.values(), key=lambda f: (order.get(f.cell, 0), f.line, f.rule))


def flags_to_text(flags: list[Flag]) -> str:
    """The flags as the grading log and the student read them."""
    if not flags:
        return "source screen: nothing flagged"
    lines = [f"source screen: {len(flags)} flag{'s' * (len(flags) != 1)}"]
    lines += [f"  {flag}" for flag in flags]
    lines.append(
        "Take these lines out and submit again; if a flag is wrong, ask the course staff "
        "(the rule is named in brackets)."
    )
    return "\n".join(lines)


def _module_names(tree: ast.Module) -> set[str]:
    """The names a course cell binds at module level (imports, assignments, definitions)."""
    names = set()
    for stmt in top_statements(tree.body):
        names |= {bound for bound, _ in imported(stmt)}
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def _grade_id(cell: object) -> str | None:
    """The cell's grade id, or None: a hostile notebook's metadata can be any JSON."""
    metadata = cell.get("metadata") if isinstance(cell, dict) else None
    info = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    grade_id = info.get("grade_id") if isinstance(info, dict) else None
    return grade_id if isinstance(grade_id, str) else None


def _short(what: str) -> str:
    """`what` cut to a line's length: it can quote a name of any length from the cell."""
    return what if len(what) <= WHAT_CHARS else what[: WHAT_CHARS - 3] + "..."


def _text(source: object) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


def _parsed(texts: tuple[str, ...]) -> list[ast.Module]:
    trees = []
    for text in texts:
        try:
            tree = _parse(text)
        except Unreadable:
            continue
        if tree is not None:
            trees.append(tree)
    return trees


def _parse(source: str) -> ast.Module | None:
    """The cell as IPython would compile it (magics rewritten, top-level await allowed)."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        code = TransformerManager().transform_cell(source)
        flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        tree = compile(code, "<cell>", "exec", flags=flags, dont_inherit=True)
        ast.dump(tree)  # as deep as the screen's walks go
        return tree
    except (SyntaxError, ValueError):  # null bytes: the kernel runs nothing of it either
        return None
    except Exception as exc:  # too deep here may still run in a kernel with other limits
        raise Unreadable(type(exc).__name__) from exc


class Unreadable(Exception):
    """The screen could not read a cell (nested too deep, too large): flagged, not skipped."""


def _read(label: str, tree: ast.Module, units: list[Unit], depth: int) -> list[Finding]:
    """Add the cell's code, and the code inside its magics, to `units`; flag the magics
    that run what the screen cannot read."""
    magics = _Magics(label, depth)
    try:
        tree = ast.fix_missing_locations(magics.visit(tree))
    except RecursionError:
        return [Finding("dynamic-code", label, 1, "nests code too deep to read")]
    units.append(Unit(label, tree))
    findings = list(magics.findings)
    for code, offset in magics.code:
        try:
            inner = _parse(code)
        except Unreadable as exc:
            findings.append(Finding("dynamic-code", label, offset + 1, f"cannot be read ({exc})"))
            continue
        if inner is not None:
            ast.increment_lineno(inner, offset)
            findings += _read(label, inner, units, depth + 1)
    return findings


class _Magics(ast.NodeTransformer):
    """Replace each `get_ipython().run_line_magic(...)` (and cell magic, shell escape) by
    None, keeping the code inside the ones that hold Python and flagging the others."""

    def __init__(self, label: str, depth: int) -> None:
        self.label, self.depth = label, depth
        self.findings: list[Finding] = []
        self.code: list[tuple[str, int]] = []

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        call = _ipython_call(node)
        if call is None:
            return node
        kind, args = call
        line = node.lineno
        if kind in ("system", "getoutput"):
            self._flag("process", line, f"runs the shell command !{args[0][:60]}")
        elif kind == "run_line_magic":
            self._magic(args[0], args[1], "", line)
        elif kind == "run_cell_magic":
            self._magic(args[0], args[1], args[2], line)
        return ast.copy_location(ast.Constant(None), node)

    def _magic(self, name: str, line_arg: str, body: str, line: int) -> None:
        if self.depth >= MAX_DEPTH:
            self._flag("dynamic-code", line, f"nests the magic %{name} too deep to read")
        elif name in CODE_MAGICS:
            self.code.append((_without_options(line_arg) if name != "capture" else "", line - 1))
            if body:
                self.code.append((body, line))
        elif name == "load_ext" and line_arg.strip() not in SAFE_MAGICS:
            self.code.append((f"import {line_arg.strip()}", line - 1))
        elif name == "load_ext":
            pass  # %load_ext autoreload: IPython's own extension
        elif name not in SAFE_MAGICS:
            rule = "process" if name in SHELL_MAGICS else "ipython"
            self._flag(rule, line, f"runs the magic %{name}")

    def _flag(self, rule: str, line: int, what: str) -> None:
        self.findings.append(Finding(rule, self.label, line, what))


def _ipython_call(node: ast.Call) -> tuple[str, list[str]] | None:
    """(method, literal arguments) of `get_ipython().method('...', ...)`, else None."""
    func = node.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)):
        return None
    shell = func.value
    if not (isinstance(shell.func, ast.Name) and shell.func.id == "get_ipython"):
        return None
    sizes = {"system": 1, "getoutput": 1, "run_line_magic": 2, "run_cell_magic": 3}
    args = [a.value for a in node.args if isinstance(a, ast.Constant)]
    if func.attr not in sizes or node.keywords or shell.args or len(node.args) != len(args):
        return None
    if len(args) != sizes[func.attr] or not all(isinstance(a, str) for a in args):
        return None
    return func.attr, args


def _without_options(line: str) -> str:
    """`%timeit -n 10 -r 3 f(x)` -> `f(x)`: the statement after timeit's options."""
    try:
        words = shlex.split(line, posix=False)
    except ValueError:
        return line
    taking = {"-n", "-r", "-p"}
    skip = 0
    while skip < len(words) and words[skip].startswith("-"):
        skip += 2 if words[skip] in taking else 1
    if not skip:
        return line
    rest = line
    for word in words[:skip]:
        rest = rest.split(word, 1)[1] if word in rest else rest
    return rest.strip()
