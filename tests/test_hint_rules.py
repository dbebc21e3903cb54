"""Every hint rule, one row each: results that must give exactly that hint, and near misses
that must not give it. Synthetic results only: no kernel runs."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from learning.workshops.checking.cases import (
    BACKWARD_CASES,
    INPLACE_CASES,
    PUBLIC_CASES,
    Case,
    CaseResult,
    Failure,
    Verdict,
)
from learning.workshops.checking.hint_rules import RULES, diagnose
from learning.workshops.checking.hints import HintId

CASES = {case.name: case for case in PUBLIC_CASES}


def ok(name: str) -> CaseResult:
    """A passed public case."""
    return fail(name, None)


def fail(
    name: str, failure: Failure | None, text: str = "", cases: dict[str, Case] = CASES
) -> CaseResult:
    """A public case's result as `run_case` builds it: its features, and its width for views."""
    case = cases[name]
    cols = 0 if case.bad_input else case.cols
    return CaseResult(name, Verdict(failure, text), sorted(case.features), cols=cols)


def in_place(name: str, failure: Failure | None = None, text: str = "") -> CaseResult:
    """A result of one of `strided_softmax_`'s cases."""
    return fail(name, failure, text, {c.name: c for c in INPLACE_CASES})


def backward(name: str, failure: Failure | None = None, text: str = "") -> CaseResult:
    """A result of one of `strided_softmax_backward`'s cases."""
    return fail(name, failure, text, {c.name: c for c in BACKWARD_CASES})


class Row(NamedTuple):
    hint: HintId
    hits: tuple[list[CaseResult], ...]  # each must give exactly [hint]
    misses: tuple[list[CaseResult], ...]  # none may give hint


