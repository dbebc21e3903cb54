"""Hints: from the pattern of failed cases to the likely bug, with its evidence.

One vocabulary of hint ids serves the check command, the hidden tests and the cohort
plots. Each rule looks at which cases failed, how, and what those cases have in common
(a column stride other than one, a shifted pointer, a width that is not a power of two),
and each message ends with what to look at next.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from learning.workshops.cases import CaseResult
from learning.workshops.faults import INTERNAL_ERROR

MESSAGES = {
    "unfinished": (
        "The function still raises NotImplementedError: fill in the cells marked "
        "YOUR CODE HERE, then run the check again."
    ),
    "column-stride": (
        "Contiguous inputs pass but views whose columns are not adjacent fail: the load "
        "ignores the column stride. Load from X + row*SR + col*SC, with SC = x.stride(1)."
    ),
    "double-offset": (
        "Only views with a storage offset fail: the pointer Triton receives already points at "
        "the view's first element. Do not add x.storage_offset() again."
    ),
    "output-layout": (
        "The output's shape or layout is wrong, or rows land in the wrong places: allocate a "
        "new contiguous output, torch.empty((M, N), dtype=x.dtype, device=x.device), and "
        "store at Y + row*N + col, with the output's strides, never the input's."
    ),
    "store-mask": (
        "A store (or load) runs past the end of its row: lanes at columns N and beyond are "
        "active, so they write the next row's first elements or past the output. Pass "
        "mask=cols < N to tl.store as well as to tl.load."
    ),
    "padding": (
        "Probabilities are too small: rows sum to less than one, so masked lanes count in the "
        "sum. Load the tail with other=-float('inf') so exp() makes them zero."
    ),
    "stability": (
        "Rows with large values give NaN or inf: exp overflows. Subtract the row maximum "
        "before exp (x - tl.max(x, axis=0))."
    ),
    "block-size": (
        "Wide or odd widths fail: the block must cover the whole row and be a power of two. "
        "Use BLOCK = triton.next_power_of_2(N) and mask the tail."
    ),
    "dtype": (
        "The output's dtype differs from the input's: allocate the output with dtype=x.dtype "
        "and cast the fp32 result back when you store it."
    ),
    "validation": (
        "Bad input is not refused with a clear error: call "
        "learning.workshops.contracts.matrix(x) and warps(num_warps) before anything else."
    ),
    "empty-rows": (
        "Inputs with zero rows go wrong: return the empty output before launching; a grid of "
        "zero programs is not a launch to make."
    ),
    "no-kernel": (
        "No Triton kernel ran: the result must come from your kernel, launched as "
        "kernel[(M,)](...), not from torch."
    ),
    "copy": (
        "Torch reads the input outside your kernel: x.contiguous() on a view, .to(), "
        ".float() or torch math make a second full pass over memory, the pass that reading "
        "the view through its strides avoids (x.contiguous() returns a contiguous input as "
        "it is, which is why only views fail). Pass x itself and x.stride() to the kernel "
        "and return the output the kernel writes."
    ),
    "stale-output": (
        "A second call with the same shape and new values returned old results: compute every "
        "call from its input; do not cache outputs."
    ),
    "input-written": (
        "The input's memory changed: the kernel must only read X. Store into the new output "
        "Y, never through the input's pointer or strides."
    ),
    "crash": (
        "The implementation crashed the process (a segfault, a fatal error, or an illegal "
        "address on the GPU): look for a load or store without a mask, or an address computed "
        "from the wrong strides."
    ),
    "memory": (
        "The implementation ran out of memory: a call allocates far more than one output of "
        "M x N. Look for allocations inside a loop, or a tensor sized from the storage "
        "rather than the view."
    ),
    "timeout": (
        "The implementation did not finish in time: look for a loop that never ends, or a "
        "grid far larger than the number of rows."
    ),
}


@dataclass(frozen=True)
class Hint:
    """A clue for one failure pattern, with the cases that show it."""

    id: str
    message: str
    evidence: tuple[str, ...]

    def to_json(self) -> dict:
        return {"id": self.id, "message": self.message, "evidence": list(self.evidence)}


def _has(result: CaseResult, feature: str) -> bool:
    return feature in result.features


VALUE_FAILURES = ("values", "nonfinite", "permuted", "sum-low")
ADDRESS_FAILURES = ("values", "nonfinite", "sum-low", "out-of-bounds")
"""Wrong values, or loads off the view: what reading the wrong addresses gives. Right values
in the wrong places ("permuted") come from where the output is written instead."""


def _failing_only_where(feature: str) -> Callable[[list[CaseResult]], list[CaseResult]]:
    """A rule: every case with wrong values (or loads off the view) has `feature`, and some
    case without it passes."""

    def rule(results: list[CaseResult]) -> list[CaseResult]:
        views = [r for r in results if not _has(r, "bad-input") and not _has(r, "empty")]
        failed = [r for r in views if r.failure in ADDRESS_FAILURES]
        without = [r for r in views if not _has(r, feature)]
        if failed and all(_has(r, feature) for r in failed) and any(r.passed for r in without):
            return failed
        return []

    return rule


def _failures(*kinds: str, feature: str | None = None):
    """A rule: the cases that failed with one of `kinds` (and have `feature`, if given)."""

    def rule(results: list[CaseResult]) -> list[CaseResult]:
        return [r for r in results if r.failure in kinds and (feature is None or _has(r, feature))]

    return rule


def _block_size(results: list[CaseResult]) -> list[CaseResult]:
    """Triton refused a block that is not a power of two, or only rows above a width fail."""
    refused = [r for r in results if r.failure == "exception" and "power of 2" in r.detail]
    if refused:
        return refused
    views = [r for r in results if r.cols and not _has(r, "empty")]
    failed = [r for r in views if r.failure in VALUE_FAILURES]
    passed = [r.cols for r in views if r.passed]
    if failed and passed and min(r.cols for r in failed) > max(passed):
        return failed
    return []


def _padding(results: list[CaseResult]) -> list[CaseResult]:
    """Some row sums to less than one: every wrong width that is not a power of two counts."""
    if not any(r.failure == "sum-low" for r in results):
        return []
    return [r for r in results if r.failure in VALUE_FAILURES and _has(r, "non-pow2")]


def _stability(results: list[CaseResult]) -> list[CaseResult]:
    failed = [r for r in results if not r.passed and not _has(r, "bad-input")]
    if failed and all(_has(r, "large") and r.failure == "nonfinite" for r in failed):
        return failed
    return []


def _unfinished(results: list[CaseResult]) -> list[CaseResult]:
    """Every failure is the stub's NotImplementedError: nothing else to diagnose yet."""
    failed = [r for r in results if not r.passed]
    if failed and all("NotImplementedError" in r.detail for r in failed):
        return failed
    return []


