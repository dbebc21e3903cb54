"""Tests for loading a student's implementation from a .py file or a notebook."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest
import torch
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from learning.workshops.checking.loader import LoadError, load_function, notebook_definitions

TEST_CELL = {"nbgrader": {"grade": True, "solution": False, "grade_id": "t", "points": 1}}
SOLUTION_CELL = {"nbgrader": {"grade": False, "solution": True, "grade_id": "s"}}
GRADED_SOLUTION_CELL = {"nbgrader": {"grade": True, "solution": True, "grade_id": "g"}}


def write_notebook(path: Path, *cells) -> Path:
    """A notebook at `path` with `cells`: code sources, (source, metadata) pairs, or cells."""
    built = []
    for cell in cells:
        if isinstance(cell, str):
            cell = new_code_cell(cell)
        elif isinstance(cell, tuple):
            cell = new_code_cell(cell[0], metadata=cell[1])
        built.append(cell)
    nbformat.write(new_notebook(cells=built), path)
    return path


def statements(source: str) -> list[str]:
    """The top-level statements of `source`, normalised by ast."""
    return [ast.unparse(node) for node in ast.parse(source).body]


def definitions_of(tmp_path: Path, *cells) -> list[str]:
    return statements(notebook_definitions(write_notebook(tmp_path / "nb.ipynb", *cells)))


# --- notebook_definitions -------------------------------------------------------------


def test_imports_are_kept(tmp_path):
    """Are `import` and `from ... import` statements kept?"""
    kept = definitions_of(tmp_path, "import math\nfrom os import path as p")
    assert kept == ["import math", "from os import path as p"]


def test_functions_are_kept_with_their_decorators(tmp_path):
    """Is a @triton.jit kernel kept together with its decorator?"""
    kept = definitions_of(
        tmp_path,
        "import triton\n\n@triton.jit\ndef kernel(X):\n    pass",
    )
    assert kept == ["import triton", "@triton.jit\ndef kernel(X):\n    pass"]


def test_classes_are_kept(tmp_path):
    """Is a class definition kept?"""
    kept = definitions_of(tmp_path, "class Config:\n    block = 128")
    assert kept == ["class Config:\n    block = 128"]


def test_call_free_assignments_are_kept(tmp_path):
    """Are assignments without calls kept, annotated ones included?"""
    kept = definitions_of(tmp_path, "BLOCK = 128\nNAMES: tuple = ('a', 'b')")
    assert kept == ["BLOCK = 128", "NAMES: tuple = ('a', 'b')"]


def test_assignments_with_calls_are_dropped(tmp_path):
    """Is `x = torch.randn(...)` (a demo input) dropped?"""
    kept = definitions_of(tmp_path, "import torch\nx = torch.randn(3, 4)")
    assert kept == ["import torch"]


def test_calls_and_demos_are_dropped(tmp_path):
    """Are bare calls and demo expressions dropped, leaving the definitions?"""
    kept = definitions_of(
        tmp_path,
        "def f(x):\n    return x",
        "print(f(3))\nf(4)\nassert f(1) == 1",
    )
    assert kept == ["def f(x):\n    return x"]


def test_magic_and_shell_lines_are_dropped(tmp_path):
    """Are `%magic` and `!shell` lines dropped, and the rest of the cell kept?"""
    kept = definitions_of(
        tmp_path,
        "%matplotlib inline\n!pip install triton\nimport math\n%timeit math.sqrt(2)",
    )
    assert kept == ["import math"]


def test_nbgrader_test_cells_are_dropped(tmp_path):
    """Are nbgrader test cells (grade=true, solution=false) left out entirely?"""
    kept = definitions_of(
        tmp_path,
        "def f():\n    return 1",
        ("def hidden_helper():\n    return 2", TEST_CELL),
    )
    assert kept == ["def f():\n    return 1"]


def test_nbgrader_solution_cells_are_kept(tmp_path):
    """Are solution cells kept, autograded (grade=false) and manually graded (grade=true)?"""
    kept = definitions_of(
        tmp_path,
        ("def answer():\n    return 1", SOLUTION_CELL),
        ("def graded_answer():\n    return 2", GRADED_SOLUTION_CELL),
    )
    assert kept == ["def answer():\n    return 1", "def graded_answer():\n    return 2"]


def test_markdown_cells_are_ignored(tmp_path):
    """Is a markdown cell that looks like code left out?"""
    kept = definitions_of(tmp_path, new_markdown_cell("import os"), "import math")
    assert kept == ["import math"]


def test_syntax_error_names_the_cell(tmp_path):
    """Does a syntax error name the notebook, the cell (its number as Jupyter counts, and the
    heading above it, which JupyterLab shows where it shows no numbers) and the line?"""
    path = write_notebook(
        tmp_path / "nb.ipynb",
        new_markdown_cell("# Title"),
        "import math\ndef broken(:\n    pass",
    )
    with pytest.raises(LoadError) as info:
        notebook_definitions(path)
    message = str(info.value)
    assert message.startswith(f"{path}, cell 2 under the heading 'Title', line 2: syntax error (")
    assert message.endswith("); fix that cell.")


def test_syntax_error_in_a_test_cell_is_ignored(tmp_path):
    """Is a broken nbgrader test cell skipped rather than reported (students cannot edit it)?"""
    kept = definitions_of(tmp_path, "import math", ("assert (", TEST_CELL))
    assert kept == ["import math"]


def test_invalid_json_is_refused(tmp_path):
    """Is a file that is not JSON refused with a LoadError that says to re-save it?"""
    path = tmp_path / "nb.ipynb"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(LoadError) as info:
        notebook_definitions(path)
    message = str(info.value)
    assert message.startswith(f"{path} is not a readable notebook (")
    assert message.endswith("); open and save it in Jupyter.")


def test_json_without_cells_is_refused(tmp_path):
    """Is JSON with no "cells" refused with a LoadError?"""
    path = tmp_path / "nb.ipynb"
    path.write_text('{"metadata": {}}', encoding="utf-8")
    with pytest.raises(LoadError, match="is not a readable notebook"):
        notebook_definitions(path)


def test_binary_file_is_refused(tmp_path):
    """Is a file that is not UTF-8 text refused with a LoadError?"""
    path = tmp_path / "nb.ipynb"
    path.write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(LoadError, match="is not a readable notebook"):
        notebook_definitions(path)


def test_cells_that_are_not_objects_are_refused(tmp_path):
    """Is a notebook whose cells are not JSON objects refused with a LoadError?"""
    path = tmp_path / "nb.ipynb"
    path.write_text('{"cells": [1]}', encoding="utf-8")
    with pytest.raises(LoadError, match="is not a readable notebook"):
        notebook_definitions(path)


@pytest.mark.parametrize(
    "source, call, expected",
    [
        ("def differ(a, b):\n    return (\n        a\n        != b\n    )", (2, 3), True),
        ("def rem(a, b):\n    return (\n        a\n        % b\n    )", (7, 4), 3),
    ],
    ids=["not-equal", "modulo"],
)
def test_continuation_lines_starting_with_operators_are_kept(tmp_path, source, call, expected):
    """Does a function whose continuation line starts with != or % compute the same result?"""
    path = write_notebook(tmp_path / "impl.ipynb", source)
    name = source.split("(")[0].removeprefix("def ")
    assert load_function(path, name)(*call) == expected


def test_a_call_after_a_semicolon_is_dropped(tmp_path):
    """On `import math; math.sqrt(-1)`, is the import kept and the demo call dropped?"""
    path = write_notebook(
        tmp_path / "impl.ipynb", "import math; math.sqrt(-1)\ndef f(x):\n  return x"
    )
    assert load_function(path, "f")(5) == 5


# --- load_function --------------------------------------------------------------------


def test_load_function_from_a_py_file(tmp_path):
    """Is the named function returned from a .py file, and does it work?"""
    path = tmp_path / "impl.py"
    path.write_text("def strided_softmax(x, num_warps=4):\n    return x * 2\n")
    assert load_function(path, "strided_softmax")(21) == 42


def test_load_function_from_a_notebook(tmp_path):
    """Is the named function returned from a notebook, its demo cells skipped?"""
    path = write_notebook(
        tmp_path / "impl.ipynb",
        "import math",
        "def strided_softmax(x, num_warps=4):\n    return math.floor(x)",
        "strided_softmax(undefined_demo_input)",
    )
    assert load_function(path, "strided_softmax")(2.5) == 2


def test_missing_function_is_named(tmp_path):
    """Does a file without the function give a LoadError naming the function?"""
    path = tmp_path / "impl.py"
    path.write_text("def other(x):\n    return x\n")
    with pytest.raises(LoadError) as info:
        load_function(path, "strided_softmax")
    assert str(info.value) == f"{path} does not define a function strided_softmax(x, num_warps=4)."


def test_a_name_that_is_not_callable_is_refused(tmp_path):
    """Is `strided_softmax = 3` refused like a missing function?"""
    path = tmp_path / "impl.py"
    path.write_text("strided_softmax = 3\n")
    with pytest.raises(LoadError, match=r"does not define a function strided_softmax\("):
        load_function(path, "strided_softmax")


def test_missing_file_is_refused(tmp_path):
    """Does a path that does not exist give a LoadError that says to pass --impl?"""
    path = tmp_path / "nowhere.py"
    with pytest.raises(LoadError) as info:
        load_function(path, "strided_softmax")
    assert str(info.value) == f"{path} does not exist; pass --impl with your .py file or notebook."


def test_other_suffix_is_refused(tmp_path):
    """Is a file that is neither .py nor .ipynb refused?"""
    path = tmp_path / "impl.txt"
    path.write_text("def strided_softmax(x):\n    return x\n")
    with pytest.raises(LoadError) as info:
        load_function(path, "strided_softmax")
    assert str(info.value) == f"{path} is neither a .py file nor a notebook (.ipynb)."


def test_module_raising_at_import_names_the_exception(tmp_path):
    """Does a module that raises while loading give a LoadError naming the exception type?"""
    path = tmp_path / "impl.py"
    path.write_text("raise RuntimeError('no GPU here')\n")
    with pytest.raises(LoadError) as info:
        load_function(path, "strided_softmax")
    assert str(info.value) == f"{path} raised RuntimeError while loading: no GPU here"


def test_syntax_error_in_a_py_file_names_the_line(tmp_path):
    """Does a .py with a syntax error give a LoadError with the line number?"""
    path = tmp_path / "impl.py"
    path.write_text("import math\ndef broken(:\n    pass\n")
    with pytest.raises(LoadError) as info:
        load_function(path, "strided_softmax")
    assert str(info.value).startswith(f"{path}, line 2: syntax error (")


KERNEL_NOTEBOOK = (
    "import torch\nimport triton\nimport triton.language as tl",
    "@triton.jit\n"
    "def double_kernel(X, Y, N, BLOCK: tl.constexpr):\n"
    "    cols = tl.arange(0, BLOCK)\n"
    "    mask = cols < N\n"
    "    tl.store(Y + cols, 2 * tl.load(X + cols, mask=mask), mask=mask)",
    "def double(x, num_warps=4):\n"
    "    y = torch.empty_like(x)\n"
    "    double_kernel[(1,)](x, y, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))\n"
    "    return y",
    "double(torch.ones(3))  # a demo cell",
    ("assert False, 'a test cell'", TEST_CELL),
)


def test_notebook_triton_kernel_really_runs(tmp_path):
    """Does a @triton.jit kernel defined in a notebook load, launch and compute?"""
    path = write_notebook(tmp_path / "impl.ipynb", *KERNEL_NOTEBOOK)
    double = load_function(path, "double")
    x = torch.arange(5.0, device="cuda" if torch.cuda.is_available() else "cpu")
    assert double(x).tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
