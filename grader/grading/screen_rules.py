"""The rules of the source screen (`grader.grading.screen`), read from the code with `ast`.

Two kinds. The instructions' rules hold on the kernel path only: the code reachable from the
graded functions (`strided_softmax`, `launch_softmax`, `copy_rows`, the optional two and
`StridedSoftmax`) through the names they use, their decorators, defaults, helpers, classes
and whatever rebinds those names. Torch may compare results elsewhere in a notebook. The
tampering rules hold everywhere, since a cell's top level runs when the notebook loads.

Names are resolved through imports and plain aliases (`import sys as s`, `F = torch.nn.
functional`, `getattr(torch, "softmax")`, `__import__("os")`); a lookup the screen cannot
resolve (a computed attribute name, `globals()`, `exec`) is itself flagged, since dynamic
lookups are how a static screen is dodged. The rules follow the public catalogues of kernel
reward hacks (torch fallbacks, copies before the kernel, side streams, threads, tensor
subclasses and dispatch modes, patched timers and hooks, obfuscated `exec`), written here for
this course's checker.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

WHY = {
    "torch-compute": "the direct path must compute in your Triton kernel, not in torch",
    "tensor-copy": "the direct path reads x where it lies, through its strides, with no copy",
    "checker-module": "the checker's own modules are not yours to call or change",
    "interpreter-access": "reaching into Python's interpreter can switch the checks off",
    "native-code": "native code can rewrite the checker's memory",
    "raw-descriptor": "raw descriptors and sockets reach the grader's report channel",
    "process": "other processes, threads and signals run outside the checks",
    "side-stream": "work on a side stream or a replayed graph hides from the checks",
    "dispatch-internals": "torch's dispatch modes and Triton's launch hooks are how the "
    "checker watches your code",
    "monkeypatch": "changing library or course objects changes what the checks see",
    "dynamic-code": "code built or looked up at run time cannot be read before grading",
    "ipython": "magics and shell commands run code the grader cannot read",
    "unknown-module": "grading knows only the standard library and the course's packages "
    "(torch, triton, numpy, matplotlib, pandas), not modules written beside the notebook",
}
"""Each rule's id and why it exists, in words a student reads."""

INSTRUCTION_RULES = frozenset({"torch-compute", "tensor-copy"})
"""Rules the workshop's instructions set; every other rule is tampering."""

INPUTS = {
    "copy_rows": 1,
    "launch_softmax": 1,
    "strided_softmax": 1,
    "strided_softmax_": 1,
    "strided_softmax_backward": 2,
}
"""The graded functions, each with how many leading parameters are its input tensors."""
ENTRY_POINTS = frozenset(INPUTS) | {"StridedSoftmax"}

SOFTMAX = frozenset({"softmax", "log_softmax", "softmin", "_softmax", "_log_softmax"})
MATH = frozenset(
    "exp exp_ exp2 log log_ log2 sum amax amin max min logsumexp mean div div_ sub sub_ add_ "
    "mul mul_ true_divide reciprocal sigmoid matmul mm bmm einsum cumsum sort topk clamp "
    "abs neg nan_to_num masked_fill where".split()
)
COPIES = frozenset(
    "contiguous clone to copy_ float half double bfloat16 cpu cuda numpy tolist reshape "
    "flatten ravel new_tensor index_select gather take masked_select repeat tile".split()
)
TORCH_COPIES = frozenset(
    "clone cat concat concatenate stack hstack vstack tensor as_tensor from_numpy".split()
)
JIT_COPIES = frozenset("contiguous clone copy_ numpy tolist cpu cuda".split())
TORCH_MATH_MODULES = ("nn", "special", "ops", "linalg", "fft", "sparse", "masked", "func")
BUILTIN_MATH = frozenset("sum max min abs sorted list tuple iter map".split())

WHOLE_MODULES = {
    **dict.fromkeys(
        "builtins __builtin__ __main__ gc inspect importlib types code codeop runpy pickle "
        "marshal dill cloudpickle atexit faulthandler copyreg site pkgutil zipimport imp _imp "
        "_frozen_importlib".split(),
        "interpreter-access",
    ),
    **dict.fromkeys(
        "ctypes _ctypes cffi cupy numba pycuda cuda mmap resource fcntl posix _posixsubprocess "
        "_io".split(),
        "native-code",
    ),
    **dict.fromkeys(
        "subprocess multiprocessing threading _thread concurrent asyncio pty signal psutil".split(),
        "process",
    ),
    **dict.fromkeys("socket select selectors".split(), "raw-descriptor"),
    "grader": "checker-module",
}
"""Top-level modules no cell may use at all, with the rule each breaks."""

