"""The source screen's checks: the tampering rules over every cell, the instructions' rules
over the kernel path (see `grader.grading.screen_rules` for the rules themselves)."""

from __future__ import annotations

import ast
from collections import defaultdict

from grader.grading.screen_rules import (
    BUILTIN_MATH,
    COPIES,
    COURSE_CELL,
    DUNDER_OK,
    DYNAMIC,
    ENTRY_POINTS,
    FRAMES,
    HOOKS,
    INPUTS,
    JIT,
    JIT_COPIES,
    KNOWN_MODULES,
    LOOKUPS,
    MATH,
    MODULE_FILES,
    MUTATORS,
    SOFTMAX,
    Finding,
    Program,
    Unit,
    called,
    canonical,
    declared_global,
    imported,
    literal,
    path_rule,
    qualified_rule,
    roots,
    top_statements,
)

WRITERS = ("write_text", "write_bytes", "open")
TENSOR_BASES = ("torch.Tensor", "torch.nn.Parameter", "torch.utils", "torch.overrides")


def check(program: Program) -> list[Finding]:
    """Every rule broken in `program`, at most one finding per rule and line."""
    for unit in program.units:
        try:
            Everywhere(program, unit).visit(unit.tree)
            rebinds(program, unit)
        except RecursionError:
            program.flag("dynamic-code", unit, unit.tree, "nests code too deep to read")
    for unit, stmt, functions in reached(program):
        if unit.cell == COURSE_CELL:
            continue
        try:
            KernelPath(program, unit, functions).walk(stmt, False, frozenset())
        except RecursionError:
            program.flag("dynamic-code", unit, stmt, "nests code too deep to read")
    return list(program.findings.values())


def _uses(program: Program, node: ast.AST) -> str:
    parent = program.parents.get(id(node))
    return "calls" if isinstance(parent, ast.Call) and parent.func is node else "uses"


