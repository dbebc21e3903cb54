"""Hidden cases: drawn from the course secret, reproducible, and passed by the reference."""

from __future__ import annotations

import pytest

import grader.reference as reference
from grader.grading.hidden import expect_address_table, expect_hidden, hidden_cases
from grader.zoo import BUGS, REFERENCE, write_bug
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


@pytest.mark.parametrize(
    ("student", "student_wall", "trusted"),
    [
        (0.13, 0.13, True),  # a kernel like the reference
        (0.26, 0.27, True),  # slower, but the events see all of it
        (0.13, 0.20, True),  # host overhead the events partly miss: within the bounds
        (0.004, 0.14, False),  # the work ran on a side stream, outside the events
        (0.9, 0.13, False),  # events longer than the calls took: inflated
    ],
)
def test_events_are_cross_checked_with_the_wall_clock(student, student_wall, trusted):
    """Are a student's CUDA events trusted only when they agree with the host clock about as
    well as the reference's (0.13 ms by both) do?"""
    from grader.grading.timing_child import events_disagree

    why = events_disagree(student, student_wall, 0.13, 0.13)
    assert (why == "") == trusted
    assert trusted or "outside the timed events" in why


def _record(events_ms: float, seconds: float) -> dict:
    shape = {"rows": 4096, "cols": 4096, "reason": "", "events_ms": events_ms / 2}
    return {"fraction": 1.0, "seconds": seconds, "shapes": [shape, dict(shape)]}


@pytest.mark.parametrize(
    ("events_ms", "seconds", "elapsed_s", "believable"),
    [
        (25.0, 9.0, 14.0, True),  # 80 reps of ~0.15 ms per shape, a child that ran 14 s
        (25_000.0, 9.0, 14.0, False),  # events inflated beyond what the process ran
        (25.0, 60.0, 14.0, False),  # the child's own clock sped up
    ],
)
def test_the_parent_bounds_the_childs_claims(events_ms, seconds, elapsed_s, believable):
    """Seen from outside the timing child, do its events and clock fit in the time it ran?"""
    from grader.grading.gpu_timing import exceeds_process_time

    why = exceeds_process_time(_record(events_ms, seconds), elapsed_s)
    assert (why == "") == believable
    assert believable or f"ran {elapsed_s:.1f} s" in why


def test_replaced_machinery_is_named(monkeypatch):
    """When a submission swaps something the timing relies on, is it named, and nothing
    else?"""
    import torch

    import grader.reference
    from grader.grading.timing_child import machinery, replaced

    before = machinery()
    assert replaced(before) == []
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 0.001)
    monkeypatch.setattr(grader.reference, "softmax_kernel", object())
    assert replaced(before) == ["torch.cuda.Event.elapsed_time", "grader.reference.softmax_kernel"]
