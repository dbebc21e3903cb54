"""The source of a submission's Triton kernels, and nothing else of it: what the clean room loads.

The trusted side replays a submission's kernel launches in a clean room (`replay`) that must
not run the notebook's other code: its wrappers, its class bodies, its `triton.heuristics`
functions, anything that could compute the answer in Python. From the notebook (or `.py`)
this module keeps, read with `ast` and never run here:

- every top-level `def` decorated with `@triton.jit` (with or without options, under
  `@triton.autotune`/`@triton.heuristics`, whose configs need not run: a recorded launch
  carries every constexpr they set), written back without its decorators;
- the imports from `triton` and `math`, and the module-level constants the kernels read when
  they are literals, arithmetic on them, or `tl.constexpr(...)`, `float(...)`, `math.*` of
  such values.

Each kernel body is held to the part of the language Triton compiles (`refusal`): names its
own, the kernels', the constants', the imports' and a few builtins; `tl.*` and `math.*`
through their public names; tensor methods and fields, never `.handle` (the interpreter's
numpy array); no import, nested function, class, `try` or `with`. Triton's interpreter runs a
kernel body as Python, so without this a body could reach memory or modules in the clean
room; with it, what the replay computes is what a GPU would. A kernel outside that part is
not replayed, and the grade is held for an instructor's review with the reason.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import types
from dataclasses import dataclass, field
from pathlib import Path

import triton
import triton.language as tl
from triton.runtime.jit import KernelInterface

from learning.workshops.checking.loader import LoadError, code_trees

JIT = frozenset({"triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit"})
WRAPPERS = frozenset(
    {
        "triton.autotune",
        "triton.heuristics",
        "triton.runtime.autotune",
        "triton.runtime.heuristics",
        "triton.runtime.autotuner.autotune",
        "triton.runtime.autotuner.heuristics",
    }
)
"""Decorators over `@triton.jit` whose work a recorded launch already carries."""
JIT_OPTIONS = frozenset(
    {"do_not_specialize", "do_not_specialize_on_alignment", "debug", "noinline"}
)
MODULES = ("triton", "math")
LANGUAGE_MODULES = ("triton.", "learning.workshops.notebook.interpreter")
"""Where the functions and classes a kernel may use through `triton.language` come from: the
language's own, or the interpreter's stand-ins for them (Triton's, and the course's, which
`interpreter.install` sets), which stay on `triton.language` once it has run a kernel."""
"""The only modules whose imports the clean room keeps."""
BUILTINS = frozenset(
    "range min max float int bool len abs isinstance print tuple zip enumerate".split()
)
"""Python builtins a kernel may call: Triton gives each a meaning when it compiles."""
TRITON_HELPERS = frozenset({"cdiv", "next_power_of_2", "language"})
"""Names of `triton` itself, outside `triton.language`, that a kernel may use."""
INSTANCE_ATTRIBUTES = frozenset(
    "dtype shape type numel element_ty primitive_bitwidth value name int_bitwidth "
    "fp_mantissa_width exponent_bias itemsize scalar".split()
)
NEVER = frozenset({"handle", "to_ir", "mangle"})
"""Attributes that reach the interpreter's own objects (numpy arrays, IR builders)."""
REFUSED_NODES = {
    ast.Import: "an import",
    ast.ImportFrom: "an import",
    ast.Global: "a global statement",
    ast.Nonlocal: "a nonlocal statement",
    ast.ClassDef: "a class",
    ast.FunctionDef: "a nested function",
    ast.AsyncFunctionDef: "a nested function",
    ast.Lambda: "a lambda",
    ast.Try: "a try statement",
    ast.With: "a with statement",
    ast.AsyncWith: "a with statement",
    ast.AsyncFor: "an async loop",
    ast.Delete: "a del statement",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a generator",
    ast.Dict: "a dict",
    ast.Set: "a set",
    ast.Starred: "a starred argument",
    ast.NamedExpr: "an assignment expression",
    ast.Match: "a match statement",
}
"""Python that Triton does not compile, with the words a refusal uses for it."""


