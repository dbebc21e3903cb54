"""Hint rules: from the pattern of failed cases to the likely bug, with its evidence.

Each rule looks at which cases failed, how, and what those cases have in common (a column
stride other than one, a shifted pointer, a width that is not a power of two); `diagnose`
runs them in order and gives each match its `hints` message.
"""

from __future__ import annotations

from collections.abc import Callable

from learning.workshops.checking.hints import MESSAGES, Hint, HintId
from learning.workshops.checking.raised import is_stub, raised_part
from learning.workshops.checking.records import CaseResult, Failure

Rule = Callable[[list[CaseResult]], list[CaseResult]]
"""From the results not yet explained to the ones a hint explains (none: no match)."""


def _has(result: CaseResult, feature: str) -> bool:
    return feature in result.features


VALUE_FAILURES = (
    Failure.VALUES,
    Failure.NONFINITE,
    Failure.PERMUTED,
    Failure.SUM_LOW,
    Failure.STRIDES_IGNORED,
)
ADDRESS_FAILURES = (
    Failure.VALUES,
    Failure.NONFINITE,
    Failure.SUM_LOW,
    Failure.OUT_OF_BOUNDS,
    Failure.STRIDES_IGNORED,
)
"""Wrong values, or loads off the view: what reading the wrong addresses gives. Right values
in the wrong places ("permuted") come from where the output is written instead, unless the
audit saw the loads at a contiguous tensor's addresses ("strides-ignored": a copy of a
transpose read that way moves right values)."""


def _views(results: list[CaseResult]) -> list[CaseResult]:
    """The cases that ran on a view with rows (not a bad input, not zero rows)."""
    return [r for r in results if not _has(r, "bad-input") and not _has(r, "empty")]


def _strides_read(results: list[CaseResult]) -> bool:
    """Some view whose columns are not adjacent, with no offset, passes: the kernel reads the
    column stride (and the row stride), so an offset or a width is left to blame."""
    return any(
        r.passed and _has(r, "col-strided") and not _has(r, "offset") for r in _views(results)
    )


def _failing_only_where(feature: str, proven: Callable[[list], bool] | None = None) -> Rule:
    """A rule: every case with wrong values (or loads off the view) has `feature`, some case
    without it passes, and (with `proven`) the results show what the hint takes as read."""

    def rule(results: list[CaseResult]) -> list[CaseResult]:
        views = _views(results)
        failed = [r for r in views if r.failure in ADDRESS_FAILURES]
        without = [r for r in views if not _has(r, feature)]
        if failed and all(_has(r, feature) for r in failed) and any(r.passed for r in without):
            if proven is None or proven(results):
                return [r for r in _misread(results) if _has(r, feature)]
        return []

    return rule


def _misread(results: list[CaseResult]) -> list[CaseResult]:
    """The views that fail as wrong addresses give: wrong values, loads off the view, and
    the right values in other places where a row holds nearly one value (ambiguous: such
    a view joins a pattern the others make, and makes none of its own)."""
    return [r for r in _views(results) if r.failure in (*ADDRESS_FAILURES, Failure.AMBIGUOUS)]


def _strides(results: list[CaseResult]) -> list[CaseResult]:
    """Every view misread is one whose elements are not where a contiguous tensor's are,
    and some contiguous view passes: the addresses are a contiguous tensor's."""
    failed = _misread(results)
    passed = [r for r in _views(results) if r.passed and _has(r, "contiguous")]
    if _shown(failed, results) and passed and not any(_has(r, "contiguous") for r in failed):
        return failed
    return []


def _shown(failed: list[CaseResult], results: list[CaseResult]) -> bool:
    """Whether the loads' addresses are to blame beyond doubt: some view misread, and not
    only nearly one-hot rows; and no view's right values landed in other places, or an
    element was written twice or never (the stores' addresses: on a GPU the elements they
    leave unwritten read as NaN, as a misread row does)."""
    stored = any(r.failure in (Failure.PERMUTED, Failure.OWNERSHIP) for r in results)
    return not stored and any(r.failure in ADDRESS_FAILURES for r in failed)


def _row_stride(results: list[CaseResult]) -> list[CaseResult]:
    """Every contiguous view of several columns fails, every view misread has rows apart,
    contiguous ones and others among them, and a view whose rows share one address (row
    stride 0), or one of a single column, passes: where row r starts is wrong whatever the
    layout (r*SR*N, or SR in bytes)."""
    views = _views(results)
    failed = _misread(results)
    if not _shown(failed, results):
        return []
    steady = [r for r in views if r.passed and (not _has(r, "row-strided") or r.cols == 1)]
    contiguous = [r for r in views if _has(r, "contiguous") and r.cols > 1]
    if (
        steady
        and contiguous
        and not any(r.passed for r in contiguous)
        and all(_has(r, "row-strided") for r in failed)
        and {_has(r, "contiguous") for r in failed} == {True, False}
    ):
        return failed
    return []