SYS_SAFE = frozenset(
    "version version_info platform executable maxsize byteorder float_info int_info "
    "getsizeof stdout stderr argv implementation hexversion getrecursionlimit "
    "getdefaultencoding path".split()
)
"""Attributes of `sys` a cell may read; any other one (modules, _getframe, settrace, ...) is
flagged."""
OS_RAW = frozenset(
    "fdopen write read dup dup2 open openpty pipe pipe2 close closerange lseek sendfile "
    "writev readv pwrite pread set_inheritable set_blocking ftruncate memfd_create "
    "eventfd".split()
)
OS_PROCESS = frozenset(
    "fork forkpty system popen execl execle execlp execlpe execv execve execvp execvpe "
    "spawnl spawnle spawnlp spawnlpe spawnv spawnve spawnvp spawnvpe posix_spawn "
    "posix_spawnp kill killpg _exit abort setsid setpgid setpgrp register_at_fork".split()
)
CUDA_SIDE = frozenset(
    "Stream stream set_stream ExternalStream StreamContext CUDAGraph graph graphs "
    "make_graphed_callables streams".split()
)
TESTING = "learning.workshops.notebook.testing"
TESTING_PUBLIC = frozenset({"expect_cases", "quiet"})
CHECKER = (
    "learning.workshops.checking",
    "learning.workshops.check",
    "learning.workshops.notebook.interpreter",
)

DUNDER_OK = frozenset({"__init__", "__name__", "__qualname__", "__doc__", "__version__"})
FRAMES = frozenset(
    "f_back f_globals f_locals f_builtins f_code gi_frame cr_frame ag_frame tb_frame tb_next "
    "walk_stack walk_tb _getframe currentframe".split()
)
HOOKS = frozenset(
    "__torch_function__ __torch_dispatch__ launch_enter_hook launch_exit_hook "
    "jit_post_compile_hook jit_cache_hook knobs TorchDispatchMode TorchFunctionMode "
    "DisableTorchFunction DisableTorchFunctionSubclass _pop_mode _push_mode "
    "_disable_current_modes _get_current_dispatch_mode _set_torch_function_mode".split()
)
DYNAMIC = frozenset(
    "eval exec compile globals vars locals breakpoint __import__ __builtins__ __loader__ "
    "__spec__ __build_class__ execfile attrgetter methodcaller".split()
)
LOOKUPS = frozenset({"getattr", "setattr", "delattr"})
MUTATORS = frozenset(
    "update pop popitem setdefault clear append insert extend remove add discard "
    "__setitem__ __delitem__".split()
)
KNOWN_MODULES = frozenset(sys.stdlib_module_names) | frozenset(
    "torch triton numpy matplotlib pandas IPython tqdm scipy seaborn PIL learning".split()
)
"""Top-level modules a cell may import (those the grading environment has for students)."""
MODULE_FILES = (".py", ".pth", ".so", ".pyc")
JIT = frozenset({"triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit"})


COURSE_CELL = "(course)"


@dataclass(frozen=True)
class Unit:
    """The code of one student cell (or of a magic's code inside it), parsed."""

    cell: str
    tree: ast.Module


@dataclass(frozen=True)
class Finding:
    """One rule broken at one line of one cell; `what` names the code that broke it."""

    rule: str
    cell: str
    line: int
    what: str
    functions: tuple[str, ...] = ()  # the graded functions whose kernel path it is on


REEXPORTED = frozenset(
    "sys os io builtins ctypes gc inspect importlib subprocess threading multiprocessing "
    "socket pickle marshal _thread mmap traceback operator".split()
)
"""Modules other modules hand out as attributes (`torch.sys`, `os.sys`, `np.os`): a dotted
name through one is read as a use of that module."""
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
"""Where the `learning` package lives: its re-exports are followed in its own source."""


def _private(segment: str) -> bool:
    return segment.startswith("_") and not (segment.startswith("__") and segment.endswith("__"))


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def qualified_rule(name: str) -> str | None:
    """The tampering rule a use of the dotted name `name` breaks anywhere, or None."""
    parts = name.split(".")
    for at in range(1, len(parts)):
        if parts[at] in REEXPORTED:
            rule = _rule(".".join(parts[at:]))
            if rule:
                return rule
    return _rule(name)