class Everywhere(ast.NodeVisitor):
    """The tampering rules, at every node of one cell."""

    def __init__(self, program: Program, unit: Unit) -> None:
        self.p, self.unit = program, unit

    def flag(self, rule: str | None, node: ast.AST, what: str) -> None:
        if rule:
            self.p.flag(rule, self.unit, node, what)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        module = "." * getattr(node, "level", 0) + (getattr(node, "module", None) or "")
        for alias in node.names:
            if alias.name == "*":
                self.flag("dynamic-code", node, f"imports every name of {module} (*)")
                continue
            full = alias.name if isinstance(node, ast.Import) else f"{module}.{alias.name}"
            self.imports(node, full)

    visit_ImportFrom = visit_Import

    def imports(self, node: ast.AST, full: str) -> None:
        rule = qualified_rule(canonical(full))
        if rule is None and full.split(".")[0] not in KNOWN_MODULES:
            rule = "unknown-module"
        self.flag(rule, node, f"imports {full}")

    def visit_Name(self, node: ast.Name) -> None:
        parent = self.p.parents.get(id(node))
        callee = isinstance(parent, ast.Call) and parent.func is node
        if node.id == "__import__" and callee and literal((parent.args or [None])[0]):
            self.imports(node, literal(parent.args[0]))
        elif node.id in DYNAMIC:
            self.flag("dynamic-code", node, f"{_uses(self.p, node)} {node.id}")
        elif node.id in LOOKUPS and not (
            callee and len(parent.args) > 1 and literal(parent.args[1])
        ):
            self.flag("dynamic-code", node, f"uses {node.id} with a computed name")
        elif node.id == "type" and callee and len(parent.args) == 3:
            self.flag("dynamic-code", node, "builds a class with type()")
        elif node.id == "get_ipython":
            self.flag("ipython", node, "uses get_ipython()")
        elif node.id in HOOKS or node.id in FRAMES:
            rule = "dispatch-internals" if node.id in HOOKS else "interpreter-access"
            self.flag(rule, node, f"uses {node.id}")
        if isinstance(node.ctx, ast.Load) and self.p.outermost(node):
            self.dotted(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr.startswith("__") and attr.endswith("__") and attr not in DUNDER_OK:
            self.flag("dynamic-code", node, f"uses .{attr}")
        if attr in FRAMES:
            self.flag("interpreter-access", node, f"uses .{attr}")
        if attr in HOOKS:
            self.flag("dispatch-internals", node, f"uses .{attr}")
        if attr == "get_ipython":
            self.flag("ipython", node, "uses get_ipython()")
        if not isinstance(node.ctx, ast.Load):
            for base in sorted(self.p.qualify(node.value)):
                self.flag("monkeypatch", node, f"assigns {base}.{attr}")
        elif self.p.outermost(node):
            self.dotted(node)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if not isinstance(node.ctx, ast.Load):
            for base in sorted(self.p.qualify(node.value)):
                self.flag("monkeypatch", node, f"writes into {base}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
            for base in sorted(self.p.qualify(func.value)):
                self.flag("monkeypatch", node, f"changes {base} with .{func.attr}()")
        if (called(node, "setattr") or called(node, "delattr")) and len(node.args) > 1:
            name = literal(node.args[1]) or "?"
            for base in sorted(self.p.qualify(node.args[0])):
                self.flag("monkeypatch", node, f"{func.id}s {base}.{name}")
            if name.startswith("__"):
                self.flag("monkeypatch", node, f"{func.id}s .{name}")
        opener = called(node, "open") or "io.open" in self.p.qualify(func)
        if opener and node.args and isinstance(node.args[0], ast.Constant):
            if isinstance(node.args[0].value, int):
                self.flag("raw-descriptor", node, f"opens file descriptor {node.args[0].value}")
        writes = called(node, "open") or getattr(func, "attr", "") in WRITERS
        if writes and any(
            isinstance(c, ast.Constant) and str(c.value).endswith(MODULE_FILES)
            for c in ast.walk(node)
        ):
            self.flag("unknown-module", node, "writes a Python module file")
        if any(k.arg == "allow_pickle" for k in node.keywords):
            self.flag("interpreter-access", node, "loads a pickle (allow_pickle)")
        if called(node, "getattr") and self.p.outermost(node):
            self.dotted(node)
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            for name in self.p.qualify(base):
                if any(name == b or name.startswith(b + ".") for b in TENSOR_BASES):
                    self.flag("dispatch-internals", node, f"subclasses {name}")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name in HOOKS:
            self.flag("dispatch-internals", node, f"defines {node.name}")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def dotted(self, node: ast.AST) -> None:
        """The tampering rules for the dotted names `node` stands for."""
        for name in sorted(self.p.qualify(node)):
            if name in ("sys", "os") and isinstance(node, ast.Name):
                self.flag("interpreter-access", node, f"passes the {name} module around")
            self.flag(qualified_rule(name), node, f"{_uses(self.p, node)} {name}")


def rebinds(program: Program, unit: Unit) -> None:
    """Flag module-level rebinding of a name the course's restored cells import (`matrix`,
    `expect_cases`, `torch`, ...), unless it is imported again from the same place."""
    if not program.protected:
        return
    for stmt in top_statements(unit.tree.body):
        for name, node, origin in _module_bindings(stmt):
            course = program.protected.get(name)
            if course is not None and (origin is None or origin not in course):
                where = " or ".join(sorted(course))
                what = f"imported from {where}" if where else "which the course's setup sets"
                program.flag("monkeypatch", unit, node, f"rebinds {name}, {what}")


def _module_bindings(stmt: ast.stmt):
    """(name, node, imported-from or None) for each module-level name `stmt` binds."""
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        for bound, full in imported(stmt):
            yield bound, stmt, full
        return
    scoped = isinstance(stmt, SCOPES)
    if scoped:
        yield stmt.name, stmt, None
    names = declared_global(stmt) if scoped else None
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            if names is None or node.id in names:
                yield node.id, node, None


SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def free_names(node: ast.AST) -> set[str]:
    """The names `node` reads from the module's scope (a function's own parameters and
    locals left out, its decorators, defaults and globals kept)."""
    if not isinstance(node, SCOPES + (ast.Lambda,)):
        return _scope([node])[0]
    outer: list[ast.AST] = [*getattr(node, "decorator_list", []), *getattr(node, "bases", [])]
    outer += [k.value for k in getattr(node, "keywords", [])]
    params: set[str] = set()
    if not isinstance(node, ast.ClassDef):
        args = node.args
        every = args.posonlyargs + args.args + args.kwonlyargs
        every += [a for a in (args.vararg, args.kwarg) if a is not None]
        params = {a.arg for a in every}
        outer += args.defaults + [d for d in args.kw_defaults if d is not None]
        outer += [a.annotation for a in every if a.annotation is not None]
        outer += [node.returns] if getattr(node, "returns", None) is not None else []
    body = node.body if isinstance(node.body, list) else [node.body]
    loads, stores = _scope(body)
    local = (stores | params) - declared_global(node)
    return (loads - local) | _scope(outer)[0]


def _scope(nodes: list[ast.AST]) -> tuple[set[str], set[str]]:
    """(names read, names bound) in `nodes`, nested scopes counted by what they read."""
    loads: set[str] = set()
    stores: set[str] = set()
    todo = list(nodes)
    while todo:
        node = todo.pop()
        if isinstance(node, SCOPES + (ast.Lambda,)):
            loads |= free_names(node)
            if not isinstance(node, ast.Lambda):
                stores.add(node.name)
            continue
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else stores).add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            stores.update(bound for bound, _ in imported(node))
        todo.extend(ast.iter_child_nodes(node))
    return loads, stores


def _bound(stmt: ast.stmt, functions: set[str] | None) -> set[str]:
    """The module-level names whose meaning `stmt` may set or change; with `functions`,
    also the receivers and arguments of its calls other than those names (a call may
    change a dict or an object it is given, not a function)."""
    if isinstance(stmt, SCOPES):
        return {stmt.name} | declared_global(stmt)
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return {bound for bound, _ in imported(stmt)}
    names: set[str] = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.Attribute | ast.Subscript) and not isinstance(node.ctx, ast.Load):
            names.update(roots(node))
        elif isinstance(node, ast.Call) and functions is not None:
            if isinstance(node.func, ast.Attribute):
                names.update(n for n in roots(node.func.value) if n not in functions)
            args = node.args + [k.value for k in node.keywords]
            names.update(a.id for a in args if isinstance(a, ast.Name) and a.id not in functions)
    return names


