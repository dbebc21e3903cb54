"""The records a check passes around: how a case failed, its verdict, the case, its result.

Everything that runs cases (`cases`, `followons`), judges them (`judge`), sends them across
a process (`isolation`) or reads them (`hints`, `check`, the sidecars) shares these types,
and none of them is defined next to the code that runs a case.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import torch

from learning.workshops.checking.views import Geometry, geometry

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
"""A case's dtype by the name it carries."""


class Failure(enum.StrEnum):
    """How a case failed. A failure that leads to one hint has that hint's name and id
    (`hints.HintId` takes the value from here); the values are what results, `check --json`
    and the agreement report carry."""

    EXCEPTION = "exception"  # the call raised
    MEMORY = "memory"  # the call ran out of host or device memory
    CRASH = "crash"  # the process died during the case (see `isolation`)
    TIMEOUT = "timeout"  # the case did not finish in time (see `isolation`)
    NOT_A_TENSOR = "not-a-tensor"
    SHAPE = "shape"
    DTYPE = "dtype"
    DEVICE = "device"
    LAYOUT = "layout"  # output is not contiguous
    INPUT_WRITTEN = "input-written"  # the input's storage changed
    NO_KERNEL = "no-kernel"  # no Triton kernel ran
    NOT_FROM_KERNEL = "not-from-kernel"  # the launches, replayed on new values, gave others
    HELD = "held"  # the clean room could not replay the launches: an instructor reviews it
    COPY = "copy"  # torch read the input outside the kernel: a copy or torch compute
    EMPTY_ROWS = "empty-rows"  # a kernel was launched for zero rows
    NONFINITE = "nonfinite"  # NaN or inf where the reference is finite
    SUM_LOW = "sum-low"  # every value finite but rows sum to less than one
    PERMUTED = "permuted"  # the right values in the wrong places
    AMBIGUOUS = "ambiguous"  # nearly all-equal expected values in other places: loads or stores
    VALUES = "values"  # other wrong values
    STRIDES_IGNORED = "strides-ignored"  # wrong values; audit: loads at contiguous addresses
    STALE_OUTPUT = "stale-output"  # a repeated call returned an earlier result
    NOT_RAISED = "not-raised"  # bad input accepted
    UNCLEAR_ERROR = "unclear-error"  # bad input rejected with an error that does not name it
    STORE_MASK = "store-mask"  # lanes past a row's end loaded or stored: audit, or a guard
    ROW_MASK = "row-mask"  # audit: lanes of rows past the last (row >= M) loaded or stored
    OWNERSHIP = "ownership"  # audit: an output element written by two programs, or by none
    OVERLAP = "overlap"  # audit: every value right, but some written by two programs of a launch
    OUT_OF_BOUNDS = "out-of-bounds"  # audit: a load outside the view's footprint or any tensor
    INTERNAL_ERROR = "internal-error"  # the checks themselves raised: the checker's fault
    # the optional exercises (`followons`)
    ALIASING = "aliasing"  # in place: a view whose elements share addresses accepted
    OUTSIDE_VIEW = "write-outside-view"  # in place: storage outside the view changed
    READ_AFTER_WRITE = "read-after-write"  # in place: read what another program writes
    NOT_IN_PLACE = "not-in-place"  # in place: returned something other than x
    ROW_SUM = "row-sum"  # backward: y * dy, without the row sum
    NOT_ATTEMPTED = "not-attempted"  # an optional exercise's call raised its stub's error


AUDIT_FAILURES = {  # the ownership audit's finding kinds, and the allocation guard's, as failures
    "input-store": Failure.INPUT_WRITTEN,
    "overrun": Failure.STORE_MASK,
    "row-overrun": Failure.ROW_MASK,
    "stray-store": Failure.OWNERSHIP,
    "duplicate": Failure.OWNERSHIP,
    "unwritten": Failure.OWNERSHIP,
    "ownership": Failure.OWNERSHIP,
    "stray-load": Failure.OUT_OF_BOUNDS,
    "footprint": Failure.OUT_OF_BOUNDS,
    "contiguous-loads": Failure.STRIDES_IGNORED,
}


