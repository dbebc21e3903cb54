"""Read a submission's definitions as data and find what can change what grading reads.

One pass, top to bottom:

1. `cells`: the notebook's code cells as the checks' children load them: every code cell
   but the course's test cells, after IPython's rewriting of magics and shell lines, keeping
   only the definitions (`learning.workshops.checking.loader.definitions_of`: imports,
   functions, classes, constants). A top-level statement, a shell line or a magic runs only
   in the notebook's own sandboxed kernel, whose outputs never score, so it is not read. A
   `.py` file is read whole: its module runs whole.
2. `Names`: what each name may stand for, through imports and plain aliases (`s = sys`,
   `getattr(os, "fork")`, `__import__("ctypes")`), resolved with a work list: each name
   holds at most MEANINGS dotted names, and a binding is read again only when the name its
   value starts from gains one, so the work grows with the code, never with the product of
   its aliases.
3. `Reader`: every node of every definition (function bodies, class bodies, decorators,
   defaults) against the rules (`learning.workshops.screen.rules`), by use, never by import:
   `import gc` is nothing, `gc.get_referrers` is a finding.

Each finding names its cell (the grade id, or "#N", its position), its line and the code on
it. Nothing here runs the student's code; `learning.workshops.screen.bounded` runs this in a
child process with a time and memory bound.
"""

from __future__ import annotations

import ast
import json
from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from learning.workshops.checking.loader import definitions_of
from learning.workshops.screen.rules import (
    ATTRIBUTES,
    BUILTINS,
    HOOK_METHODS,
    LOOKUPS,
    MODULE_FILES,
    MUTATORS,
    RAW_MEMORY,
    RULES,
    TENSOR_BASES,
    UNTOUCHED,
    rule_of,
    rule_under,
)

MEANINGS = 16
"""The most dotted names one name may stand for; a name bound to more is itself a finding."""
MAX_FINDINGS = 50
"""Findings reported for one submission (a hostile notebook can make thousands)."""
WHAT_CHARS = 120
CODE_CHARS = 100
LABEL_CHARS = 80


@dataclass(frozen=True)
class Finding:
    """One line of a submission's definitions that breaks a rule: which rule, where, what
    the line does, and the line itself."""

    rule: str  # a key of rules.RULES
    cell: str  # the cell's grade id, or "#N": its position in the notebook (1 = first)
    line: int  # 1-based, in the cell's source
    what: str  # what the code does: "calls subprocess.run"
    code: str = ""  # the line, as written, cut to CODE_CHARS
    heading: str = ""  # the heading above the cell, for a student to find it

    @property
    def text(self) -> str:
        """What the line does and why that holds the grade (an instructor's and a
        student's words alike)."""
        return f"{self.what}: {RULES[self.rule].why}"

    def __str__(self) -> str:
        return f"cell {self.cell}, line {self.line}: {self.text} [{self.rule}]"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> Finding:
        """A finding as `to_json` wrote it; ValueError for anything else."""
        if not isinstance(data, dict):
            raise ValueError(f"a finding is a JSON object, not {type(data).__name__}")
        try:
            finding = cls(**data)
        except TypeError as exc:
            raise ValueError(f"not a finding: {exc}") from None
        texts = (finding.rule, finding.cell, finding.what, finding.code, finding.heading)
        if not all(isinstance(t, str) for t in texts) or not isinstance(finding.line, int):
            raise ValueError("a finding's fields have the wrong types")
        if finding.rule not in RULES:
            raise ValueError(f"a finding names no rule of the screen: {finding.rule!r}")
        return finding


@dataclass(frozen=True)
class Cell:
    """One cell's definitions, as the checks' children load them."""

    label: str  # the grade id, or "#N"
    heading: str
    lines: tuple[str, ...]  # the cell's source, line by line
    statements: tuple[ast.stmt, ...]