NOT_IMPLEMENTED = "raised NotImplementedError: not written yet: your code goes here"
BLOCK_POINTERS = (
    "raised NotImplementedError: Block pointers have been removed in favor of the tensor "
    "descriptor API"
)
"""What Triton 3.9 raises for tl.make_block_ptr: not the stub, so not unfinished, but its
own hint."""
COMPILED_STUB = "raised CompilationError: at 3:4: unsupported AST node type: Raise"
"""The stub's `raise` as Triton's compiler refuses it on a GPU."""
VALUES = "3 of 35 values differ"
TYPO = (
    "raised AttributeError: module 'triton.language' has no attribute 'maxx' "
    "(impl.py line 12: `x = x - tl.maxx(x, axis=0)`)"
)
"""What a misspelled tl function raises under the interpreter, the student's line named."""
ROWS = (
    Row(
        HintId.NOT_ATTEMPTED,
        (
            [
                in_place("contiguous", Failure.NOT_ATTEMPTED, NOT_IMPLEMENTED),
                in_place("reject-3-d", Failure.NOT_ATTEMPTED, "raised NotImplementedError"),
            ],
        ),
        ([in_place("contiguous", Failure.EXCEPTION, NOT_IMPLEMENTED)],),
    ),
    Row(
        HintId.UNFINISHED,
        (
            [fail("contiguous", Failure.EXCEPTION, NOT_IMPLEMENTED)],
            [fail("contiguous", Failure.EXCEPTION, COMPILED_STUB)],
        ),
        (
            [
                fail("contiguous", Failure.EXCEPTION, NOT_IMPLEMENTED),
                fail("transpose", Failure.EXCEPTION, "raised KeyError: 'BLOCK'"),
            ],
            [fail("contiguous", Failure.EXCEPTION, BLOCK_POINTERS)],
        ),
    ),
    Row(
        HintId.BLOCK_POINTERS,
        (
            [
                fail("contiguous", Failure.EXCEPTION, BLOCK_POINTERS),
                fail("transpose", Failure.EXCEPTION, BLOCK_POINTERS),
            ],
        ),
        (
            [fail("contiguous", Failure.EXCEPTION, NOT_IMPLEMENTED)],
            [fail("contiguous", Failure.EXCEPTION, "raised NotImplementedError: tl.foo")],
        ),
    ),
    Row(
        HintId.CRASH,
        ([ok("contiguous"), fail("transpose", Failure.CRASH, "killed by SIGSEGV")],),
        ([fail("transpose", Failure.EXCEPTION, "raised RuntimeError: crash")],),
    ),
    Row(
        HintId.TIMEOUT,
        ([fail("transpose", Failure.TIMEOUT, "no result after 120 s")],),
        ([fail("transpose", Failure.EXCEPTION, "raised TimeoutError")],),
    ),
    Row(
        HintId.MEMORY,
        ([fail("transpose-wide", Failure.MEMORY, "raised MemoryError")],),
        ([fail("transpose-wide", Failure.EXCEPTION, "raised RuntimeError: memory")],),
    ),
    Row(
        HintId.INPUT_WRITTEN,
        ([fail("contiguous", Failure.INPUT_WRITTEN, "storage changed at index 0")],),
        ([fail("contiguous", Failure.OWNERSHIP, "an element written by two programs")],),
    ),
    Row(
        HintId.STALE_OUTPUT,
        ([ok("contiguous"), fail("repeat-same-shape", Failure.STALE_OUTPUT)],),
        ([ok("contiguous"), fail("repeat-same-shape", Failure.PERMUTED)],),
    ),
    Row(
        HintId.NO_KERNEL,
        ([fail("contiguous", Failure.NO_KERNEL, "no Triton kernel was launched")],),
        ([fail("contiguous", Failure.COPY, "torch read the input outside the kernel")],),
    ),
    Row(
        HintId.NOT_FROM_KERNEL,
        ([ok("contiguous"), fail("transpose", Failure.NOT_FROM_KERNEL, "replayed: wrong")],),
        ([fail("transpose", Failure.VALUES, VALUES)],),
    ),
    Row(
        HintId.HELD,
        ([ok("contiguous"), fail("transpose", Failure.HELD, "held for review")],),
        ([fail("transpose", Failure.NO_KERNEL, "no Triton kernel was launched")],),
    ),
    Row(
        HintId.COPY,
        ([ok("contiguous"), fail("transpose", Failure.COPY, "torch read the input")],),
        ([fail("transpose", Failure.VALUES, f"{VALUES}; also torch read the input")],),
    ),
    Row(
        HintId.ALIASING,
        ([in_place("contiguous"), in_place("refuse-row-broadcast", Failure.ALIASING, "accepted")],),
        ([in_place("refuse-row-broadcast", Failure.UNCLEAR_ERROR, "raised KeyError")],),
    ),
    Row(
        HintId.OUTSIDE_VIEW,
        (
            [
                in_place("contiguous"),
                in_place("slice", Failure.OUTSIDE_VIEW, "storage index 21 changed"),
                in_place("transpose", Failure.READ_AFTER_WRITE, "program 1 loaded row 1"),
            ],
        ),
        ([in_place("transpose", Failure.READ_AFTER_WRITE, "program 1 loaded row 1")],),
    ),
    Row(
        HintId.READ_AFTER_WRITE,
        ([in_place("width-one"), in_place("contiguous", Failure.READ_AFTER_WRITE, "loaded")],),
        ([in_place("contiguous", Failure.OWNERSHIP, "written by programs 0 and 1")],),
    ),
    Row(
        HintId.ROW_SUM,
        ([backward("contiguous", Failure.ROW_SUM), backward("slice", Failure.ROW_SUM)],),
        ([backward("contiguous", Failure.VALUES, VALUES)],),
    ),
    Row(
        HintId.EMPTY_ROWS,
        (
            [fail("zero-rows", Failure.EMPTY_ROWS, "1 kernel launch(es)")],
            [fail("zero-rows", Failure.EXCEPTION, "raised IndexError")],
        ),
        ([fail("width-one", Failure.EXCEPTION, "raised IndexError")],),
    ),
    Row(
        HintId.VALIDATION,
        (
            [fail("reject-3-d", Failure.NOT_RAISED, "accepted")],
            [fail("reject-int-dtype", Failure.UNCLEAR_ERROR, "raised KeyError")],
        ),
        ([ok("reject-3-d"), fail("reject-int-dtype", Failure.EXCEPTION, "raised KeyError")],),
    ),
    Row(
        HintId.DTYPE,
        ([ok("transpose"), fail("float16-transpose", Failure.DTYPE, "output dtype")],),
        ([fail("float16-transpose", Failure.SHAPE, "output shape (5, 7)")],),
    ),
    Row(
        HintId.STORE_MASK,
        ([fail("contiguous", Failure.STORE_MASK, "lanes past the row's end")],),
        ([fail("contiguous", Failure.OWNERSHIP, "a store landed past the output")],),
    ),
    Row(
        HintId.ROW_MASK,
        ([fail("contiguous", Failure.ROW_MASK, "stored to row 5, column 0, past the output's")],),
        (
            [fail("contiguous", Failure.STORE_MASK, "lanes past the row's end")],
            [fail("contiguous", Failure.OWNERSHIP, "a store landed past the output")],
        ),
    ),
    Row(
        HintId.OVERLAP,
        ([fail("contiguous", Failure.OVERLAP, "written by programs 0 and 1 of one launch")],),
        ([fail("contiguous", Failure.OWNERSHIP, "written by programs 0 and 1 of one launch")],),
    ),
    Row(
        HintId.RUNNING_MAX,
        ([ok("transpose-wide"), fail("neg-inf-head-wide", Failure.NONFINITE, "NaN or inf")],),
        (
            [ok("transpose-wide"), fail("neg-inf-head-wide", Failure.VALUES, VALUES)],
            [
                ok("transpose-wide"),
                fail("neg-inf-head-wide", Failure.NONFINITE, "NaN or inf"),
                fail("transpose", Failure.NONFINITE, "NaN or inf"),
            ],
        ),
    ),
    Row(
        HintId.BLOCK_SIZE,
        (
            [fail("contiguous", Failure.EXCEPTION, "raised ValueError: must be a power of 2")],
            [ok("contiguous"), ok("transpose"), fail("transpose-wide", Failure.VALUES, VALUES)],
        ),
        (
            [fail("contiguous", Failure.EXCEPTION, "raised ValueError: must be positive")],
            [ok("transpose-wide"), fail("contiguous", Failure.VALUES, VALUES)],
            # only contiguous views pass, all narrow: the strides, not the width
            [
                ok("contiguous"),
                ok("contiguous-pow2"),
                fail("transpose-wide", Failure.VALUES, VALUES),
                fail("neg-inf-head-wide", Failure.VALUES, VALUES),
            ],
        ),
    ),
    Row(
        HintId.PADDING,
        ([ok("contiguous-pow2"), fail("contiguous", Failure.SUM_LOW, "row 0 sums to 0.8")],),
        ([ok("contiguous-pow2"), fail("contiguous", Failure.VALUES, VALUES)],),
    ),
    Row(
        HintId.STABILITY,
        ([ok("transpose-wide"), fail("large-magnitude", Failure.NONFINITE, "NaN or inf")],),
        (
            [ok("transpose-wide"), fail("large-magnitude", Failure.VALUES, VALUES)],
            [
                ok("transpose-wide"),
                fail("large-magnitude", Failure.NONFINITE, "NaN or inf"),
                fail("transpose", Failure.NONFINITE, "NaN or inf"),
            ],
        ),
    ),
    Row(
        HintId.BACKWARD_STRIDES,
        (
            [
                backward("contiguous"),
                backward("transpose"),
                backward("transposed-y", Failure.VALUES, VALUES),
                backward("sliced-dy", Failure.VALUES, VALUES),
            ],
        ),
        (
            [
                backward("contiguous"),
                backward("transpose", Failure.VALUES, VALUES),
                backward("transposed-y", Failure.VALUES, VALUES),
            ],
        ),
    ),
    Row(
        HintId.DOUBLE_OFFSET,
        (
            [
                ok("contiguous"),
                ok("transpose-wide"),
                fail("slice", Failure.VALUES, VALUES),
                fail("transposed-slice", Failure.OUT_OF_BOUNDS, "a load off the view"),
            ],
        ),
        (
            [ok("bfloat16-slice"), fail("slice", Failure.VALUES, VALUES)],  # no pass without it
            [
                ok("contiguous"),
                ok("transpose-wide"),
                fail("slice", Failure.VALUES, VALUES),
                fail("transpose", Failure.VALUES, VALUES),
            ],
            # only the slices misread, the transposes failing on dx's layout: nothing shows
            # that the column strides are read
            [
                backward("contiguous"),
                backward("width-one"),
                backward("transpose", Failure.LAYOUT, "dx has strides (1, 7)"),
                backward("slice", Failure.OUT_OF_BOUNDS, "a load off the view"),
                backward("sliced-dy", Failure.NONFINITE, "NaN or inf"),
                backward("bfloat16", Failure.OUT_OF_BOUNDS, "a load off the view"),
            ],
        ),
    ),
    Row(
        HintId.COLUMN_STRIDE,
        ([ok("contiguous"), ok("contiguous-pow2"), fail("transpose", Failure.VALUES, VALUES)],),
        (
            [
                ok("contiguous-pow2"),
                fail("contiguous", Failure.VALUES, VALUES),
                fail("transpose", Failure.VALUES, VALUES),
            ],
            [ok("contiguous-pow2"), fail("transpose", Failure.PERMUTED, "the right values")],
            # a row broadcast (column stride 1) misread too: the row stride is ignored as well
            [
                ok("contiguous"),
                fail("transpose", Failure.VALUES, VALUES),
                fail("row-broadcast", Failure.OUT_OF_BOUNDS, "a load off the view"),
            ],
        ),
    ),
    Row(
        HintId.STRIDES,
        (
            [
                ok("contiguous"),
                ok("contiguous-pow2"),
                fail("transpose", Failure.VALUES, VALUES),
                fail("slice", Failure.OUT_OF_BOUNDS, "a load off the view"),
                fail("row-broadcast", Failure.OUT_OF_BOUNDS, "a load off the view"),
                fail("large-magnitude", Failure.AMBIGUOUS, "nearly all equal"),
            ],
            [
                backward("contiguous"),
                backward("width-one"),
                backward("slice", Failure.OUT_OF_BOUNDS, "a load off the view"),
                backward("transposed-y", Failure.VALUES, VALUES),
                backward("broadcast-dy", Failure.NONFINITE, "NaN or inf"),
            ],
            # a copy: a transpose's values land in other places, and the audit saw them
            # loaded where a contiguous tensor has them, so the loads, not the stores
            [
                ok("contiguous"),
                fail("transpose", Failure.STRIDES_IGNORED, "the right values; audit: loaded"),
                fail("slice", Failure.OUT_OF_BOUNDS, "a load off the view"),
                fail("row-broadcast", Failure.OUT_OF_BOUNDS, "a load off the view"),
            ],
        ),
        (
            [
                ok("contiguous"),
                fail("contiguous-pow2", Failure.VALUES, VALUES),
                fail("row-broadcast", Failure.OUT_OF_BOUNDS, "a load off the view"),
            ],
            [fail("transpose", Failure.VALUES, VALUES), fail("slice", Failure.VALUES, VALUES)],
            # stores at the input's strides: on a GPU the rows they leave unwritten read NaN
            [
                ok("contiguous"),
                fail("transpose", Failure.PERMUTED, "the right values in the wrong places"),
                fail("row-broadcast", Failure.NONFINITE, "NaN or inf"),
            ],
        ),
    ),
    Row(
        HintId.ROW_STRIDE,
        (
            [
                ok("row-broadcast"),
                ok("width-one"),
                fail("contiguous", Failure.OUT_OF_BOUNDS, "loaded element 147 of X"),
                fail("contiguous-pow2", Failure.OUT_OF_BOUNDS, "loaded element 2752 of X"),
                fail("transpose", Failure.OUT_OF_BOUNDS, "outside the view's footprint"),
                fail("slice", Failure.VALUES, VALUES),
            ],
            # the row stride in bytes: one-column views misread too, row broadcasts pass
            [
                ok("row-broadcast"),
                fail("width-one", Failure.OUT_OF_BOUNDS, "outside the view's footprint"),
                fail("contiguous", Failure.OUT_OF_BOUNDS, "loaded element 147 of X"),
                fail("contiguous-pow2", Failure.OUT_OF_BOUNDS, "loaded element 768 of X"),
                fail("transpose", Failure.OUT_OF_BOUNDS, "outside the view's footprint"),
            ],
        ),
        (
            [ok("contiguous"), fail("transpose", Failure.VALUES, VALUES)],
            [ok("width-one"), fail("contiguous", Failure.VALUES, VALUES)],
        ),
    ),
    Row(
        HintId.OUTPUT_LAYOUT,
        tuple(
            [ok("contiguous"), fail("transpose", failure, "output")]
            for failure in (
                Failure.LAYOUT,
                Failure.SHAPE,
                Failure.NOT_A_TENSOR,
                Failure.DEVICE,
                Failure.PERMUTED,
                Failure.OWNERSHIP,
            )
        ),
        ([ok("contiguous"), fail("transpose", Failure.AMBIGUOUS, "nearly all equal")],),
    ),
    Row(
        HintId.NOT_IN_PLACE,
        ([in_place("contiguous", Failure.NOT_IN_PLACE, "returned NoneType")],),
        ([in_place("contiguous", Failure.NOT_A_TENSOR, "returned NoneType")],),
    ),
    Row(
        HintId.EXCEPTION,
        (
            [
                ok("reject-3-d"),
                fail("contiguous", Failure.EXCEPTION, f"(5, 7) view: {TYPO}"),
                fail("transpose", Failure.EXCEPTION, f"(7, 5) view: {TYPO}"),
            ],
        ),
        (
            [
                fail("contiguous", Failure.EXCEPTION, f"(5, 7) view: {TYPO}"),
                fail("transpose", Failure.EXCEPTION, "(7, 5) view: raised KeyError: 'BLOCK'"),
            ],
            [
                fail("contiguous", Failure.EXCEPTION, f"(5, 7) view: {TYPO}"),
                fail("transpose", Failure.VALUES, VALUES),
            ],
        ),
    ),
)