def _value_attributes() -> frozenset[str]:
    """Every public method and field of Triton's tensors, dtypes and constexprs."""
    names = set(INSTANCE_ATTRIBUTES)
    for kind in (tl.tensor, tl.dtype, tl.pointer_type, tl.block_type, tl.constexpr):
        names |= {n for n in dir(kind) if not n.startswith("_")}
    return frozenset(names - NEVER)


VALUE_ATTRIBUTES = _value_attributes()


@dataclass(frozen=True)
class KernelSource:
    """A submission's kernels as the clean room loads them: `text`, a module of imports,
    constants and undecorated `def`s, and `kernels`, each replayable kernel's `triton.jit`
    options; `refused` says why each other kernel is not replayed; `where` where each kernel
    is defined, as its author finds it."""

    text: str
    kernels: dict[str, dict] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)
    unreadable: str | None = None  # why the submission's source could not be read

    def why_not(self, name: str) -> str | None:
        """Why the kernel `name` cannot be replayed, or None when it can."""
        if self.unreadable:
            return self.unreadable
        if name in self.kernels:
            return None
        if name in self.refused:
            return self.refused[name]
        return (
            f"the kernel {name} is not a top-level @triton.jit function of the notebook, so "
            "the clean room has no source for it"
        )


def kernel_source(path: Path) -> KernelSource:
    """The kernels of the notebook or `.py` at `path`; LoadError when it cannot be read."""
    units = [(where, tree) for where, tree in code_trees(Path(path))]
    return _Extract(units).result()


def submission_kernels(path: Path) -> KernelSource:
    """`kernel_source(path)`, or, when the source cannot be read, a KernelSource that says
    so for every kernel (the child then fails to load it too, and says why)."""
    try:
        return kernel_source(path)
    except (LoadError, SyntaxError, ValueError, RecursionError) as exc:
        why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        return KernelSource("", unreadable=f"the submission's source could not be read: {why}")