def read_file(path: Path) -> list[Finding]:
    """Every finding in the notebook or `.py` file at `path`, in the file's order.
    ValueError when it is neither a notebook nor Python the screen can read."""
    text = Path(path).read_text(encoding="utf-8")
    if Path(path).suffix == ".ipynb":
        return findings(notebook_cells(json.loads(text)))
    tree = _parse(text)
    if tree is None:
        return []  # nothing of a file that does not parse runs
    return findings([Cell(Path(path).name, "", tuple(text.splitlines()), tuple(tree.body))])


def notebook_cells(notebook: object) -> list[Cell]:
    """The notebook's cells as the checks' children load them: every code cell but the
    course's test cells (as `loader` skips them), each with the definitions it keeps; a
    cell that does not parse runs nothing, so it is left out."""
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise ValueError("not a notebook: it has no list of cells")
    read, heading = [], ""
    for index, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict):
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        info = _nbgrader(cell)
        if cell.get("cell_type") == "markdown":
            heading = _heading(source) or heading
        elif cell.get("cell_type") == "code" and not _test_cell(info):
            tree = _parse(source)
            if tree is not None:
                grade_id = info.get("grade_id")
                label = grade_id if isinstance(grade_id, str) and grade_id else f"#{index}"
                read.append((" ".join(label.split())[:LABEL_CHARS], heading, source, tree))
    chosen = definitions_of([tree for *_, tree in read])
    return [
        Cell(label, heading[:LABEL_CHARS], tuple(source.splitlines()), tuple(statements))
        for (label, heading, source, _), statements in zip(read, chosen, strict=True)
        if statements
    ]


def findings(cells: list[Cell]) -> list[Finding]:
    """Every finding in `cells`, at most one per rule and line, in the cells' order."""
    names = Names.of(cells)
    found: dict[tuple[str, str, int], Finding] = {}
    for cell in cells:
        reader = Reader(names, cell, found)
        for statement in cell.statements:
            reader.read(statement)
    for name, (cell, line) in names.overflowing.items():
        _add(found, cell, line, "dynamic-code", f"binds {name} to more than {MEANINGS} names")
    order = {cell.label: at for at, cell in enumerate(cells)}
    return sorted(found.values(), key=lambda f: (order.get(f.cell, 0), f.line, f.rule))


def _add(found: dict, cell: Cell, line: int, rule: str, what: str) -> None:
    """Add a finding of `rule` at `line` of `cell`, unless that line has one already."""
    code = cell.lines[line - 1].strip() if 0 < line <= len(cell.lines) else ""
    code = code if len(code) <= CODE_CHARS else code[: CODE_CHARS - 3] + "..."
    what = what if len(what) <= WHAT_CHARS else what[: WHAT_CHARS - 3] + "..."
    finding = Finding(rule, cell.label, line, what, code, cell.heading)
    found.setdefault((rule, cell.label, line), finding)


def _test_cell(info: dict) -> bool:
    """Is this one of the course's test cells, which the checks' children never load?"""
    return bool(info.get("grade")) and not info.get("solution")


def _nbgrader(cell: dict) -> dict:
    """The cell's nbgrader metadata, or {}: a hostile notebook's metadata can be any JSON."""
    metadata = cell.get("metadata")
    info = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return info if isinstance(info, dict) else {}


def _heading(markdown: str) -> str:
    lines = [line.lstrip("#").strip() for line in markdown.splitlines() if line.startswith("#")]
    return lines[-1] if lines else ""


