"""Hidden cases: drawn from the course secret, reproducible, and passed by the reference."""

from __future__ import annotations

import pytest

import grader.reference as reference
from grader.grading.hidden import expect_address_table, expect_hidden, hidden_cases
from grader.zoo import BUGS, write_bug
from grader.zoo.bug import REFERENCE
from learning.workshops.checking.cases import PUBLIC_CASES


def test_same_secret_same_cases():
    """Does the same course secret draw the same hidden cases every time (fair regrades)?"""
    assert hidden_cases("strided_softmax") == hidden_cases("strided_softmax")


def test_another_secret_draws_other_cases(monkeypatch):
    """Does changing the course secret change what is drawn?"""
    first = hidden_cases("strided_softmax")
    monkeypatch.setenv("I1_COURSE_SECRET", "0" * 64)
    assert hidden_cases("strided_softmax") != first


def test_hidden_cases_are_not_the_public_ones():
    """Do the hidden cases add shapes the public suite lacks?"""
    public = {(c.layout, c.rows, c.cols, c.dtype) for c in PUBLIC_CASES}
    hidden = {(c.layout, c.rows, c.cols, c.dtype) for c in hidden_cases("strided_softmax")}
    assert len(hidden - public) >= 10


@pytest.mark.parametrize("op", ["copy_rows", "softmax_kernel", "strided_softmax"])
def test_reference_passes_hidden(op):
    """Does the reference pass every hidden case of each op, run in a child process?"""
    expect_hidden(op, REFERENCE)


def test_hidden_failure_names_cases_and_hint(tmp_path):
    """Does a buggy submission fail the hidden cell with failing cases and its hint?"""
    bug = next(b for b in BUGS if b.name == "ignores-column-stride")
    with pytest.raises(AssertionError, match=r"Hint \[column-stride\]"):
        expect_hidden("strided_softmax", write_bug(bug, tmp_path))


def test_hidden_crash_fails_only_this_cell(tmp_path):
    """Does a submission that segfaults fail the hidden cell with `crash`, leaving this
    process (the grading kernel) alive?"""
    bug = next(b for b in BUGS if b.hint == "crash")
    with pytest.raises(AssertionError, match=r"Hint \[crash\]"):
        expect_hidden("strided_softmax", write_bug(bug, tmp_path))


def test_missing_notebook_is_named(tmp_path, monkeypatch):
    """Without the graded notebook in the folder, does the cell say where it looked?"""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AssertionError, match="hidden tests need the graded notebook at"):
        expect_hidden("strided_softmax")


def test_reference_address_table_passes_hidden():
    """Does the reference address table pass the hidden views?"""
    expect_address_table(reference.address_table)


def test_wrong_address_table_names_the_view():
    """Does a table that forgets the offset fail with the view's strides and offset?"""

    def no_offset(view):
        sr, sc = view.stride()
        return [(r, c, r * sr + c * sc) for r in range(view.shape[0]) for c in range(view.shape[1])]

    with pytest.raises(AssertionError, match=r"storage offset \d+"):
        expect_address_table(no_offset)


def test_timing_without_cuda_fails_with_one_sentence(tmp_path):
    """Without a CUDA device, does the timing cell fail with one clear sentence?"""
    import torch

    from grader.grading.gpu_timing import timing_points
    from learning.workshops.measuring.timing import NoCudaError

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(NoCudaError, match=r"^GPU timing needs a CUDA device[^\n]*\.$"):
        timing_points(2, impl=REFERENCE, sidecar=tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize(
    ("ratio", "fraction"),
    [(0.9, 1.0), (1.10, 1.0), (1.12, 0.75), (2.0, 0.5), (4.0, 0.25), (9, 0.1)],
)
def test_timing_bands(ratio, fraction):
    """Does each student/reference ratio map to the band the notes document?"""
    from grader.grading.gpu_timing import band

    assert band(ratio) == fraction