def _rule(name: str) -> str | None:
    parts = name.split(".")
    head, rest = parts[0], parts[1:]
    if head in WHOLE_MODULES:
        return WHOLE_MODULES[head]
    second = rest[0] if rest else ""
    if head == "sys" and rest and second not in SYS_SAFE:
        return "interpreter-access"
    if head == "os":
        if second in OS_RAW:
            return "raw-descriptor"
        if second in OS_PROCESS:
            return "process"
        if second in ("putenv", "unsetenv"):
            return "monkeypatch"
    if name in ("io.FileIO", "traceback.walk_stack", "traceback.walk_tb"):
        return "raw-descriptor" if head == "io" else "interpreter-access"
    if name in ("operator.attrgetter", "operator.methodcaller"):
        return "dynamic-code"
    if head in ("IPython", "ipykernel") and second != "display":
        return "ipython"
    if any(_under(name, prefix) for prefix in CHECKER):
        return "checker-module"
    if _under(name, TESTING) and (not rest[3:] or rest[3] not in TESTING_PUBLIC):
        return "checker-module"
    if head == "torch":
        return _torch_rule(rest)
    if head == "triton" and (
        any(_private(p) for p in rest)
        or second == "knobs"
        or rest[:2] == ["runtime", "interpreter"]
    ):
        return "dispatch-internals"
    return None


def _torch_rule(rest: list[str]) -> str | None:
    if any(_private(p) for p in rest) or rest[:1] in (["overrides"], ["library"]):
        return "dispatch-internals"
    if rest[:2] == ["utils", "cpp_extension"]:
        return "native-code"
    if rest[:1] in (["multiprocessing"], ["distributed"]):
        return "process"
    if rest[:1] in (["load"], ["package"], ["hub"]):
        return "interpreter-access"
    if rest[:1] == ["cuda"] and len(rest) > 1 and rest[1] in CUDA_SIDE:
        return "side-stream"
    return None


def path_rule(name: str, jit: bool) -> str | None:
    """The instructions' rule a use of the dotted name `name` breaks on the kernel path."""
    parts = name.split(".")
    if parts[0] != "torch":
        return "torch-compute" if parts[-1] in SOFTMAX and parts[0] != "triton" else None
    if jit:
        return "torch-compute"
    rest = parts[1:]
    if rest[:1] and rest[0] in TORCH_MATH_MODULES or parts[-1] in SOFTMAX:
        return "torch-compute"
    method = len(rest) == 2 and rest[0] == "Tensor"  # torch.Tensor.contiguous(x)
    if (len(rest) == 1 or method) and rest[-1] in MATH:
        return "torch-compute"
    if len(rest) == 1 and rest[0] in TORCH_COPIES or method and rest[-1] in COPIES:
        return "tensor-copy"
    return None


def canonical(name: str) -> str:
    """`name` with the `learning` package's re-exports followed to where each comes from
    (`learning.workshops.notebook.testing.run_case` is the checker's `run_case`)."""
    parts = name.split(".")
    for _ in range(8):
        if parts[0] != "learning":
            break
        module, at = _module_of(tuple(parts))
        bound = _top_imports(module).get(parts[at]) if module and at < len(parts) else None
        if bound is None:
            break
        parts = bound.split(".") + parts[at + 1 :]
    return ".".join(parts)


def _module_of(parts: tuple[str, ...]) -> tuple[str | None, int]:
    """(source file, index of the first attribute) of the longest module prefix of `parts`."""
    folder, module = PACKAGE_ROOT, None
    for at, part in enumerate(parts):
        if (folder / part / "__init__.py").is_file():
            folder, module = folder / part, str(folder / part / "__init__.py")
        elif (folder / f"{part}.py").is_file():
            return str(folder / f"{part}.py"), at + 1
        else:
            return module, at
    return module, len(parts)


@cache
def _top_imports(path: str) -> dict[str, str]:
    """The names a module of ours binds by import at its top level, and what each is."""
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, ValueError):
        return {}
    package = Path(path).relative_to(PACKAGE_ROOT).with_suffix("").parts
    names = {}
    for stmt in top_statements(tree.body):
        if isinstance(stmt, ast.ImportFrom) and stmt.level:
            base = ".".join(package[: len(package) - stmt.level + (package[-1] == "__init__")])
            stmt = ast.ImportFrom(f"{base}.{stmt.module}" if stmt.module else base, stmt.names, 0)
        names.update(imported(stmt))
    return names


def roots(target: ast.AST) -> Iterator[str]:
    """The names a store into `target` changes: `a` for `a`, `a.b`, `a[i]`, `(a, b)`."""
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Attribute | ast.Subscript | ast.Starred):
        yield from roots(target.value)
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from roots(element)