def _parse(source: str) -> ast.Module | None:
    """The cell as IPython compiles it (magics and shell lines become calls), or None when
    it does not parse: such a cell runs nothing, in the kernel or the checks."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return ast.parse(source)  # IPython leaves Python alone: its tokenizing is the cost
    except (SyntaxError, ValueError):
        pass
    try:
        return ast.parse(TransformerManager().transform_cell(source))
    except (SyntaxError, ValueError):  # null bytes: nothing of it runs either
        return None


class Names:
    """What each name of the definitions may stand for: the dotted names of the modules and
    attributes it is bound to by an import or a plain alias, at most MEANINGS each."""

    def __init__(self) -> None:
        self.meanings: dict[str, set[str]] = defaultdict(set)
        self.overflowing: dict[str, tuple[Cell, int]] = {}  # name -> where it overflowed

    @classmethod
    def of(cls, cells: list[Cell]) -> Names:
        names = cls()
        bindings: list[tuple[str, ast.expr, Cell, int]] = []
        for cell in cells:
            for statement in cell.statements:
                for node in ast.walk(statement):
                    if isinstance(node, ast.Import | ast.ImportFrom):
                        for name, full in imported(node):
                            names.mean(name, {full}, cell, node.lineno)
                    elif isinstance(node, BINDINGS):
                        bindings += [(n, v, cell, node.lineno) for n, v in _aliases(node)]
        names.resolve(bindings)
        return names

    def resolve(self, bindings: list[tuple[str, ast.expr, Cell, int]]) -> None:
        """Follow the aliases until no name gains a meaning: each binding is read once,
        then again only when the name its value starts from gains one (so at most
        MEANINGS + 1 times)."""
        readers: dict[str, list[int]] = defaultdict(list)
        for at, (_, value, _, _) in enumerate(bindings):
            root = _root(value)
            if root is not None:
                readers[root].append(at)
        todo, queued = deque(range(len(bindings))), set(range(len(bindings)))
        while todo:
            at = todo.popleft()
            queued.discard(at)
            name, value, cell, line = bindings[at]
            if self.mean(name, self.qualify(value), cell, line):
                for reader in readers.get(name, ()):
                    if reader not in queued:
                        queued.add(reader)
                        todo.append(reader)

    def mean(self, name: str, meanings: set[str], cell: Cell, line: int) -> bool:
        """Add `meanings` to `name` up to MEANINGS; whether it gained any."""
        known = self.meanings[name]
        new = sorted(meanings - known)
        room = MEANINGS - len(known)
        if len(new) > room:
            self.overflowing.setdefault(name, (cell, line))
            new = new[:room]
        known.update(new)
        return bool(new)

    def qualify(self, node: ast.AST) -> set[str]:
        """The dotted names `node` may stand for (empty when it is none the screen knows)."""
        if isinstance(node, ast.Name):
            return set(self.meanings.get(node.id, ()))
        if isinstance(node, ast.Attribute):
            return {f"{q}.{node.attr}" for q in self.qualify(node.value)}
        if isinstance(node, ast.Call):
            first = _literal(node.args[0]) if node.args else None
            if first and (_called(node, "__import__") or self.is_import_module(node)):
                return {first}
            name = _literal(node.args[1]) if len(node.args) > 1 else None
            if _called(node, "getattr") and name:
                return {f"{q}.{name}" for q in self.qualify(node.args[0])}
        return set()

    def is_import_module(self, call: ast.Call) -> bool:
        return "importlib.import_module" in self.qualify(call.func)


def imported(node: ast.AST) -> Iterator[tuple[str, str]]:
    """(bound name, full dotted name) of each name an import statement binds; relative and
    star imports bind nothing the screen can name."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                yield alias.asname, alias.name
            else:
                yield alias.name.split(".")[0], alias.name.split(".")[0]
    elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
        for alias in node.names:
            if alias.name != "*":
                yield alias.asname or alias.name, f"{node.module}.{alias.name}"


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
BINDINGS = (ast.Assign, ast.AnnAssign, ast.NamedExpr, *FUNCTIONS)
"""The nodes that bind a name to a value (`_aliases`)."""