def reached(program: Program) -> list[tuple[Unit, ast.stmt, tuple[str, ...]]]:
    """The module-level statements the graded functions may run or depend on, each with
    the graded functions whose path it is on: from their names, every statement that binds
    or changes a name they read, and so on."""
    bindings = _bindings(program)
    paths = {entry: _reach(bindings, entry) for entry in sorted(ENTRY_POINTS)}
    found: dict[int, tuple[Unit, ast.stmt, tuple[str, ...]]] = {}
    for entry, statements in paths.items():
        for key, (unit, stmt) in statements.items():
            before = found.get(key, (unit, stmt, ()))[2]
            found[key] = (unit, stmt, (*before, entry))
    return list(found.values())


def _bindings(program: Program) -> dict[str, list[tuple[Unit, ast.stmt]]]:
    """For each module-level name, the statements that bind or may change it."""
    units = program.units + program.context
    statements = [(u, s) for u in units for s in top_statements(u.tree.body)]
    kinds: dict[str, set[bool]] = defaultdict(set)
    for _, stmt in statements:
        defines = isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.Import)
        for name in _bound(stmt, None):
            kinds[name].add(defines)
    functions = {name for name, kind in kinds.items() if kind == {True}}
    functions |= program.course_names - set(kinds)  # torch.allclose(...) changes no torch
    bindings: dict[str, list[tuple[Unit, ast.stmt]]] = defaultdict(list)
    for unit, stmt in statements:
        for name in _bound(stmt, functions):
            bindings[name].append((unit, stmt))
    return bindings


