"""Tests for the assertions notebook test cells use: quiet runs and case failures with hints."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import warnings
from pathlib import Path

import nbformat
import pytest

from grader import zoo
from grader.edits import apply
from grader.reference import strided_softmax
from grader.zoo.bug import REFERENCE
from learning.workshops.checking.cases import PUBLIC_CASES, suite
from learning.workshops.checking.hints import MESSAGES
from learning.workshops.contracts import default_device
from learning.workshops.notebook import pictures, testing
from learning.workshops.notebook.testing import cases_report, expect_cases, quiet


def buggy(bug_name: str, folder):
    """The zoo's `bug_name` implementation of strided_softmax, imported from `folder`."""
    bug = next(b for b in zoo.BUGS if b.name == bug_name)
    path = folder / f"{bug_name.replace('-', '_')}.py"
    path.write_text(apply(REFERENCE.read_text(), bug.edits))
    spec = importlib.util.spec_from_file_location(f"zoo_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.strided_softmax


# --- quiet ----------------------------------------------------------------------------


def test_quiet_captures_warnings(capfd):
    """Is a warnings.warn inside quiet() captured as text, and kept off the real stderr?"""
    with quiet() as err:
        warnings.warn("TRITON_DEFAULT_FP_FUSION is unset", UserWarning, stacklevel=1)
    assert err.getvalue() == "UserWarning: TRITON_DEFAULT_FP_FUSION is unset\n"
    assert capfd.readouterr().err == ""


def test_quiet_captures_python_stderr(capfd):
    """Is print(..., file=sys.stderr) inside quiet() captured and kept off the real stderr?"""
    with quiet() as err:
        print("from python", file=sys.stderr)
    assert err.getvalue() == "from python\n"
    assert capfd.readouterr().err == ""


def test_quiet_captures_file_descriptor_2(capfd):
    """Is a raw os.write(2, ...) (as C code writes) captured and kept off the real stderr?"""
    with quiet() as err:
        os.write(2, b"from the process\n")
    assert err.getvalue() == "from the process\n"
    assert capfd.readouterr().err == ""


def test_quiet_restores_stderr_afterwards(capfd):
    """After quiet() ends, does stderr reach its destination again?"""
    with quiet():
        pass
    os.write(2, b"after\n")
    print("after too", file=sys.stderr)
    assert capfd.readouterr().err == "after\nafter too\n"


def test_quiet_restores_stderr_when_the_block_raises(capfd):
    """When the block raises, is stderr restored (and the error passed on)?"""
    with pytest.raises(RuntimeError), quiet():
        raise RuntimeError("student bug")
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"


def test_quiet_leaves_stdout_alone(capfd):
    """Does output printed to stdout inside quiet() still reach stdout?"""
    with quiet() as err:
        print("to stdout")
    assert capfd.readouterr().out == "to stdout\n"
    assert err.getvalue() == ""


# --- expect_cases ---------------------------------------------------------------------


def test_expect_cases_passes_the_reference_and_says_so(capsys):
    """Does the reference pass every public case, with one line saying how many?"""
    expect_cases(strided_softmax, "strided_softmax")
    count = len(suite("strided_softmax", PUBLIC_CASES, default_device().type))
    assert capsys.readouterr().out == f"strided_softmax: {count} public cases pass.\n"


def test_expect_cases_runs_only_the_named_cases(capsys):
    """With names given, does it run just those cases?"""
    expect_cases(strided_softmax, "strided_softmax", ["transpose", "slice"])
    assert capsys.readouterr().out == "strided_softmax: 2 public cases pass.\n"


def test_expect_cases_fails_a_buggy_function_with_the_case_and_a_hint(tmp_path):
    """For a kernel that ignores the column stride, does the failure name the case and hint?"""
    fn = buggy("ignores-column-stride", tmp_path)
    with pytest.raises(AssertionError) as info:
        expect_cases(fn, "strided_softmax", ["contiguous", "transpose"])
    lines = str(info.value).splitlines()
    assert lines[0] == "strided_softmax, public cases: 1 of 2 cases fail."
    assert lines[1].startswith(
        "  FAIL transpose: (7, 5) view, strides (1, 7), storage offset 0, float32: "
    )
    assert lines[2] == f"Hint [column-stride]: {MESSAGES['column-stride']}"
    assert lines[3].startswith("Smallest failing view (from case transpose, ")
    assert lines[4] == (
        "    a (2, 2) transpose of a (2, 2) tensor, strides (1, 2), offset 0, float32"
    )
    assert lines[5].startswith("    values: 4 of 4 values differ; first at row 0, column 0")


def test_cases_report_returns_a_pass_line(capsys):
    """For an ungraded cell, does cases_report return expect_cases's line instead of printing?"""
    text = cases_report(strided_softmax, "strided_softmax", ["transpose"])
    assert text == "strided_softmax: 1 public case passes."
    assert capsys.readouterr().out == ""


def test_cases_report_returns_a_failure_instead_of_raising(tmp_path):
    """Does a failing function's report come back as text, with the failing case and its hint,
    so that the ungraded cell does not stop Run All?"""
    fn = buggy("ignores-column-stride", tmp_path)
    lines = cases_report(fn, "strided_softmax", ["contiguous", "transpose"]).splitlines()
    assert lines[0] == "strided_softmax, public cases: 1 of 2 cases fail."
    assert f"Hint [column-stride]: {MESSAGES['column-stride']}" in lines


def test_expect_cases_skips_the_smallest_view_while_nbgrader_grades(tmp_path, monkeypatch):
    """While nbgrader executes the notebook, does a failure stop at the hint (no search)?"""
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    fn = buggy("ignores-column-stride", tmp_path)
    with pytest.raises(AssertionError) as info:
        expect_cases(fn, "strided_softmax", ["contiguous", "transpose"])
    assert "Smallest failing view" not in str(info.value)
    assert len(str(info.value).splitlines()) == 3


def test_expect_cases_runs_nothing_where_the_grader_runs_the_cases(tmp_path, monkeypatch, capsys):
    """In the grader's sandbox (CASES_RUN_OUTSIDE=1), does expect_cases run no case, even of
    a buggy kernel, and say the grader runs them; and without it, does the bug still fail?"""
    from learning.workshops.checking.notebook_runner import CASES_RUN_OUTSIDE

    fn = buggy("ignores-column-stride", tmp_path)
    monkeypatch.setenv(CASES_RUN_OUTSIDE, "1")
    expect_cases(fn, "strided_softmax", ["transpose"])
    assert capsys.readouterr().out == (
        "strided_softmax: the grader runs these cases itself, outside this notebook.\n"
    )
    monkeypatch.setenv(CASES_RUN_OUTSIDE, "0")
    with pytest.raises(AssertionError):
        expect_cases(fn, "strided_softmax", ["transpose"])


def test_expect_cases_refuses_an_unknown_case_name():
    """Is an unknown case name refused with a ValueError naming it?"""
    with pytest.raises(ValueError) as info:
        expect_cases(strided_softmax, "strided_softmax", ["transpose", "diagonal"])
    assert str(info.value) == "no public case named ['diagonal'] for strided_softmax"


def test_expect_cases_keeps_the_functions_stderr_off_the_cell(tmp_path, capfd):
    """Is what the function writes to stderr kept off the real stderr (nbgrader scores it 0)?"""

    def noisy(x, num_warps=4):
        warnings.warn("noisy warning", stacklevel=1)
        os.write(2, b"noisy fd write\n")
        return strided_softmax(x, num_warps=num_warps)

    expect_cases(noisy, "strided_softmax", ["transpose"])
    assert capfd.readouterr().err == ""


# --- the smallest failing view's picture, in a kernel ---------------------------------

SHOWN_VIEW = "smallest failing view: (2, 2), strides (1, 2)\n"
"""The picture's title for the column-stride bug's smallest failing view (a 2x2 transpose)."""


@pytest.fixture
def kernel(monkeypatch):
    """A fake kernel: expect_cases believes it runs in one; `shown` lists what it displayed
    (PNG bytes and plain text) and `drawn` the figures draw_view made."""
    shown, drawn = [], []
    real_draw = pictures.draw_view

    def draw(*args, **kwargs):
        drawn.append(real_draw(*args, **kwargs))
        return drawn[-1]

    monkeypatch.setattr(testing, "in_kernel", lambda: True)
    monkeypatch.setattr(testing, "display_png", lambda png, text: shown.append((png, text)))
    monkeypatch.setattr(pictures, "draw_view", draw)
    monkeypatch.setattr(testing.secrets, "randbelow", lambda n: 20240611)  # one seed, two runs
    return shown, drawn


def failure_text(fn) -> str:
    """expect_cases' failure for `fn` on two cases, its search's seconds left out."""
    with pytest.raises(AssertionError) as info:
        expect_cases(fn, "strided_softmax", ["contiguous", "transpose"])
    return re.sub(r"runs in [0-9.]+ s", "runs in ? s", str(info.value))


def test_a_failure_in_a_kernel_shows_one_picture_of_the_smallest_view(
    tmp_path, kernel, monkeypatch, capfd
):
    """In a kernel, does a failure display one PNG titled with the smallest failing view, its
    figure drawn by draw_view, and raise the same error as outside one, with no stderr?"""
    shown, drawn = kernel
    fn = buggy("ignores-column-stride", tmp_path)
    in_kernel = failure_text(fn)
    assert len(shown) == 1 and len(drawn) == 1
    png, text = shown[0]
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert text.startswith(SHOWN_VIEW) and "fails like case transpose (values)" in text
    grid = next(ax for ax in drawn[0].axes if ax.get_label() == "grid")
    assert grid.get_title(loc="left").startswith(text + "\nshape (2, 2)   stride (1, 2)")
    monkeypatch.setattr(testing, "in_kernel", lambda: False)  # the same failure, no kernel
    assert failure_text(fn) == in_kernel
    assert len(shown) == 1 and len(drawn) == 1  # outside a kernel nothing is even drawn
    assert capfd.readouterr().err == ""


def test_nothing_is_shown_while_nbgrader_grades(tmp_path, kernel, monkeypatch):
    """While nbgrader executes the notebook, is no picture drawn, even in a kernel?"""
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.chdir(tmp_path)  # the hints sidecar it writes
    with pytest.raises(AssertionError):
        expect_cases(buggy("ignores-column-stride", tmp_path), "strided_softmax", ["transpose"])
    assert kernel == ([], [])


def test_a_picture_that_fails_to_draw_leaves_the_error_alone(tmp_path, kernel, monkeypatch, capfd):
    """When drawing raises (and warns), is the test's error raised all the same, nothing
    displayed and nothing written to stderr?"""

    def broken(*args, **kwargs):
        warnings.warn("a matplotlib warning", UserWarning, stacklevel=1)
        raise RuntimeError("no picture today")

    monkeypatch.setattr(pictures, "draw_view", broken)
    text = failure_text(buggy("ignores-column-stride", tmp_path))
    assert "Smallest failing view (from case transpose" in text
    assert kernel[0] == []
    assert capfd.readouterr().err == ""


def test_pytest_is_not_a_kernel():
    """Outside a Jupyter kernel (here, pytest) does in_kernel say no?"""
    assert testing.in_kernel() is False


KERNEL_CELLS = [
    f"import sys\nsys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})",
    "from learning.workshops.contracts import select_mode\n"
    "select_mode(verbose=False)\n"
    "from learning.workshops.notebook.testing import expect_cases\n"
    "from ignores_column_stride import strided_softmax",
    'expect_cases(strided_softmax, "strided_softmax", ["contiguous", "transpose"])',
]
"""A notebook whose last cell is a visible test that the column-stride bug fails."""


def test_a_failing_cell_in_a_real_kernel_shows_the_picture_then_the_error(tmp_path, monkeypatch):
    """Run in a real ipykernel (no %matplotlib inline, MPLBACKEND=Agg inherited), does the
    failing cell's output hold one image/png display, then the AssertionError, and no stderr?"""
    from learning.workshops.checking.notebook_runner import execute

    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    buggy("ignores-column-stride", tmp_path)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in KERNEL_CELLS])
    execute(nb, tmp_path, 120, 60)
    assert [o.output_type for c in nb.cells[:2] for o in c.outputs] == []
    outputs = nb.cells[2].outputs
    assert [o.output_type for o in outputs] == ["display_data", "error"]
    picture, error = outputs
    assert picture.data["text/plain"].startswith(SHOWN_VIEW)
    assert picture.data["image/png"]  # base64 PNG
    assert error.ename == "AssertionError"
    assert "Smallest failing view (from case transpose" in error.evalue
    assert error.traceback == [f"AssertionError: {error.evalue}"]  # no frame of the checker's