class _Extract:
    """One pass over the top-level statements of every code cell, in order."""

    def __init__(self, units: list[tuple[str, ast.Module]]) -> None:
        self.aliases: dict[str, str] = {}
        self.constants: set[str] = set()
        self.unsafe: dict[str, str] = {}  # module-level names the clean room cannot rebuild
        self.parts: list[str] = []
        self.functions: dict[str, tuple[ast.FunctionDef, str, dict]] = {}
        self.refused: dict[str, str] = {}
        for where, tree in units:
            for stmt in tree.body:
                self.statement(stmt, where)

    def statement(self, stmt: ast.stmt, where: str) -> None:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            self.imports(stmt)
        elif isinstance(stmt, ast.FunctionDef):
            self.function(stmt, where)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if len(names) == len(targets) == 1:
                self.constant(names[0], stmt.value, where)
            else:
                self.forget(targets, where)
        elif isinstance(stmt, ast.ClassDef | ast.AsyncFunctionDef):
            self.forget([ast.Name(stmt.name)], where)
        else:
            self.forget([stmt], where)

    def imports(self, stmt: ast.Import | ast.ImportFrom) -> None:
        for alias in stmt.names:
            if isinstance(stmt, ast.Import):
                full, bound = alias.name, alias.asname or alias.name.split(".")[0]
                full = full if alias.asname else bound
            else:
                if stmt.level or not stmt.module or alias.name == "*":
                    continue
                full, bound = f"{stmt.module}.{alias.name}", alias.asname or alias.name
            if full.split(".")[0] not in MODULES:
                self.forget([ast.Name(bound)], "an import")
                continue
            one = ast.Import([alias]) if isinstance(stmt, ast.Import) else None
            one = one or ast.ImportFrom(stmt.module, [alias], 0)
            self.parts.append(ast.unparse(one))
            self.aliases[bound] = full
            self.constants.discard(bound)
            self.unsafe.pop(bound, None)
            self.functions.pop(bound, None)

    def constant(self, name: str, value: ast.expr, where: str) -> None:
        why = self.expression(value, set())
        self.aliases.pop(name, None)
        self.functions.pop(name, None)
        if why is None:
            self.parts.append(f"{name} = {ast.unparse(value)}")
            self.constants.add(name)
            self.unsafe.pop(name, None)
        else:
            self.constants.discard(name)
            self.unsafe[name] = f"{where}: {why}"

    def forget(self, targets: list[ast.expr], where: str) -> None:
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    self.aliases.pop(node.id, None)
                    self.constants.discard(node.id)
                    self.functions.pop(node.id, None)
                    self.unsafe[node.id] = f"{where}: it is set by code the clean room does not run"

    def function(self, node: ast.FunctionDef, where: str) -> None:
        self.aliases.pop(node.name, None)
        self.constants.discard(node.name)
        options, why = self.decorators(node)
        if options is None:
            self.functions.pop(node.name, None)
            self.unsafe[node.name] = f"{where}: a plain Python function"
            return
        self.unsafe.pop(node.name, None)
        self.functions[node.name] = (node, f"{where}, line {node.lineno}", options)
        if why:
            self.refused[node.name] = why
        else:
            self.refused.pop(node.name, None)

    def decorators(self, node: ast.FunctionDef) -> tuple[dict | None, str | None]:
        """(the triton.jit options, or None when it is no kernel; why it is not replayed)."""
        options, why = None, None
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            name = self.dotted(call.func if call else decorator)
            if name in JIT:
                options, bad = _jit_options(call)
                why = why or bad
            elif name not in WRAPPERS:
                why = why or f"it is decorated with {ast.unparse(decorator)[:80]}"
        return options, why

    def dotted(self, node: ast.expr) -> str | None:
        """The full dotted name `node` stands for through the imports, or None."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.aliases:
            return None
        return ".".join([self.aliases[node.id], *reversed(parts)])

    def expression(self, node: ast.expr, local: set[str]) -> str | None:
        """Why `node` (in a kernel with locals `local`, or at module level) is outside the
        part of Python the clean room replays, or None."""
        return _Subset(self, local).why(node)

    def result(self) -> KernelSource:
        kernels, refused, where = {}, {}, {}
        jitted = set(self.functions)
        body = []
        for name, (node, place, options) in self.functions.items():
            where[name] = place
            why = self.refused.get(name) or _Subset(self, _locals(node), jitted).why(node)
            if why:
                refused[name] = f"{name} ({place}) {why}"
                continue
            kernels[name] = options
            body.append(_undecorated(node))
        for name in kernels:  # a kernel that calls a refused one cannot run either
            called = {n.id for n in ast.walk(self.functions[name][0]) if isinstance(n, ast.Name)}
            bad = sorted(called & set(refused))
            if bad:
                refused[name] = f"{name} ({where[name]}) calls {bad[0]}, which is not replayed"
        kernels = {n: o for n, o in kernels.items() if n not in refused}
        text = "\n".join([*self.parts, "", *body]) + "\n"
        return KernelSource(text, kernels, refused, where)


def _jit_options(call: ast.Call | None) -> tuple[dict, str | None]:
    if call is None:
        return {}, None
    options = {}
    for keyword in call.keywords:
        try:
            value = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            value = None
        if keyword.arg not in JIT_OPTIONS or value is None:
            return {}, f"it passes @triton.jit the option {keyword.arg}"
        options[keyword.arg] = value
    if call.args:
        return {}, "it passes @triton.jit a positional argument"
    return options, None


def _locals(node: ast.FunctionDef) -> set[str]:
    args = node.args
    every = args.posonlyargs + args.args + args.kwonlyargs
    names = {a.arg for a in every}
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and not isinstance(child.ctx, ast.Load):
            names.add(child.id)
    return names


def _undecorated(node: ast.FunctionDef) -> str:
    """The `def` as source, without its decorators (the clean room applies `triton.jit`)."""
    bare = copy.copy(node)
    bare.decorator_list = []
    return ast.unparse(bare)


class _Subset:
    """Whether a kernel (or a constant's expression) stays inside what Triton compiles."""

    def __init__(self, extract: _Extract, local: set[str], jitted: set[str] = frozenset()) -> None:
        self.x, self.local, self.jitted = extract, local, jitted

    def why(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.FunctionDef):
            parts = [*node.args.defaults, *[d for d in node.args.kw_defaults if d]]
            every = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            parts += [a.annotation for a in every if a.annotation is not None]
            if node.args.vararg or node.args.kwarg:
                return f"at line {node.lineno} takes *args or **kwargs"
            return self.first([*parts, *node.body])
        return self.first([node])

    def first(self, nodes: list[ast.AST]) -> str | None:
        for top in nodes:
            for node in ast.walk(top):
                why = self.node(node)
                if why:
                    return f"at line {getattr(node, 'lineno', '?')} {why}"
        return None

    def node(self, node: ast.AST) -> str | None:
        for kind, words in REFUSED_NODES.items():
            if isinstance(node, kind):
                return f"uses {words}, which Triton does not compile"
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            return self.name(node.id)
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.Call) and not isinstance(node.func, ast.Name | ast.Attribute):
            return "calls the result of an expression"
        return None

    def name(self, name: str) -> str | None:
        known = self.local | self.jitted | self.x.constants | set(self.x.aliases) | BUILTINS
        if name in known:
            return None
        if name in self.x.unsafe:
            return f"reads {name}, which the clean room cannot rebuild ({self.x.unsafe[name]})"
        return f"reads {name}, which is not a kernel, an import from triton or math, or a constant"

    def attribute(self, node: ast.Attribute) -> str | None:
        if node.attr.startswith("_"):
            return f"uses .{node.attr}"
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in self.x.aliases and root.id not in self.local:
            return _path(self.x.dotted(node))  # each link of the chain: ast.walk meets them all
        if node.attr not in VALUE_ATTRIBUTES:
            return f"uses .{node.attr}, which is not a method or field of a Triton tensor"
        return None