def _aliases(node: ast.AST) -> Iterator[tuple[str, ast.expr]]:
    """(name, value) of each plain binding `node` makes: `n = value`, `n: T = value`,
    `(n := value)`, and a parameter's default (`def f(s=sys)`)."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Name):
                yield target.id, node.value
    elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
        if isinstance(node.target, ast.Name):
            yield node.target.id, node.value
    elif isinstance(node, FUNCTIONS):
        args = node.args
        positional = [a.arg for a in args.posonlyargs + args.args][::-1]  # defaults: the last
        yield from zip(positional, args.defaults[::-1], strict=False)
        for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
            if default is not None:
                yield arg.arg, default


def _root(node: ast.AST) -> str | None:
    """The name whose meanings `node`'s meanings are built from, if any."""
    while isinstance(node, ast.Attribute | ast.Call):
        if isinstance(node, ast.Attribute):
            node = node.value
        else:
            node = node.args[0] if _called(node, "getattr") and node.args else node.func
    return node.id if isinstance(node, ast.Name) else None


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _called(node: ast.Call, name: str) -> bool:
    return isinstance(node.func, ast.Name) and node.func.id == name


class Reader:
    """The rules over one cell's definitions, adding to the findings `found`."""

    def __init__(self, names: Names, cell: Cell, found: dict) -> None:
        self.names, self.cell, self.found = names, cell, found
        self.parents: dict[int, ast.AST] = {}

    def read(self, statement: ast.stmt) -> None:
        """Every node of `statement`, parents before children."""
        todo = [statement]
        while todo:
            node = todo.pop()
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
                todo.append(child)
            visit = VISITS.get(type(node))
            if visit is not None:
                visit(self, node)

    def find(self, rule: str | None, node: ast.AST, what: str) -> None:
        if rule:
            line = getattr(node, "lineno", 1)
            key = (rule, self.cell.label, line)
            if key not in self.found:
                _add(self.found, self.cell, line, rule, what)

    def visit_Name(self, node: ast.Name) -> None:
        parent = self.parents.get(id(node))
        call = parent if isinstance(parent, ast.Call) and parent.func is node else None
        if node.id in BUILTINS and not (call and node.id == "__import__" and _literal_first(call)):
            self.find(BUILTINS[node.id], node, f"{'calls' if call else 'uses'} {node.id}")
        elif node.id in LOOKUPS and call is None:
            self.find("dynamic-code", node, f"passes {node.id} around")
        if isinstance(node.ctx, ast.Load) and self.outermost(node) and not self.aliased(node):
            self.dotted(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if not isinstance(node.ctx, ast.Load):
            if attr.startswith("__") and attr.endswith("__"):
                self.find("monkeypatch", node, f"assigns .{attr}")
            for base in sorted(self.touched(node.value)):
                self.find("monkeypatch", node, f"assigns {base}.{attr}")
            return
        if attr in ATTRIBUTES:
            self.find(ATTRIBUTES[attr], node, f"uses .{attr}")
        if attr == "__dict__" and self.names.qualify(node.value):
            self.find("dynamic-code", node, "uses a module's __dict__")
        if self.outermost(node) and not self.aliased(node):
            self.dotted(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if not isinstance(node.ctx, ast.Load):
            for base in sorted(self.touched(node.value)):
                self.find("monkeypatch", node, f"writes into {base}")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
            for base in sorted(self.touched(func.value)):
                if "." in base:  # np.append(a, b) is a function of numpy, not a change to it
                    self.find("monkeypatch", node, f"changes {base} with .{func.attr}()")
        if isinstance(func, ast.Name) and func.id in LOOKUPS and node.args:
            self.lookup(node, func.id)
            if func.id == "getattr" and self.outermost(node):
                self.dotted(node)  # getattr(os, "fork") is os.fork
        if _called(node, "type") and len(node.args) == 3:
            self.find("dynamic-code", node, "builds a class with type()")
        if self.names.is_import_module(node) and not _literal_first(node):
            self.find("dynamic-code", node, "imports a module whose name is computed")
        if any(k.arg == "allow_pickle" for k in node.keywords):
            self.find("dynamic-code", node, "loads a pickle (allow_pickle), which runs code")
        self.files(node)

    def lookup(self, node: ast.Call, builtin: str) -> None:
        """getattr, setattr and delattr on a module: a computed name hides what is used, and
        setting or deleting changes the module."""
        target = self.names.qualify(node.args[0])
        name = _literal(node.args[1]) if len(node.args) > 1 else None
        if builtin == "getattr":
            if target and name is None:
                self.find("dynamic-code", node, f"looks up a computed name in {min(target)}")
        elif target and min(target).split(".")[0] not in UNTOUCHED:
            self.find("monkeypatch", node, f"{builtin}s {min(target)}.{name or '?'}")

    def files(self, node: ast.Call) -> None:
        """A file opened by descriptor, or a Python module written by name."""
        func = node.func
        opens = _called(node, "open") or "io.open" in self.names.qualify(func)
        if opens and node.args and isinstance(node.args[0], ast.Constant):
            if isinstance(node.args[0].value, int):
                self.find("raw-descriptor", node, f"opens descriptor {node.args[0].value}")
        writes = _called(node, "open") or getattr(func, "attr", "") in ("write_text", "write_bytes")
        named = [c.value for c in ast.walk(node) if isinstance(c, ast.Constant)]
        if writes and any(isinstance(v, str) and v.endswith(MODULE_FILES) for v in named):
            self.find("module-file", node, "writes a Python module file")

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and any(path in node.value for path in RAW_MEMORY):
            self.find("native-code", node, "names a process's memory or descriptors as a file")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if any(alias.name == "*" for alias in node.names) and node.module:
            rule = rule_under(node.module)
            if rule:
                self.find("dynamic-code", node, f"imports every name of {node.module} (*)")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            for name in sorted(self.names.qualify(base)):
                if any(name == b or name.startswith(b + ".") for b in TENSOR_BASES):
                    self.find("dispatch-internals", node, f"subclasses {name}")

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name in HOOK_METHODS:
            self.find("dispatch-internals", node, f"defines {node.name}")

    visit_AsyncFunctionDef = visit_FunctionDef

    def dotted(self, node: ast.AST) -> None:
        """The rules for the dotted names `node` stands for."""
        parent = self.parents.get(id(node))
        verb = "calls" if isinstance(parent, ast.Call) and parent.func is node else "uses"
        for name in sorted(self.names.qualify(node)):
            self.find(rule_of(name), node, f"{verb} {name}")

    def touched(self, node: ast.AST) -> set[str]:
        """The dotted names of modules (or of what they hold) that a store into `node`
        changes; those grading never uses while it checks are left out."""
        return {q for q in self.names.qualify(node) if q.split(".")[0] not in UNTOUCHED}

    def outermost(self, node: ast.AST) -> bool:
        """Is `node` the whole of a dotted name (not `a` or `a.b` inside `a.b.c`)?"""
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return False
        return not (
            isinstance(parent, ast.Call)
            and _called(parent, "getattr")
            and parent.args[:1] == [node]
            and len(parent.args) > 1
            and _literal(parent.args[1])
        )

    def aliased(self, node: ast.AST) -> bool:
        """Is `node` the value of a plain alias (`s = sys`), which `Names` follows to its uses?"""
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Assign) and parent.value is node:
            return all(isinstance(t, ast.Name) for t in parent.targets)
        if isinstance(parent, ast.AnnAssign | ast.NamedExpr) and parent.value is node:
            return isinstance(parent.target, ast.Name)
        return False


VISITS = {
    getattr(ast, name.removeprefix("visit_")): method
    for name, method in vars(Reader).items()
    if name.startswith("visit_")
}
"""Each node type Reader reads, with its method (looked up once, not once a node)."""


def _literal_first(call: ast.Call) -> bool:
    return bool(call.args) and _literal(call.args[0]) is not None
