"""Check cases for the workshop's functions, and the code that runs one case.

A case names a view (layout, shape, dtype, fill) or a bad input. Running it builds the
view inside a NaN-filled storage, calls the student's function, and compares against a
float64 reference, the storage before and after, and the kernel launches it made. A
failed case says what kind of failure it was; `hints` turns those into clues.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property

import torch
from triton.compiler.errors import CompilationError
from triton.runtime.errors import InterpreterError

from learning.workshops.checking.allocations import GuardAllocations, Guards
from learning.workshops.checking.audit import Finding, Trace, audit
from learning.workshops.checking.exchange import (
    Inputs,
    Observation,
    build_inputs,
    returned_to_wire,
    view_of,
)
from learning.workshops.checking.launches import LaunchLog, count_launches
from learning.workshops.checking.views import Geometry, describe, geometry
from learning.workshops.contracts import interpreter_active

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TOLERANCES = {  # (rtol, atol) against a float64 reference
    torch.float32: (1e-5, 1e-6),
    torch.float16: (2e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 4e-3),
}
BAD_INPUTS = ("3-d", "int-dtype", "warps-6", "cpu-input")


class Failure(enum.StrEnum):
    """How a case failed. A failure that leads to one hint is named as that hint; the values
    are what results, `check --json` and the agreement report carry."""

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
    NO_KERNEL = "no-launch"  # no Triton kernel ran
    COPY = "outside-kernel"  # torch read the input outside the kernel: a copy or torch compute
    EMPTY_ROWS = "launch-on-empty"  # a kernel was launched for zero rows
    NONFINITE = "nonfinite"  # NaN or inf where the reference is finite
    SUM_LOW = "sum-low"  # every value finite but rows sum to less than one
    PERMUTED = "permuted"  # the right values in the wrong places
    AMBIGUOUS = "ambiguous"  # nearly all-equal expected values in other places: loads or stores
    VALUES = "values"  # other wrong values
    STALE_OUTPUT = "stale"  # a repeated call returned an earlier result
    NOT_RAISED = "not-raised"  # bad input accepted
    UNCLEAR_ERROR = "unclear-error"  # bad input rejected with an error that does not name it
    STORE_MASK = "overrun"  # lanes past a row's end loaded or stored: audit, or an output guard
    OWNERSHIP = "ownership"  # audit: an output element written by two programs, or by none
    OUT_OF_BOUNDS = "out-of-bounds"  # audit: a load outside the view's footprint or any tensor
    INTERNAL_ERROR = "internal-error"  # the checks themselves raised: the checker's fault
    # the optional exercises (`followons`)
    ALIASING = "aliasing-accepted"  # in place: a view whose elements share addresses accepted
    OUTSIDE_VIEW = "outside-view"  # in place: storage outside the view changed
    FOREIGN_READ = "read-after-write"  # in place: read what another program writes
    NOT_IN_PLACE = "not-in-place"  # in place: returned something other than x
    NO_ROW_SUM = "no-row-sum"  # backward: y * dy, without the row sum


AUDIT_FAILURES = {  # the ownership audit's finding kinds, as failures
    "input-store": Failure.INPUT_WRITTEN,
    "overrun": Failure.STORE_MASK,
    "stray-store": Failure.OWNERSHIP,
    "duplicate": Failure.OWNERSHIP,
    "unwritten": Failure.OWNERSHIP,
    "stray-load": Failure.OUT_OF_BOUNDS,
    "footprint": Failure.OUT_OF_BOUNDS,
}
FAULT_ORDER = ("input-store", "overrun", "stray-store", "stray-load", "duplicate", "footprint")
"""Which fault names the failure when a call shows several: a store into the input first,
then lanes past a row (the cause of the strays and races they make), then the rest.
Unwritten elements come last: they are usually what another fault left behind."""


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
        if self.grad_layout is not None:  # the backward reads y and dy: both views count
            extra |= self.grad_geometry.features()
            if self.grad_geometry.strides != self.geometry.strides:
                extra.add("mixed-strides")
        return self.geometry.features() | extra


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
        """The result a child process reported with `to_event`."""
        failure = Failure(event["failure"]) if event["failure"] else None
        verdict = Verdict(failure, event["text"])
        return cls(event["name"], verdict, event["features"], event["launches"], event["cols"])


class _Returned:
    """Outputs returned so far in this process, kept alive so their addresses stay unique."""

    def __init__(self) -> None:
        self.by_address: dict[int, tuple[torch.Tensor, str]] = {}

    def remember(self, out: torch.Tensor, name: str) -> str | None:
        """Record `out`; return the case that returned the same tensor before, if any."""
        if out.numel() == 0:
            return None
        key = out.data_ptr()
        if key in self.by_address:
            return self.by_address[key][1]
        self.by_address[key] = (out, name)
        return None


_RETURNED = _Returned()


@dataclass(frozen=True)
class Op:
    """A function under test: its name, its reference, and whether it owns the contracts."""

    name: str
    function: str
    reference: Callable[..., torch.Tensor]
    exact: bool
    contracts: bool
    public: tuple[Case, ...] = ()
    """The public cases; the main ops' are `PUBLIC_CASES`."""
    kind: str = "new"
    """"new": returns a new tensor (the main ops); "in-place": writes its input and returns
    it; "backward": takes (y, dy). `followons` runs the last two."""
    normalized: bool = True
    """Whether each output row sums to one (a softmax's does; a gradient's sums to zero)."""