def _path(dotted: str | None) -> str | None:
    """Why the dotted name (through an import) is outside what a kernel may use, or None."""
    if dotted is None:
        return "uses a name the clean room cannot resolve"
    parts = dotted.split(".")
    if any(p.startswith("_") for p in parts):
        return f"uses {dotted}"
    if parts[0] == "triton" and len(parts) > 1 and parts[1] not in TRITON_HELPERS:
        return f"uses {dotted}, which is not part of triton.language"
    try:
        value = importlib.import_module(parts[0])
        for index, part in enumerate(parts[1:], start=1):
            if not _passable(value):  # a dtype's or a constexpr's field, past the modules
                if not _usable(value) or any(p not in VALUE_ATTRIBUTES for p in parts[index:]):
                    return f"uses {dotted}, which is not part of triton.language"
                return None
            value = getattr(value, part)
    except (ImportError, AttributeError):
        return f"uses {dotted}, which this Triton does not have"
    return None if _usable(value) else f"uses {dotted}, which is not part of triton.language"


def _language_module(value: object) -> bool:
    name = getattr(value, "__name__", "")
    return name in ("triton", "math") or name.startswith("triton.language")


def _passable(value: object) -> bool:
    """Whether a name may be looked up in `value`: a Triton language module, or math."""
    return isinstance(value, types.ModuleType) and _language_module(value)


def _usable(value: object) -> bool:
    """Whether a kernel may use `value`: a language module, builtin, kernel, dtype or class
    of `triton.language`, a number, or one of math's functions."""
    if isinstance(value, types.ModuleType):
        return _language_module(value)
    if isinstance(value, int | float | str | bool | tl.dtype | tl.constexpr | KernelInterface):
        return True
    if value in (triton.cdiv, triton.next_power_of_2):
        return True
    module = getattr(value, "__module__", "") or ""
    if inspect.isclass(value) or inspect.isfunction(value) or inspect.isbuiltin(value):
        return module == "math" or module.startswith(LANGUAGE_MODULES)
    return False