@dataclass(frozen=True)
class Verdict:
    """How a case ended: its failure (None when it passed) and what it showed, in words that
    name the values (`check` prints the text beside the case's name)."""

    failure: Failure | None
    text: str


@dataclass(frozen=True)
class Case:
    """One check: a view to run on, or (with `bad_input`) an input that must be refused."""

    name: str
    layout: str = "contiguous"
    rows: int = 5
    cols: int = 7
    dtype: str = "float32"
    fill: str = "normal"
    num_warps: int = 4
    repeat: bool = False
    bad_input: str | None = None
    grad_layout: str | None = None
    """The backward's cases only: the layout of `dy` (the case's `layout` is `y`'s)."""

    @property
    def geometry(self) -> Geometry:
        return geometry(self.layout, self.rows, self.cols)

    @property
    def grad_geometry(self) -> Geometry:
        return geometry(self.grad_layout or self.layout, self.rows, self.cols)

    @property
    def features(self) -> frozenset[str]:
        if self.bad_input:
            return frozenset({"bad-input"})
        extra = {self.fill} if self.fill != "normal" else set()
        if self.dtype != "float32":
            extra.add("half")
        if self.repeat:
            extra.add("repeat")
        own = self.geometry.features()
        if self.grad_layout is not None:  # the backward reads y and dy: both views count
            grad = self.grad_geometry.features()
            extra |= grad | {"backward"}
            if self.grad_geometry.strides != self.geometry.strides:
                extra.add("mixed-strides")
            if "contiguous" not in own & grad:  # contiguous only when y and dy both are
                own, extra = own - {"contiguous"}, extra - {"contiguous"}
        return own | extra


@dataclass
class CaseResult:
    """What running one case showed: its name, the Verdict, and what the hints read (the
    case's features, its kernel launches, its width)."""

    name: str
    verdict: Verdict
    features: list[str] = field(default_factory=list)
    launches: int = 0
    cols: int = 0

    @property
    def passed(self) -> bool:
        return self.verdict.failure is None

    @property
    def failure(self) -> Failure | None:
        return self.verdict.failure

    @property
    def detail(self) -> str:
        """The line students read: the case's name and the verdict's text."""
        return f"{self.name}: {self.verdict.text}"

    @classmethod
    def of(cls, case: Case, verdict: Verdict, launches: int = 0, cols: int = 0) -> CaseResult:
        """The result of `case`, judged by `verdict`."""
        return cls(case.name, verdict, sorted(case.features), launches, cols)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "passed": self.passed,
            "detail": self.detail,
            "failure": self.failure,
            "features": sorted(self.features),
            "launches": self.launches,
            "cols": self.cols,
        }

    def to_event(self) -> dict:
        """The result as a child process reports it: the JSON and the verdict's text."""
        return {**self.to_json(), "text": self.verdict.text}

    @classmethod
    def from_event(cls, event: dict) -> CaseResult:
        """The result a child process reported with `to_event`; ValueError when a field is
        missing or not of its type (a child's report is the submission's data)."""
        kinds = {"name": str, "text": str, "launches": int, "cols": int, "features": list}
        wrong = [key for key, kind in kinds.items() if type(event.get(key)) is not kind]
        if wrong or not all(type(f) is str for f in event["features"]):
            raise ValueError(f"a result whose {', '.join(wrong) or 'features'} are not as sent")
        failure = event.get("failure", 0)  # present, None or a failure's name
        if failure is not None and type(failure) is not str:
            raise ValueError("a result whose failure is not a failure's name")
        failure = Failure(failure) if failure is not None else None  # ValueError: no such name
        verdict = Verdict(failure, event["text"])
        return cls(event["name"], verdict, event["features"], event["launches"], event["cols"])