RULES: tuple[tuple[str, Callable[[list[CaseResult]], list[CaseResult]]], ...] = (
    ("unfinished", _unfinished),
    ("crash", _failures("crash")),
    ("timeout", _failures("timeout")),
    ("memory", _failures("memory")),
    ("input-written", _failures("input-written")),
    ("stale-output", _failures("stale")),
    ("no-kernel", _failures("no-launch")),
    ("copy", _failures("outside-kernel")),
    ("empty-rows", lambda rs: [r for r in rs if _has(r, "empty") and not r.passed]),
    ("validation", _failures("not-raised", "unclear-error")),
    ("dtype", _failures("dtype")),
    ("store-mask", _failures("overrun")),
    ("block-size", _block_size),
    ("padding", _padding),
    ("stability", _stability),
    ("double-offset", _failing_only_where("offset")),
    ("column-stride", _failing_only_where("col-strided")),
    (
        "output-layout",
        _failures("layout", "shape", "not-a-tensor", "device", "permuted", "ownership"),
    ),
)
"""Rules in order; each sees only the failures that earlier rules did not explain."""


def diagnose(results: list[CaseResult]) -> list[Hint]:
    """The hints whose failure pattern the results show, each with its evidence; a case the
    checker itself failed on (`internal-error`) is no evidence about the student's code."""
    hints = []
    unexplained = [r for r in results if r.failure != INTERNAL_ERROR]
    for hint_id, rule in RULES:
        matched = rule(unexplained)
        if matched:
            hints.append(Hint(hint_id, MESSAGES[hint_id], tuple(r.detail for r in matched[:4])))
            unexplained = [r for r in unexplained if r not in matched]
    return hints
