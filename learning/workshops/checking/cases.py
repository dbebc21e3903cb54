"""Run one case of an op: build its view, call the function, and say how it failed.

A case names a view (layout, shape, dtype, fill) or a bad input. Running it builds the
view inside a NaN-filled storage, calls the student's function, and compares against a
float64 reference, the storage before and after, and the kernel launches it made: the
checks in `CHECKS`, in order. The in-place and backward ops run in `followons`; the records
are in `records`, the ops and their public cases in `suites`; the names below that come from
those modules are kept here for the callers that import them from here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property

import torch

from learning.workshops.checking import followons
from learning.workshops.checking.allocations import GuardAllocations, Guards
from learning.workshops.checking.audit import Finding, Trace, audit
from learning.workshops.checking.audit_rules import contiguous_loads, verify
from learning.workshops.checking.bad_inputs import (
    BACKWARD_BAD_INPUTS,
    BAD_INPUTS,
    bad_input_case,
    run_bad_input,
)
from learning.workshops.checking.compare import TOLERANCES, changed, compare
from learning.workshops.checking.exchange import Inputs, Observation, build_inputs, view_of
from learning.workshops.checking.launch_record import record_launches
from learning.workshops.checking.launches import LaunchLog, count_launches
from learning.workshops.checking.raised import called, exception_kind, raised_text, refusal_verdict
from learning.workshops.checking.records import (
    AUDIT_FAILURES,
    DTYPES,
    Case,
    CaseResult,
    Failure,
    Verdict,
)
from learning.workshops.checking.suites import (
    BACKWARD_CASES,
    INPLACE_CASES,
    OPS,
    PUBLIC_CASES,
    Op,
    suite,
)
from learning.workshops.checking.untrusted import class_name, made
from learning.workshops.checking.views import describe
from learning.workshops.contracts import interpreter_active

__all__ = [  # kept for the callers that import them from here
    "BACKWARD_BAD_INPUTS",
    "BACKWARD_CASES",
    "BAD_INPUTS",
    "DTYPES",
    "INPLACE_CASES",
    "OPS",
    "PUBLIC_CASES",
    "TOLERANCES",
    "AUDIT_FAILURES",
    "Case",
    "CaseResult",
    "Failure",
    "Op",
    "Verdict",
    "bad_input_case",
    "refusal_verdict",
    "run_case",
    "suite",
]

FAULT_ORDER = ("input-store", "overrun", "stray-store", "stray-load", "duplicate", "footprint")
"""Which fault names the failure when a call shows several: a store into the input first,
then lanes past a row (the cause of the strays and races they make), then the rest.
Unwritten elements come last: they are usually what another fault left behind."""


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
        return followons.run_case(fn, OPS[op], case, torch.device(device), seed, inputs, seen)
    generator = torch.Generator().manual_seed(seed)
    if case.bad_input:
        return CaseResult.of(case, run_bad_input(fn, case, device, generator, seen))
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
        return compare(self.out, self.reference, self.x.dtype, self.op)

    @cached_property
    def findings(self) -> list[Finding]:
        """The audit's findings about the output and the loads (none without an audit)."""
        if self.trace is None or not self.case.rows:
            return []
        return verify(self.trace, self.x, self.out)

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
        with record_launches([self.storage]) as recording:
            out = called(self.fn, self.x, num_warps=self.case.num_warps)
        if self.seen is not None:
            self.seen.saw(out, [self.storage], recording)
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
    with (
        count_launches(watch=x) as launches,
        _audit(x) as trace,
        GuardAllocations() as mode,
        record_launches([storage]) as recording,
    ):
        out = called(fn, x, num_warps=case.num_warps)
    if seen is not None:
        seen.saw(out, [storage], recording)
    second = inputs.second
    call = Call(
        fn, op, case, case.name, x, storage, before, out, launches, trace, mode.guards, second, seen
    )
    verdict = _first(CHECKS, call) or Verdict(None, "ok")
    return replace(verdict, text=f"{where}: {verdict.text}")


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
    finding = verify(call.trace, call.x)[0]
    return Verdict(AUDIT_FAILURES[finding.kind], finding.text)


def _raised(call: Call) -> Verdict | None:
    if not made(call.out, Exception):
        return None
    return Verdict(exception_kind(call.out), raised_text(call.out))


def _past_allocation(call: Call) -> Verdict | None:
    """A store past the end of a buffer the call allocated (what a GPU shows, unaudited)."""
    stray = call.guards.stray()
    return Verdict(AUDIT_FAILURES[stray[0]], stray[1]) if stray else None


def _not_a_tensor(call: Call) -> Verdict | None:
    if made(call.out, torch.Tensor):
        return None
    return call.found(
        Failure.NOT_A_TENSOR, f"returned {class_name(call.out)}, expected a torch.Tensor"
    )


def _returned_before(call: Call) -> Verdict | None:
    """The tensor an earlier call returned (each output is remembered here, once)."""
    earlier = _RETURNED.remember(call.out, call.label)
    if not earlier:
        return None
    return call.found(
        Failure.STALE_OUTPUT, f"returned the very tensor an earlier call returned ({earlier})"
    )


def _input_written(call: Call) -> Verdict | None:
    moved = changed(call.before, call.storage)
    if not bool(moved.any()):
        return None
    index = int(moved.nonzero()[0])
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
    programs (or, with right values, by none): wrong whatever the values. Right values
    written twice are programs that overlap (a grid-stride loop's step, a grid too large)."""
    fault = call.fault
    if fault is None:
        return None
    if fault.kind == "duplicate" and call.wrong_values is None:  # right values, written twice
        return call.found(Failure.OVERLAP, fault.text)
    return call.found(AUDIT_FAILURES[fault.kind], fault.text)


def _values(call: Call) -> Verdict | None:
    """Wrong values; the audit's first finding joins them as evidence (an overrun, when it
    is one, names the failure, and so do loads at a contiguous tensor's addresses)."""
    wrong = call.wrong_values if call.case.rows else None
    if wrong is None:
        return None
    first = call.findings[0] if call.findings else None
    if first is not None and first.kind == "overrun":
        return call.found(Failure.STORE_MASK, f"{wrong.text}; audit: {first.text}")
    misread = contiguous_loads(call.trace, call.x, call.out) if call.trace else None
    if misread is not None:  # loads that ignore the strides: on a transpose, right values moved
        return call.found(AUDIT_FAILURES[misread.kind], f"{wrong.text}; audit: {misread.text}")
    if first is None:
        return call.found(wrong.failure, wrong.text)
    return call.found(wrong.failure, f"{wrong.text}; audit: {first.text}")


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
    if compare(call.out, first_reference, call.x.dtype, call.op) is not None:
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