def ids(results: list[CaseResult]) -> list[HintId]:
    return [hint.id for hint in diagnose(results)]


@pytest.mark.parametrize("row", ROWS, ids=[row.hint for row in ROWS])
def test_rule_gives_its_hint_and_only_it(row):
    """Do the row's results give exactly its hint, citing failed cases, and its near misses
    not give it?"""
    for results in row.hits:
        assert ids(results) == [row.hint], [r.detail for r in results]
        evidence = diagnose(results)[0].evidence
        failed = [r for r in results if not r.passed]
        if row.hint == HintId.EXCEPTION:  # one error, told once
            assert evidence[0] == failed[0].detail and len(evidence) == 2
            assert all(r.name in evidence[1] for r in failed[1:])
        elif row.hint == HintId.NOT_ATTEMPTED:  # how many cases, and nothing else
            assert evidence == (f"{len(failed)} cases raise the stub's NotImplementedError",)
        else:
            assert evidence and all(r.detail in evidence for r in failed)
    for results in row.misses:
        assert row.hint not in ids(results), [r.detail for r in results]


def test_every_rule_has_a_row():
    """Is every rule in `hint_rules.RULES` in the table, once, in the rules' order?"""
    assert [row.hint for row in ROWS] == [hint for hint, _ in RULES] == list(HintId)


def test_a_checker_fault_is_no_evidence():
    """Does a case the checker failed on give no hint, even the one its features suggest?"""
    assert ids([fail("zero-rows", Failure.INTERNAL_ERROR, "KeyError at cases.py:1")]) == []


def test_the_stability_hint_says_how_each_sign_of_row_gives_nan():
    """Does the stability hint say that exp overflows for large positive values and
    underflows to 0 for large negative ones (0/0 is NaN too), not that it overflows alone?"""
    from learning.workshops.checking.hints import MESSAGES

    message = MESSAGES[HintId.STABILITY]
    assert "overflows to inf" in message and "underflows to 0" in message
    assert "0 by 0" in message
