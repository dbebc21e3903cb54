"""Load a student's implementation from a `.py` file or a notebook.

Triton reads a kernel's source with `inspect`, so code must come from a real file: a
notebook's definitions are written to a temporary module first. From a notebook only the
definitions are taken (imports, functions, classes, assignments without calls), so demo
cells and unfinished exercises elsewhere do not stop the check.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
import tempfile
from pathlib import Path
from types import ModuleType


class LoadError(Exception):
    """The implementation could not be loaded; the message says why and what to do."""


def notebook_definitions(path: Path) -> str:
    """The definitions in a notebook's code cells, as one module's source."""
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        cells = notebook["cells"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise LoadError(
            f"{path} is not a readable notebook ({exc}); open and save it in Jupyter."
        ) from None
    parts = []
    for number, cell in enumerate(cells, start=1):
        if cell.get("cell_type") != "code" or _is_test_cell(cell):
            continue
        source = "".join(cell.get("source", []))
        kept = _definitions(source, path, number)
        if kept:
            parts.append(f"# --- cell {number} ---\n{kept}")
    return "\n\n".join(parts) + "\n"


def _is_test_cell(cell: dict) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


def _definitions(source: str, path: Path, number: int) -> str:
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    text = "\n".join(lines)
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise LoadError(
            f"{path}, cell {number}, line {exc.lineno}: syntax error ({exc.msg}); fix that cell."
        ) from None
    kept = [node for node in tree.body if _is_definition(node)]
    return "\n\n".join(_segment(text, node) for node in kept)


def _segment(text: str, node: ast.stmt) -> str:
    """A statement's source, decorators included."""
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return "\n".join(text.splitlines()[first - 1 : node.end_lineno])


def _is_definition(node: ast.stmt) -> bool:
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
        return True
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        return node.value is not None and not any(
            isinstance(n, ast.Call) for n in ast.walk(node.value)
        )
    return False


def load_module(path: Path) -> ModuleType:
    """Import the implementation at `path` (a `.py` file or a notebook) as a module."""
    if not path.is_file():
        raise LoadError(f"{path} does not exist; pass --impl with your .py file or notebook.")
    if path.suffix == ".ipynb":
        folder = Path(tempfile.mkdtemp(prefix="i1-impl-"))
        module_path = folder / f"{path.stem}_definitions.py"
        module_path.write_text(notebook_definitions(path), encoding="utf-8")
    elif path.suffix == ".py":
        module_path = path
    else:
        raise LoadError(f"{path} is neither a .py file nor a notebook (.ipynb).")
    name = f"student_{module_path.stem}"
    spec = importlib.util.spec_from_file_location(name, module_path)
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


def load_function(path: Path, name: str):
    """The callable `name` defined by the implementation at `path`."""
    module = load_module(path)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise LoadError(f"{path} does not define a function {name}(x, num_warps=4).")
    return fn