def _same_exception(results: list[CaseResult]) -> list[CaseResult]:
    """Every failing case raised one error, told in the same words (its line included)."""
    failed = [r for r in results if not r.passed]
    said = {raised_part(r.verdict.text) for r in failed}
    if failed and all(r.failure == Failure.EXCEPTION for r in failed) and None not in said:
        return failed if len(said) == 1 else []
    return []


def _failures(*kinds: Failure) -> Rule:
    """A rule: the cases that failed with one of `kinds`."""

    def rule(results: list[CaseResult]) -> list[CaseResult]:
        return [r for r in results if r.failure in kinds]

    return rule


def _empty_rows(results: list[CaseResult]) -> list[CaseResult]:
    """Any failure of an input with zero rows."""
    return [r for r in results if _has(r, "empty") and not r.passed]


def _block_size(results: list[CaseResult]) -> list[CaseResult]:
    """Triton refused a block that is not a power of two, or only rows above a width fail
    while narrower views that are not contiguous pass (a kernel that misreads strides fails
    wide views too, and no narrow one that the strides move)."""
    refused = [
        r for r in results if r.failure == Failure.EXCEPTION and "power of 2" in r.verdict.text
    ]
    if refused:
        return refused
    views = [r for r in results if r.cols and not _has(r, "empty")]
    failed = [r for r in views if r.failure in VALUE_FAILURES]
    passed = [r.cols for r in views if r.passed]
    if failed and passed and min(r.cols for r in failed) > max(passed) and _strides_read(views):
        return failed  # narrow views of every kind pass: the width, not the addresses
    return []


def _padding(results: list[CaseResult]) -> list[CaseResult]:
    """Some row sums to less than one: every wrong width that is not a power of two counts."""
    if not any(r.failure == Failure.SUM_LOW for r in results):
        return []
    return [r for r in results if r.failure in VALUE_FAILURES and _has(r, "non-pow2")]


def _stability(results: list[CaseResult]) -> list[CaseResult]:
    """Every failed view has values near ±1e4 and gives NaN or inf."""
    failed = [r for r in results if not r.passed and not _has(r, "bad-input")]
    if failed and all(_has(r, "large") and r.failure == Failure.NONFINITE for r in failed):
        return failed
    return []


def _running_max(results: list[CaseResult]) -> list[CaseResult]:
    """Every failed view is a row of -inf but its last value and gives NaN or inf, and some
    view without that passes."""
    views = [r for r in results if not _has(r, "bad-input")]
    failed = [r for r in views if not r.passed]
    without = [r for r in views if not _has(r, "neg-inf-head")]
    if (
        failed
        and all(_has(r, "neg-inf-head") and r.failure == Failure.NONFINITE for r in failed)
        and any(r.passed for r in without)
    ):
        return failed
    return []


def _outside_view(results: list[CaseResult]) -> list[CaseResult]:
    """Some view's storage changed outside it: the stores go to wrong addresses, and where
    they land on other elements of the view they also give foreign reads and wrong values."""
    if not any(r.failure == Failure.OUTSIDE_VIEW for r in results):
        return []
    kinds = (Failure.OUTSIDE_VIEW, Failure.READ_AFTER_WRITE, Failure.OWNERSHIP, *VALUE_FAILURES)
    return [r for r in results if r.failure in kinds]


def _unfinished(results: list[CaseResult]) -> list[CaseResult]:
    """Every failure is the stub's NotImplementedError, which says "not written yet" (or a
    compiler refusing a kernel stub's `raise` on a GPU): nothing else to diagnose yet. Other
    NotImplementedErrors are not the stub's: Triton 3.9 raises one for block pointers."""
    failed = [r for r in results if not r.passed]
    if failed and all(is_stub(r.verdict.text) for r in failed):
        return failed
    return []


def _block_pointers(results: list[CaseResult]) -> list[CaseResult]:
    """The cases that failed with what Triton 3.9 raises for tl.make_block_ptr."""
    return [r for r in results if not r.passed and BLOCK_POINTERS_GONE in r.verdict.text]


BLOCK_POINTERS_GONE = "Block pointers have been removed"
"""The start of Triton 3.9's NotImplementedError for tl.make_block_ptr."""