def _reach(bindings: dict, start: str) -> dict[int, tuple[Unit, ast.stmt]]:
    todo, seen, found = [start], set(), {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for unit, stmt in bindings.get(name, ()):
            if id(stmt) not in found:
                found[id(stmt)] = (unit, stmt)
                todo += free_names(stmt)
    return found


class KernelPath:
    """The instructions' rules over one reached statement; a @triton.jit body is read as
    kernel code (Triton's `.to`, `tl.max`, ... are what it is for)."""

    def __init__(self, program: Program, unit: Unit, functions: tuple[str, ...]) -> None:
        self.p, self.unit, self.functions = program, unit, functions

    def walk(self, node: ast.AST, jit: bool, inputs: frozenset[str]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for part in [*node.decorator_list, node.args, node.returns]:
                if part is not None:
                    self.walk(part, jit, inputs)
            inner = inputs | _inputs(node.name, node.args)
            for stmt in node.body:
                self.walk(stmt, jit or self.is_jit(node), inner)
            return
        if isinstance(node, ast.Lambda):
            parent = self.p.parents.get(id(node))
            targets = parent.targets if isinstance(parent, ast.Assign) else []
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            inputs = inputs | _inputs(names[0] if names else "", node.args)
        self.visit(node, jit, inputs)
        for child in ast.iter_child_nodes(node):
            self.walk(child, jit, inputs)

    def is_jit(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if self.p.qualify(target) & JIT:
                return True
        return False

    def flag(self, rule: str | None, node: ast.AST, what: str) -> None:
        if rule:
            self.p.flag(rule, self.unit, node, what, self.functions)

    def visit(self, node: ast.AST, jit: bool, inputs: frozenset[str]) -> None:
        loads = isinstance(getattr(node, "ctx", ast.Load()), ast.Load)
        if isinstance(node, ast.Name | ast.Attribute | ast.Call) and loads:
            if (not isinstance(node, ast.Call) or called(node, "getattr")) and self.p.outermost(
                node
            ):
                for name in sorted(self.p.qualify(node)):
                    self.flag(path_rule(name, jit), node, f"{_uses(self.p, node)} {name}")
        if isinstance(node, ast.Attribute) and loads:
            self.attribute(node, node.value, node.attr, jit)
        if isinstance(node, ast.Call) and called(node, "getattr") and len(node.args) > 1:
            name = literal(node.args[1])
            if name:
                self.attribute(node, node.args[0], name, jit)
        if inputs and not jit:
            self.input_use(node, inputs)

    def attribute(self, node: ast.AST, base: ast.AST, attr: str, jit: bool) -> None:
        """A method of an object the screen cannot name (a tensor, most likely)."""
        if self.p.qualify(base):
            return  # a module's attribute (torch.cuda, math.log2): path_rule reads those
        what = f"{_uses(self.p, node)} .{attr}()"
        if jit:
            if attr in JIT_COPIES:
                self.flag("tensor-copy", node, what)
            elif attr in SOFTMAX:
                self.flag("torch-compute", node, what)
        elif attr in SOFTMAX or attr in MATH:
            self.flag("torch-compute", node, what)
        elif attr in COPIES:
            self.flag("tensor-copy", node, what)

    def input_use(self, node: ast.AST, inputs: frozenset[str]) -> None:
        """Torch arithmetic or copies with the input tensor itself (x * 1, y[:] = x)."""

        def named(n: ast.AST) -> str | None:
            return n.id if isinstance(n, ast.Name) and n.id in inputs else None

        if isinstance(node, ast.BinOp):
            for side in (node.left, node.right):
                if named(side):
                    self.flag("torch-compute", node, f"computes with {side.id} in torch")
        elif isinstance(node, ast.UnaryOp) and named(node.operand):
            self.flag("torch-compute", node, f"computes with {node.operand.id} in torch")
        elif isinstance(node, ast.Call) and any(named(a) for a in node.args):
            if isinstance(node.func, ast.Name) and node.func.id in BUILTIN_MATH:
                self.flag("torch-compute", node, f"calls {node.func.id}() on the input")
            for name in sorted(self.p.qualify(node.func)):
                if name.split(".")[0] not in ("torch", "triton", "learning"):
                    self.flag("torch-compute", node, f"computes on the input with {name}")
        elif isinstance(node, ast.Subscript) and named(node.value):
            self.flag("tensor-copy", node, f"indexes {node.value.id} in torch")
        elif isinstance(node, ast.Assign) and named(node.value):
            if any(isinstance(t, ast.Subscript) for t in node.targets):
                self.flag("tensor-copy", node, f"copies {node.value.id} with a slice store")


def _inputs(name: str, args: ast.arguments) -> frozenset[str]:
    count = INPUTS.get(name, 0)
    return frozenset(a.arg for a in (args.posonlyargs + args.args)[:count])
