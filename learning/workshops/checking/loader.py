"""Load a student's implementation from a `.py` file or a notebook.

Triton reads a kernel's source with `inspect`, so a notebook's definitions become a module
whose loader serves that source from memory (to `inspect`, `linecache` and tracebacks): no
file is written, so nothing is left behind, even when the student's code crashes the
process. From a notebook only the definitions are taken (imports, functions, classes,
constants), so demo cells and unfinished exercises elsewhere do not stop the check.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.util
import json
import linecache
import sys
from pathlib import Path
from types import ModuleType

from IPython.core.inputtransformer2 import TransformerManager

DEFINITIONS = " (definitions)"
"""The suffix of a notebook's definitions module's file name (`load_module`)."""


class LoadError(Exception):
    """The implementation could not be loaded; the message says why and what to do."""


def notebook_definitions(path: Path) -> str:
    """The definitions in a notebook's code cells, as one module's source."""
    cells = [(where, _parse(text, path, where)) for where, text in _code_cells(path)]
    chosen = definitions_of([tree for _, (_, tree) in cells])
    parts = []
    for (where, (text, _)), nodes in zip(cells, chosen, strict=True):
        kept = [_segment(text, node) for node in nodes]
        if kept:
            parts.append(f"# --- {where} ---\n" + "\n\n".join(kept))
    return "\n\n".join(parts) + "\n"


def code_trees(path: Path) -> list[tuple[str, ast.Module]]:
    """What a child loads from `path`, parsed: (where, tree) of each notebook cell's
    definitions (as `notebook_definitions` keeps them), or of a `.py` file whole."""
    if path.suffix != ".ipynb":
        try:
            text = path.read_text(encoding="utf-8")
            return [(path.name, ast.parse(text))]
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise LoadError(f"{path} is not readable Python ({exc}).") from None
    cells = [(where, _parse(text, path, where)[1]) for where, text in _code_cells(path)]
    kept = definitions_of([tree for _, tree in cells])
    return [(where, ast.Module(body, [])) for (where, _), body in zip(cells, kept, strict=True)]


def _code_cells(path: Path) -> list[tuple[str, str]]:
    """(where, source) of every code cell that is not an nbgrader test cell; `where` names
    the cell as a student finds it: its number and the heading above it."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        found, heading = [], ""
        for number, cell in enumerate(cells, start=1):
            source = cell.get("source", "")
            source = source if isinstance(source, str) else "".join(source)
            meta = cell.get("metadata", {}).get("nbgrader", {})
            is_test = bool(meta.get("grade")) and not meta.get("solution")
            if cell.get("cell_type") == "markdown":
                heading = _heading(source) or heading
            elif cell.get("cell_type") == "code" and not is_test:
                under = f" under the heading '{heading}'" if heading else ""
                found.append((f"cell {number}{under}", source))
        return found
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise LoadError(
            f"{path} is not a readable notebook ({exc}); open and save it in Jupyter."
        ) from None


def _heading(markdown: str) -> str:
    """The last heading line of a markdown cell, without its #s, or ''."""
    lines = [line.lstrip("#").strip() for line in markdown.splitlines() if line.startswith("#")]
    return lines[-1] if lines else ""


def _parse(source: str, path: Path, where: str) -> tuple[str, ast.Module]:
    """A cell's source with IPython syntax (magics, !shell) turned into calls, and its tree."""
    text = TransformerManager().transform_cell(source)
    try:
        return text, ast.parse(text)
    except SyntaxError as exc:
        raise LoadError(
            f"{path}, {where}, line {exc.lineno}: syntax error ({exc.msg}); fix that cell."
        ) from None


def _segment(text: str, node: ast.stmt) -> str:
    """A statement's own source; a definition's with its decorators."""
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        return "\n".join(text.splitlines()[first - 1 : node.end_lineno])
    return ast.get_source_segment(text, node)


def _is_definition(node: ast.stmt, imported: set[str]) -> bool:
    """Imports, functions, classes, and constants (literals or attributes of imports)."""
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
        return True
    if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
        return False
    value = node.value
    while isinstance(value, ast.Attribute):
        value = value.value
    if value is not node.value and isinstance(value, ast.Name):
        return value.id in imported  # e.g. DTYPE = torch.float32
    try:
        ast.literal_eval(node.value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False  # demo values (tensors, calls) stay out
    return True


class DefinitionsLoader(importlib.abc.Loader):
    """Loads a module from source text held in memory, under a file name that names where
    it came from; `get_source` and `linecache` give that text to whoever asks (`inspect`,
    Triton, tracebacks), as they would a file's."""

    def __init__(self, source: str, filename: str) -> None:
        self.source, self.filename = source, filename

    def get_source(self, name: str) -> str:
        return self.source

    def exec_module(self, module: ModuleType) -> None:
        lines = self.source.splitlines(keepends=True)
        linecache.cache[self.filename] = (len(self.source), None, lines, self.filename)
        exec(compile(self.source, self.filename, "exec", dont_inherit=True), module.__dict__)


def load_module(path: Path) -> ModuleType:
    """Import the implementation at `path` (a `.py` file or a notebook) as a module."""
    if not path.is_file():
        raise LoadError(f"{path} does not exist; pass --impl with your .py file or notebook.")
    if path.suffix == ".ipynb":
        name = f"student_{path.stem}_definitions"
        loader = DefinitionsLoader(notebook_definitions(path), f"{path.resolve()}{DEFINITIONS}")
        spec = importlib.util.spec_from_loader(name, loader, origin=loader.filename)
    elif path.suffix == ".py":
        name = f"student_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
    else:
        raise LoadError(f"{path} is neither a .py file nor a notebook (.ipynb).")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise LoadError(f"{path}, line {exc.lineno}: syntax error ({exc.msg}).") from None
    except Exception as exc:
        raise LoadError(
            f"{path} raised {type(exc).__name__} while loading: {exc}".splitlines()[0]
        ) from None
    return module


def place(filename: str, lineno: int) -> str:
    """Where line `lineno` of `filename` is, as its author finds it: "impl.py line 12", or
    for a notebook's definitions the cell it came from ("cell 18 under the heading ...")."""
    if not filename.endswith(DEFINITIONS):
        return f"{Path(filename).name} line {lineno}"
    lines = linecache.getlines(filename)
    for line in reversed(lines[: max(0, lineno - 1)]):
        if line.startswith("# --- ") and line.rstrip().endswith(" ---"):
            return f"{Path(filename.removesuffix(DEFINITIONS)).name}, {line.strip()[6:-4]}"
    return f"{Path(filename.removesuffix(DEFINITIONS)).name}"


def load_function(path: Path, name: str):
    """The callable `name` defined by the implementation at `path`."""
    return function_in(load_module(path), path, name)


def function_in(module: ModuleType, path: Path, name: str):
    """The callable `name` of `module`, loaded from `path`; LoadError when there is none."""
    fn = getattr(module, name, None)
    if not callable(fn):
        raise LoadError(f"{path} does not define a function {name}(x, num_warps=4).")
    return fn


def definitions_of(trees: list[ast.Module]) -> list[list[ast.stmt]]:
    """Of each cell's tree (every code cell but the test cells, in order), the statements
    a notebook's definitions keep: imports, functions, classes and constants, a constant
    being a literal or an attribute of a name some cell imports. The source screen reads
    these, as the checks' children run them (`learning.workshops.screen`)."""
    imported = {
        (alias.asname or alias.name).split(".")[0]
        for tree in trees
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    return [[node for node in tree.body if _is_definition(node, imported)] for tree in trees]
