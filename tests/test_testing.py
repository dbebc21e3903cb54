"""Tests for the assertions notebook test cells use: quiet runs and case failures with hints."""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings

import pytest

from grader import zoo
from grader.reference import strided_softmax
from learning.workshops.checking.cases import PUBLIC_CASES, suite
from learning.workshops.checking.hints import MESSAGES
from learning.workshops.notebook.contracts import default_device
from learning.workshops.notebook.testing import expect_cases, quiet


def buggy(bug_name: str, folder):
    """The zoo's `bug_name` implementation of strided_softmax, imported from `folder`."""
    bug = next(b for b in zoo.BUGS if b.name == bug_name)
    path = folder / f"{bug_name.replace('-', '_')}.py"
    path.write_text(zoo.apply(zoo.REFERENCE.read_text(), bug.edits))
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


def test_expect_cases_skips_the_smallest_view_while_nbgrader_grades(tmp_path, monkeypatch):
    """While nbgrader executes the notebook, does a failure stop at the hint (no search)?"""
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    fn = buggy("ignores-column-stride", tmp_path)
    with pytest.raises(AssertionError) as info:
        expect_cases(fn, "strided_softmax", ["contiguous", "transpose"])
    assert "Smallest failing view" not in str(info.value)
    assert len(str(info.value).splitlines()) == 3


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