def top_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, with the bodies of module-level if/for/while/try/with."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If | ast.For | ast.AsyncFor | ast.While):
            yield from top_statements(stmt.body + stmt.orelse)
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            yield from top_statements(stmt.body)
        elif isinstance(stmt, ast.Try | ast.TryStar):
            handlers = [s for h in stmt.handlers for s in h.body]
            yield from top_statements(stmt.body + handlers + stmt.orelse + stmt.finalbody)
        elif isinstance(stmt, ast.Match):
            yield from top_statements([s for case in stmt.cases for s in case.body])


def declared_global(node: ast.AST) -> set[str]:
    """Names a function declares `global` anywhere inside it."""
    return {n for g in ast.walk(node) if isinstance(g, ast.Global) for n in g.names}


def literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def called(node: ast.Call, name: str) -> bool:
    return isinstance(node.func, ast.Name) and node.func.id == name


class Program:
    """Every screened cell's code, with its names resolved, read by the rules."""

    def __init__(
        self,
        units: list[Unit],
        course: list[ast.Module],
        protected: set[str],
        context: list[ast.Module] = (),
    ) -> None:
        self.units = units
        # the course's unlabelled cells as the notebook has them: read for what the graded
        # functions reach through them (launch_softmax -> softmax_kernel), never flagged
        self.context = [Unit(COURSE_CELL, tree) for tree in context]
        self.parents: dict[int, ast.AST] = {}
        for tree in [u.tree for u in units] + course:
            for node in ast.walk(tree):
                for child in ast.iter_child_nodes(node):
                    self.parents[id(child)] = node
        self.aliases: dict[str, set[str]] = defaultdict(set)
        self._imports(course)
        self.course_names = set(self.aliases)  # what the course's cells import
        self.protected = {n: set(self.aliases[n]) for n in protected}
        self._imports([u.tree for u in units])
        self._assignments()
        self.findings: dict[tuple[str, str, int], Finding] = {}

    def _imports(self, trees: list[ast.Module]) -> None:
        for tree in trees:
            for node in ast.walk(tree):
                for bound, full in imported(node):
                    self.aliases[bound].add(canonical(full))

    def _assignments(self) -> None:
        """Plain aliases (`F = torch.nn.functional`), followed until nothing changes."""
        pairs = []
        for unit in self.units:
            for node in ast.walk(unit.tree):
                if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr) and node.value:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    pairs += [(t.id, node.value) for t in targets if isinstance(t, ast.Name)]
        for _ in range(6):
            before = sum(map(len, self.aliases.values()))
            for name, value in pairs:
                self.aliases[name] |= self.qualify(value)
            if sum(map(len, self.aliases.values())) == before:
                return

    def qualify(self, node: ast.AST) -> set[str]:
        """The dotted names `node` may stand for (empty when it is none the screen knows)."""
        if isinstance(node, ast.Name):
            return set(self.aliases.get(node.id, ()))
        if isinstance(node, ast.Attribute):
            return {canonical(f"{q}.{node.attr}") for q in self.qualify(node.value)}
        if isinstance(node, ast.Call) and node.args:
            name = literal(node.args[0])
            if called(node, "__import__") and name:
                return {name}
            if name and {"importlib.import_module"} & self.qualify(node.func):
                return {name}
            attr = literal(node.args[1]) if len(node.args) > 1 else None
            if called(node, "getattr") and attr:
                return {canonical(f"{q}.{attr}") for q in self.qualify(node.args[0])}
        return set()

    def flag(
        self, rule: str, unit: Unit, node: ast.AST, what: str, functions: tuple[str, ...] = ()
    ) -> None:
        line = getattr(node, "lineno", 1)
        key = (rule, unit.cell, line)
        found = self.findings.setdefault(key, Finding(rule, unit.cell, line, what))
        union = tuple(sorted(set(found.functions) | set(functions)))
        self.findings[key] = Finding(rule, unit.cell, line, found.what, union)

    def outermost(self, node: ast.AST) -> bool:
        """Is `node` the whole of a dotted name (not `a` or `a.b` inside `a.b.c`)?"""
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return False
        return not (
            isinstance(parent, ast.Call)
            and called(parent, "getattr")
            and parent.args[:1] == [node]
            and len(parent.args) > 1
            and literal(parent.args[1])
        )


def imported(node: ast.AST) -> Iterator[tuple[str, str]]:
    """(bound name, full dotted name) of each name an import statement binds."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                yield alias.asname, alias.name
            else:
                yield alias.name.split(".")[0], alias.name.split(".")[0]
    elif isinstance(node, ast.ImportFrom):
        module = "." * node.level + (node.module or "")
        for alias in node.names:
            if alias.name != "*":
                yield alias.asname or alias.name, f"{module}.{alias.name}"