def _softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.double(), dim=1)


def _copy_reference(x: torch.Tensor) -> torch.Tensor:
    return x.double().contiguous()


def _backward_reference(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    y, dy = y.double(), dy.double()
    return y * (dy - (dy * y).sum(dim=1, keepdim=True))


PUBLIC_CASES = (
    Case("contiguous", "contiguous", 5, 7),
    Case("contiguous-pow2", "contiguous", 4, 64),
    Case("transpose", "transpose", 7, 5),
    Case("transpose-wide", "transpose", 3, 1000),
    Case("slice", "slice", 6, 9),
    Case("transposed-slice", "transposed-slice", 5, 6),
    Case("row-broadcast", "row-broadcast", 4, 33),
    Case("col-broadcast", "col-broadcast", 6, 5),
    Case("width-one", "transpose", 5, 1),
    Case("large-magnitude", "transpose", 4, 20, fill="large"),
    Case("some-neg-inf", "contiguous", 6, 12, fill="neg-inf"),
    Case("neg-inf-head-wide", "transpose", 3, 1000, fill="neg-inf-head"),
    Case("float16-transpose", "transpose", 7, 5, dtype="float16"),
    Case("bfloat16-slice", "slice", 6, 9, dtype="bfloat16"),
    Case("repeat-same-shape", "transpose", 5, 7, repeat=True),
    Case("eight-warps", "transpose", 7, 5, num_warps=8),
    Case("zero-rows", "transpose", 0, 7),
    Case("reject-3-d", bad_input="3-d"),
    Case("reject-int-dtype", bad_input="int-dtype"),
    Case("reject-warps-6", bad_input="warps-6"),
    Case("reject-cpu-input", bad_input="cpu-input"),
)

INPLACE_CASES = (
    Case("contiguous", "contiguous", 5, 7),
    Case("transpose", "transpose", 7, 5),
    Case("slice", "slice", 6, 9),
    Case("transposed-slice", "transposed-slice", 5, 6),
    Case("transpose-wide", "transpose", 3, 300),
    Case("width-one", "transpose", 5, 1),
    Case("large-magnitude", "transpose", 4, 20, fill="large"),
    Case("float16-slice", "slice", 6, 9, dtype="float16"),
    Case("bfloat16-transpose", "transpose", 7, 5, dtype="bfloat16"),
    Case("zero-rows", "transpose", 0, 7),
    Case("refuse-row-broadcast", "row-broadcast", 4, 6),
    Case("refuse-col-broadcast", "col-broadcast", 6, 5),
    Case("refuse-overlapping", "overlapping", 4, 6),
    Case("reject-3-d", bad_input="3-d"),
    Case("reject-int-dtype", bad_input="int-dtype"),
    Case("reject-warps-6", bad_input="warps-6"),
    Case("reject-cpu-input", bad_input="cpu-input"),
)
"""`strided_softmax_`'s cases: views it must softmax in place, views whose elements share
addresses ("refuse-"), which it must refuse untouched, and bad inputs."""

BACKWARD_BAD_INPUTS = ("shape-mismatch", "3-d", "int-dtype", "warps-6")
BACKWARD_CASES = (
    Case("contiguous", "contiguous", 5, 7, grad_layout="contiguous"),
    Case("transpose", "transpose", 7, 5, grad_layout="transpose"),
    Case("slice", "slice", 6, 9, grad_layout="slice"),
    Case("transposed-y", "transpose", 6, 9, grad_layout="contiguous"),
    Case("sliced-dy", "contiguous", 5, 6, grad_layout="slice"),
    Case("broadcast-dy", "transpose", 4, 33, grad_layout="row-broadcast"),
    Case("wide", "transpose", 3, 300, grad_layout="transposed-slice"),
    Case("width-one", "transpose", 5, 1, grad_layout="contiguous"),
    Case("float16", "transpose", 7, 5, dtype="float16", grad_layout="slice"),
    Case("bfloat16", "slice", 6, 9, dtype="bfloat16", grad_layout="transpose"),
    Case("zero-rows", "transpose", 0, 7, grad_layout="contiguous"),
    *(Case(f"reject-{kind}", bad_input=kind) for kind in BACKWARD_BAD_INPUTS),
)
"""`strided_softmax_backward`'s cases: y (`layout`) and dy (`grad_layout`) views, with the
same strides and with different ones, and bad inputs."""

OPS = {
    "strided_softmax": Op(
        "strided_softmax",
        "strided_softmax",
        _softmax_reference,
        exact=False,
        contracts=True,
        public=PUBLIC_CASES,
    ),
    "softmax_kernel": Op(
        "softmax_kernel",
        "launch_softmax",
        _softmax_reference,
        exact=False,
        contracts=False,
        public=PUBLIC_CASES,
    ),
    "copy_rows": Op(
        "copy_rows", "copy_rows", _copy_reference, exact=True, contracts=False, public=PUBLIC_CASES
    ),
    "strided_softmax_": Op(
        "strided_softmax_",
        "strided_softmax_",
        _softmax_reference,
        exact=False,
        contracts=True,
        public=INPLACE_CASES,
        kind="in-place",
    ),
    "strided_softmax_backward": Op(
        "strided_softmax_backward",
        "strided_softmax_backward",
        _backward_reference,
        exact=False,
        contracts=True,
        public=BACKWARD_CASES,
        kind="backward",
        normalized=False,
    ),
}


def suite(op: str, cases: tuple[Case, ...] | None = None, device: str = "cpu") -> list[Case]:
    """The cases that apply to `op` on `device` (kernel-level ops skip the contract cases),
    from `cases` or else `op`'s public cases."""
    chosen = []
    for case in OPS[op].public if cases is None else cases:
        contract_case = case.bad_input is not None or case.rows == 0
        if contract_case and not OPS[op].contracts:
            continue
        if case.bad_input == "cpu-input" and device == "cpu":
            continue  # the CPU is a valid device under the interpreter
        chosen.append(case)
    return chosen


def run_case(
    fn: Callable,
    op: str,
    case: Case,
    device: torch.device | str,
    seed: int,
    inputs: Inputs | None = None,
    seen: Observation | None = None,
) -> CaseResult:
    """Run `fn` on `case` and say whether, and how, it failed. The input is `inputs` (the
    storages a parent built and sent) or else built here from `seed`; `seen`, when given,
    records what each call returned and left in the storages, for a parent to judge."""
    inputs = inputs if inputs is not None else build_inputs(OPS[op].kind, case, seed)
    if OPS[op].kind != "new":
        from learning.workshops.checking import followons

        return followons.run_case(fn, OPS[op], case, torch.device(device), seed, inputs, seen)
    generator = torch.Generator().manual_seed(seed)
    if case.bad_input:
        return CaseResult.of(case, _run_bad_input(fn, case, device, generator, seen))
    with count_launches() as launches:
        verdict = _run_view(fn, OPS[op], case, torch.device(device), inputs, seen)
    return CaseResult.of(case, verdict, len(launches), case.cols)


@dataclass
class Call:
    """One call of the function under test on a case's view: what the checks look at."""

    fn: Callable
    op: Op
    case: Case
    label: str  # the call, as a later call returning the same tensor names it
    x: torch.Tensor
    storage: torch.Tensor  # the NaN-filled storage under `x`, after the call
    before: torch.Tensor  # the storage before the call
    out: object  # what the call returned, or the exception it raised
    launches: LaunchLog | None  # its launches and torch's reads of x; None: not recorded
    trace: Trace | None  # the ownership audit: under the interpreter, on CPU tensors only
    guards: Guards  # the guarded buffers the call allocated
    second: torch.Tensor | None  # a repeat's second values of the storage
    seen: Observation | None  # what the calls returned and left, for a parent to judge

    @property
    def reads(self) -> list[str]:
        """Torch operations that read the input outside a kernel."""
        return [] if self.launches is None else self.launches.torch_reads

    @cached_property
    def reference(self) -> torch.Tensor:
        return self.op.reference(self.x)

    @cached_property
    def wrong_values(self) -> Verdict | None:
        """How the output's values differ from the reference, or None when they do not."""
        return _compare(self.out, self.reference, self.x.dtype, self.op)

    @cached_property
    def findings(self) -> list[Finding]:
        """The audit's findings about the output and the loads (none without an audit)."""
        if self.trace is None or not self.case.rows:
            return []
        return self.trace.verify(self.x, self.out)

    @cached_property
    def fault(self) -> Finding | None:
        """The audit's first fault by `FAULT_ORDER`. Elements never written count only with
        right values: with wrong ones they are a symptom (a block too small, say)."""
        faults = [f for f in self.findings if f.fault]
        if faults and self.wrong_values:
            faults = [f for f in faults if f.kind != "unwritten"]
        rank = {kind: i for i, kind in enumerate(FAULT_ORDER)}
        return min(faults, key=lambda f: rank.get(f.kind, len(rank)), default=None)

    def found(self, failure: Failure, text: str) -> Verdict:
        """A verdict on the output; torch's reads of the input join it as evidence."""
        if self.reads:
            text = f"{text}; also {_outside(self.reads)}"
        return Verdict(failure, text)

    def again(self) -> Call:
        """A second call on the same storage, refilled with new values where it held no NaN."""
        self.storage.copy_(self.second.to(self.storage))
        before = self.storage.clone()
        out = _called(self.fn, self.x, num_warps=self.case.num_warps)
        if self.seen is not None:
            self.seen.saw(out, [self.storage])
            self.seen.saw_again(self.out)
        label = f"{self.case.name} (second call)"
        return replace(
            self, label=label, before=before, out=out, launches=None, trace=None, guards=Guards()
        )


Check = Callable[[Call], Verdict | None]


def _run_view(fn, op: Op, case: Case, device, inputs: Inputs, seen: Observation | None) -> Verdict:
    """Call `fn` on the case's view, audited and counted; the first check that finds a
    failure gives the verdict."""
    storage = inputs.storages[0].to(device, copy=True)
    x = view_of(storage, case.geometry)
    where, before = describe(x), storage.clone()
    with count_launches(watch=x) as launches, _audit(x) as trace, GuardAllocations() as mode:
        out = _called(fn, x, num_warps=case.num_warps)
    if seen is not None:
        seen.saw(out, [storage])
    second = inputs.second
    call = Call(
        fn, op, case, case.name, x, storage, before, out, launches, trace, mode.guards, second, seen
    )
    verdict = _first(CHECKS, call) or Verdict(None, "ok")
    return replace(verdict, text=f"{where}: {verdict.text}")


def _called(fn: Callable, *args: torch.Tensor, num_warps: int) -> object:
    """What `fn(*args, num_warps=...)` returned, or the exception it raised."""
    try:
        return fn(*args, num_warps=num_warps)
    except Exception as exc:  # the student's error is the evidence
        return exc


def _first(checks: tuple[Check, ...], call: Call) -> Verdict | None:
    """The verdict of the first check that finds a failure, or None when none does."""
    for check in checks:
        verdict = check(call)
        if verdict is not None:
            return verdict
    return None


def _audit(x: torch.Tensor) -> contextlib.AbstractContextManager[Trace | None]:
    """The ownership audit around one call, under the interpreter on CPU tensors only."""
    if interpreter_active() and x.device.type == "cpu":
        return audit([x])
    return contextlib.nullcontext()


def _outside(reads: list[str]) -> str:
    return f"torch read the input outside the kernel: {reads[0]}"


def _refused(call: Call) -> Verdict | None:
    """The audit refused a load or store before it touched memory."""
    if call.trace is None or call.trace.refused is None:
        return None
    finding = call.trace.verify(call.x)[0]
    return Verdict(AUDIT_FAILURES[finding.kind], finding.text)


def _raised(call: Call) -> Verdict | None:
    if not isinstance(call.out, Exception):
        return None
    return Verdict(_exception_kind(call.out), _raised_text(call.out))


def _past_allocation(call: Call) -> Verdict | None:
    """A store past the end of a buffer the call allocated (what a GPU shows, unaudited)."""
    stray = call.guards.stray()
    return Verdict(Failure(stray[0]), stray[1]) if stray else None


def _not_a_tensor(call: Call) -> Verdict | None:
    if isinstance(call.out, torch.Tensor):
        return None
    return call.found(
        Failure.NOT_A_TENSOR, f"returned {type(call.out).__name__}, expected a torch.Tensor"
    )


def _returned_before(call: Call) -> Verdict | None:
    """The tensor an earlier call returned (each output is remembered here, once)."""
    earlier = _RETURNED.remember(call.out, call.label)
    if not earlier:
        return None
    return call.found(
        Failure.STALE_OUTPUT, f"returned the very tensor an earlier call returned ({earlier})"
    )


def _changed(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    """Where two storages differ, NaN equal to NaN."""
    return (before.nan_to_num() != after.nan_to_num()) | (before.isnan() != after.isnan())


def _input_written(call: Call) -> Verdict | None:
    changed = _changed(call.before, call.storage)
    if not bool(changed.any()):
        return None
    index = int(changed.nonzero()[0])
    return call.found(Failure.INPUT_WRITTEN, f"the input's storage changed at index {index}")


def _wrong_shape(call: Call) -> Verdict | None:
    got, expected = tuple(call.out.shape), tuple(call.x.shape)
    if got == expected:
        return None
    return call.found(Failure.SHAPE, f"output shape {got}, expected {expected}")


def _wrong_dtype(call: Call) -> Verdict | None:
    got, expected = call.out.dtype, call.x.dtype
    if got == expected:
        return None
    return call.found(Failure.DTYPE, f"output dtype {got}, expected {expected} (the input's)")


def _wrong_device(call: Call) -> Verdict | None:
    got, expected = call.out.device, call.x.device
    if got == expected:
        return None
    return call.found(Failure.DEVICE, f"output on {got}, expected {expected} (the input's)")


def _not_contiguous(call: Call) -> Verdict | None:
    if call.out.is_contiguous():
        return None
    return call.found(
        Failure.LAYOUT,
        f"output has strides {tuple(call.out.stride())}; a new contiguous output has "
        f"strides {(call.x.shape[1], 1)}",
    )


def _launched_on_empty(call: Call) -> Verdict | None:
    count = len(call.launches)
    if call.case.rows or not count:
        return None
    return call.found(Failure.EMPTY_ROWS, f"{count} kernel launch(es) for an input with no rows")


def _no_launch(call: Call) -> Verdict | None:
    """No kernel ran: wrong values came from an earlier call, right ones from elsewhere."""
    if not call.case.rows or len(call.launches):
        return None
    wrong = call.wrong_values
    if wrong:
        return call.found(
            Failure.STALE_OUTPUT,
            f"no kernel ran and the values are wrong, as if from an earlier call; {wrong.text}",
        )
    return call.found(
        Failure.NO_KERNEL, "no Triton kernel was launched; the values came from elsewhere"
    )


def _torch_result(call: Call) -> Verdict | None:
    """Torch read the input and the output is not what the kernel wrote: torch's result."""
    if not call.reads or call.fault is None:
        return None
    if AUDIT_FAILURES[call.fault.kind] is not Failure.OWNERSHIP:
        return None
    text = f"{_outside(call.reads)}, and the output returned is not what the kernel wrote"
    return Verdict(Failure.COPY, text)


def _audit_fault(call: Call) -> Verdict | None:
    """A store into the input or past a row, a load off the view, an element written by two
    programs (or, with right values, by none): wrong whatever the values."""
    fault = call.fault
    return call.found(AUDIT_FAILURES[fault.kind], fault.text) if fault else None


def _values(call: Call) -> Verdict | None:
    """Wrong values; the audit's first finding joins them as evidence (an overrun, when it
    is one, names the failure)."""
    wrong = call.wrong_values if call.case.rows else None
    if wrong is None:
        return None
    if not call.findings:
        return call.found(wrong.failure, wrong.text)
    first = call.findings[0]
    failure = Failure.STORE_MASK if first.kind == "overrun" else wrong.failure
    return call.found(failure, f"{wrong.text}; audit: {first.text}")


def _torch_reads(call: Call) -> Verdict | None:
    """Right values, and torch read the input besides the kernel: a second pass over memory."""
    if not call.reads:
        return None
    return Verdict(Failure.COPY, f"{_outside(call.reads)}; the kernel must be the only reader of x")


def _second_call(call: Call) -> Verdict | None:
    """With `repeat`: a second call on new values in the same storage must give new results,
    and leave the first call's output as it was."""
    if not call.case.repeat:
        return None
    first_reference = call.reference
    second = call.again()
    verdict = _first(SECOND_CALL_CHECKS, second)
    if verdict is not None:
        return _as_second(verdict)
    if _compare(call.out, first_reference, call.x.dtype, call.op) is not None:
        text = "the first call's output changed when the function was called again"
        return Verdict(Failure.STALE_OUTPUT, text)
    return None


def _as_second(verdict: Verdict) -> Verdict:
    """A second call's verdict: the raise named as the second call's, wrong values as old."""
    if verdict.failure in (Failure.EXCEPTION, Failure.MEMORY):
        return replace(verdict, text=f"second call {verdict.text}")
    if verdict.failure in (Failure.VALUES, Failure.PERMUTED):
        return Verdict(Failure.STALE_OUTPUT, f"the second call with new values {verdict.text}")
    return verdict


CHECKS: tuple[Check, ...] = (
    _refused,  # the audit stopped an access, so the call raised: the access is the finding
    _raised,  # no output to look at
    _past_allocation,  # a store ran past a buffer (seen on a GPU): the values are moot
    _not_a_tensor,  # every check below reads a tensor
    _returned_before,  # an earlier call's tensor: nothing below would be about this call
    _input_written,  # a changed input changes the reference the values are compared with
    _wrong_shape,  # values compare only at one shape
    _wrong_dtype,  # dtype, device, layout: the allocation, before what the kernel put in it
    _wrong_device,
    _not_contiguous,  # the audit and the values read the output as new and contiguous
    _launched_on_empty,  # zero rows: a launch is all that is left to get wrong
    _no_launch,  # no kernel ran: the audit saw nothing, and the values are not the kernel's
    _torch_result,  # torch's result returned: the elements left unwritten are its symptom
    _audit_fault,  # a fault is wrong whatever the values, and explains wrong ones
    _values,  # wrong values, the audit's findings as evidence
    _torch_reads,  # right values, but torch read the input too: a second pass over memory
    _second_call,  # last: a repeat calls again only when the first call is right
)
"""What a call goes through, in order: the first check that finds a failure gives the
verdict. The checks after `_past_allocation` are about the output: torch's reads of the input
join their verdicts as evidence (`Call.found`)."""

SECOND_CALL_CHECKS: tuple[Check, ...] = (
    _raised,
    _not_a_tensor,
    _returned_before,
    _input_written,
    _wrong_shape,
    _wrong_dtype,
    _wrong_device,
    _not_contiguous,
    _values,
)
"""A repeat's second call, in the order of `CHECKS`: no audit or guard watched it, and its
launches and reads were not recorded."""


def _compare(out, ref, dtype, op: Op) -> Verdict | None:
    got = out.double()
    rtol, atol = (0.0, 0.0) if op.exact else TOLERANCES[dtype]
    close = torch.isclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)
    if bool(close.all()):
        return None
    bad = (~close).nonzero()
    r, c = (int(v) for v in bad[0])
    where = (
        f"{len(bad)} of {close.numel()} values differ; first at row {r}, column {c}: "
        f"got {got[r, c].item():.6g}, expected {ref[r, c].to(out.dtype).item():.6g}"
    )  # the expected value as the output's dtype holds it (no float32 1e-256)
    if bool((~torch.isfinite(got) & torch.isfinite(ref)).any()):
        return Verdict(Failure.NONFINITE, f"NaN or inf where the reference is finite; {where}")
    if torch.allclose(got.flatten().sort().values, ref.flatten().sort().values, rtol, atol):
        if torch.unique(ref).numel() < ref.numel() // 2:
            return Verdict(
                Failure.AMBIGUOUS,
                "the expected values, nearly all equal (rows of ±1e4 give one-hot rows), in "
                f"other places: wrong loads or wrong stores could do that; {where}",
            )
        return Verdict(Failure.PERMUTED, f"the right values in the wrong places; {where}")
    if not op.exact and op.normalized:
        sums = got.sum(dim=1)
        low = sums < 1 - 4 * rtol  # beyond the rounding of N outputs
        high = sums > 1 + 4 * rtol  # mass moved between rows, not lost: a layout problem
        if bool(low.any()) and not bool(high.any()):
            row = int(low.nonzero()[0])
            text = f"row {row} sums to {sums[row].item():.6g}, not 1; {where}"
            return Verdict(Failure.SUM_LOW, text)
    return Verdict(Failure.VALUES, where)


def _bad_input(kind: str, device, generator) -> tuple[torch.Tensor, int, tuple[str, ...]]:
    """The input for a bad-input case and the words its error message must contain."""
    if kind == "3-d":
        return torch.randn(2, 3, 4, generator=generator).to(device), 4, ("3-D", "(2, 3, 4)")
    if kind == "int-dtype":
        return (
            torch.randint(0, 9, (4, 5), generator=generator, dtype=torch.int32).to(device),
            4,
            ("int32",),
        )
    if kind == "warps-6":
        return torch.randn(4, 5, generator=generator).to(device), 6, ("6",)
    if kind == "cpu-input":
        return torch.randn(4, 5, generator=generator), 4, ("cpu", "CPU")
    raise ValueError(f"unknown bad input {kind!r}; choose one of {', '.join(BAD_INPUTS)}.")


def bad_input_case(kind: str, device, generator) -> tuple[tuple, int, str, tuple[str, ...]]:
    """A bad-input case's arguments, num_warps, description and the words its error must
    contain."""
    x, num_warps, words = _bad_input(kind, device, generator)
    what = (
        f"{tuple(x.shape)} {str(x.dtype).removeprefix('torch.')} on {x.device}, "
        f"num_warps={num_warps}"
    )
    return (x,), num_warps, what, words


def _run_bad_input(fn, case: Case, device, generator, seen: Observation | None = None) -> Verdict:
    """Call `fn` on a bad input: it must raise ValueError or TypeError naming the problem."""
    args, num_warps, what, words = bad_input_case(case.bad_input, device, generator)
    return _expect_refusal(fn, args, num_warps, what, words, seen)


def _expect_refusal(
    fn, args: tuple, num_warps: int, what: str, words: tuple[str, ...], seen=None
) -> Verdict:
    """`fn(*args)` must raise ValueError or TypeError with one of `words` in its message;
    `what` describes the input in the verdict."""
    out = _called(fn, *args, num_warps=num_warps)
    if seen is not None:
        seen.saw(out, [])
    return refusal_verdict(out, what, words)


def refusal_verdict(out: object, what: str, words: tuple[str, ...]) -> Verdict:
    """The verdict on a bad input's call from what it returned or raised (`out`, or its
    wire form: a dict with "raised" and "message")."""
    if isinstance(out, BaseException):
        out = returned_to_wire(out)
    if not isinstance(out, dict) or "raised" not in out:
        return Verdict(
            Failure.NOT_RAISED, f"{what}: accepted; it must raise ValueError or TypeError"
        )
    name, message = str(out["raised"]), str(out.get("message", ""))
    if out.get("refusal") in ("ValueError", "TypeError"):
        if any(word in message for word in words):
            return Verdict(None, f"{what}: refused ({name})")
        first = message.strip().splitlines()[0][:300] if message.strip() else ""
        return Verdict(
            Failure.UNCLEAR_ERROR,
            f"{what}: raised {name}({first!r}), which does not name "
            f"the problem (expected one of {', '.join(map(repr, words))} in the message)",
        )
    return Verdict(
        Failure.UNCLEAR_ERROR, f"{what}: raised {name}, expected ValueError or TypeError"
    )


def _exception_kind(exc: BaseException) -> Failure:
    """MEMORY when the call ran out of host or device memory, else EXCEPTION."""
    text = str(exc).lower()
    if isinstance(exc, MemoryError) or "can't allocate memory" in text or "out of memory" in text:
        return Failure.MEMORY
    return Failure.EXCEPTION


def _raised_text(exc: BaseException) -> str:
    """'raised Name: first line of its message', or 'raised Name' when it has none."""
    exc = _unwrapped(exc)
    message = _compile_error(exc) if isinstance(exc, CompilationError) else _first_line(exc)
    return f"raised {type(exc).__name__}" + (f": {message}" if message else "")


def _unwrapped(exc: BaseException) -> BaseException:
    """What the kernel itself raised: Triton's interpreter wraps it in an InterpreterError
    (once per nested @triton.jit call) whose __cause__ it is."""
    while isinstance(exc, InterpreterError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def _compile_error(exc: CompilationError) -> str:
    """Where Triton refused the kernel and why; its own first line is only "at 10:34:"."""
    why = exc.error_message or (_first_line(exc.__cause__) if exc.__cause__ else "")
    lineno = getattr(exc.node, "lineno", None)
    lines = (exc.src or "").splitlines()
    if lineno is None or not 0 < lineno <= len(lines):
        return why[:300]
    return f"kernel line {lineno}, `{lines[lineno - 1].strip()}`: {why}"[:300]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""