RULES: tuple[tuple[HintId, Rule], ...] = (
    (HintId.NOT_ATTEMPTED, _failures(Failure.NOT_ATTEMPTED)),
    (HintId.UNFINISHED, _unfinished),
    (HintId.BLOCK_POINTERS, _block_pointers),
    (HintId.CRASH, _failures(Failure.CRASH)),
    (HintId.TIMEOUT, _failures(Failure.TIMEOUT)),
    (HintId.MEMORY, _failures(Failure.MEMORY)),
    (HintId.INPUT_WRITTEN, _failures(Failure.INPUT_WRITTEN)),
    (HintId.STALE_OUTPUT, _failures(Failure.STALE_OUTPUT)),
    (HintId.NO_KERNEL, _failures(Failure.NO_KERNEL)),
    (HintId.NOT_FROM_KERNEL, _failures(Failure.NOT_FROM_KERNEL)),
    (HintId.HELD, _failures(Failure.HELD)),
    (HintId.COPY, _failures(Failure.COPY)),
    (HintId.ALIASING, _failures(Failure.ALIASING)),
    (HintId.OUTSIDE_VIEW, _outside_view),
    (HintId.READ_AFTER_WRITE, _failures(Failure.READ_AFTER_WRITE)),
    (HintId.ROW_SUM, _failures(Failure.ROW_SUM)),
    (HintId.EMPTY_ROWS, _empty_rows),
    (HintId.VALIDATION, _failures(Failure.NOT_RAISED, Failure.UNCLEAR_ERROR)),
    (HintId.DTYPE, _failures(Failure.DTYPE)),
    (HintId.STORE_MASK, _failures(Failure.STORE_MASK)),
    (HintId.ROW_MASK, _failures(Failure.ROW_MASK)),
    (HintId.OVERLAP, _failures(Failure.OVERLAP)),
    (HintId.RUNNING_MAX, _running_max),
    (HintId.BLOCK_SIZE, _block_size),
    (HintId.PADDING, _padding),
    (HintId.STABILITY, _stability),
    (HintId.BACKWARD_STRIDES, _failing_only_where("mixed-strides")),
    (HintId.DOUBLE_OFFSET, _failing_only_where("offset", _strides_read)),
    (HintId.COLUMN_STRIDE, _failing_only_where("col-strided")),
    (HintId.STRIDES, _strides),
    (HintId.ROW_STRIDE, _row_stride),
    (
        HintId.OUTPUT_LAYOUT,
        _failures(
            Failure.LAYOUT,
            Failure.SHAPE,
            Failure.NOT_A_TENSOR,
            Failure.DEVICE,
            Failure.PERMUTED,
            Failure.OWNERSHIP,
        ),
    ),
    (HintId.NOT_IN_PLACE, _failures(Failure.NOT_IN_PLACE)),
    (HintId.EXCEPTION, _same_exception),
)
"""Rules in order; each sees only the failures that earlier rules did not explain."""


def diagnose(results: list[CaseResult]) -> list[Hint]:
    """The hints whose failure pattern the results show, each with its evidence; a case the
    checker itself failed on (`internal-error`) is no evidence about the student's code."""
    hints = []
    unexplained = [r for r in results if r.failure != Failure.INTERNAL_ERROR]
    for hint_id, rule in RULES:
        matched = rule(unexplained)
        if matched:
            hints.append(Hint(hint_id, MESSAGES[hint_id], evidence(hint_id, matched)))
            unexplained = [r for r in unexplained if r not in matched]
    return hints


def not_attempted(results: list[CaseResult]) -> bool:
    """Whether every failed case is an optional exercise's stub: nothing to report but
    that it is not attempted (no case lines, no other hint)."""
    failed = [r for r in results if not r.passed]
    return bool(failed) and all(r.failure == Failure.NOT_ATTEMPTED for r in failed)


def evidence(hint_id: HintId, matched: list[CaseResult]) -> tuple[str, ...]:
    """A hint's evidence: its first four cases; one error raised by every case, once."""
    if hint_id == HintId.NOT_ATTEMPTED:
        return (f"{len(matched)} cases raise the stub's NotImplementedError",)
    if hint_id == HintId.EXCEPTION and len(matched) > 1:
        others = [r.name for r in matched[1:]]
        listed = ", ".join(others[:6]) + (", ..." if len(others) > 6 else "")
        return (matched[0].detail, f"the same error in {len(others)} more cases: {listed}")
    return tuple(r.detail for r in matched[:4])
