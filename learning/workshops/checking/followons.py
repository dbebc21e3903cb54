"""Run the optional exercises' cases: softmax in place over a view, and the backward pass.

`strided_softmax_(x)` softmaxes the view `x` over its own storage and returns `x`. Its
view sits in a NaN-filled storage like the main op's, so a store outside the view shows
there on any device; under the interpreter the audit also proves that each element is
written by one program and read only by it (`audit_in_place.verify_in_place`). A view whose
elements share an address must be refused before anything runs, the storage untouched.

`strided_softmax_backward(y, dy)` returns dx = y * (dy - sum(dy * y)) per row as a new
contiguous tensor, reading y and dy each through its own strides: the cases pair layouts
with the same strides and with different ones, so a kernel that reads dy with y's strides
fails only where they differ.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace

import torch

from learning.workshops.checking.allocations import GuardAllocations
from learning.workshops.checking.audit import OwnershipError, audit
from learning.workshops.checking.audit_in_place import verify_in_place
from learning.workshops.checking.audit_rules import verify
from learning.workshops.checking.bad_inputs import run_bad_input
from learning.workshops.checking.compare import changed, compare
from learning.workshops.checking.exchange import Inputs, Observation, view_of
from learning.workshops.checking.launch_record import record_launches
from learning.workshops.checking.launches import count_launches
from learning.workshops.checking.raised import called, first_line, is_stub, raised_text
from learning.workshops.checking.records import (
    AUDIT_FAILURES,
    Case,
    CaseResult,
    Failure,
    Verdict,
)
from learning.workshops.checking.suites import Op
from learning.workshops.checking.untrusted import class_name, made
from learning.workshops.checking.untrusted import text as message_of
from learning.workshops.checking.views import describe
from learning.workshops.contracts import interpreter_active, shared_address

IN_PLACE_FAILURES = {
    "outside-view": Failure.OUTSIDE_VIEW,
    "read-after-write": Failure.READ_AFTER_WRITE,
    "duplicate": Failure.OWNERSHIP,
    "stray-store": Failure.OUTSIDE_VIEW,
}
IN_PLACE_ORDER = ("outside-view", "stray-store", "duplicate", "read-after-write")


def run_case(
    fn: Callable,
    op: Op,
    case: Case,
    device: torch.device,
    seed: int,
    inputs: Inputs,
    seen: Observation | None = None,
) -> CaseResult:
    """Run `fn`, an in-place or backward op, on `case` (its storages `inputs`); say whether,
    and how, it failed. `seen` records each call for a parent to judge (`cases.run_case`).
    A call that raised the exercise's stub is `not-attempted`: the exercise is optional."""
    generator = torch.Generator().manual_seed(seed)
    if op.kind == "backward":
        if case.bad_input:
            verdict = run_bad_input(fn, case, device, generator, seen, backward=True)
            return CaseResult.of(case, _attempted(verdict))
        with count_launches() as launches:
            verdict = _run_backward(fn, op, case, device, inputs, seen)
    else:
        if case.bad_input:
            return CaseResult.of(case, _attempted(run_bad_input(fn, case, device, generator, seen)))
        with count_launches() as launches:
            verdict = _run_in_place(fn, op, case, device, inputs, seen)
    return CaseResult.of(case, _attempted(verdict), len(launches), case.cols)


def _attempted(verdict: Verdict) -> Verdict:
    """`verdict`, or `not-attempted` when the call raised the stub's NotImplementedError."""
    if verdict.failure is not None and is_stub(verdict.text):
        return Verdict(Failure.NOT_ATTEMPTED, verdict.text)
    return verdict


def _audited(*tensors: torch.Tensor, read_only: bool = True) -> contextlib.AbstractContextManager:
    """The audit around one call, under the interpreter on CPU tensors only; `tensors` are
    the inputs, protected from stores when `read_only`."""
    if interpreter_active() and all(t.device.type == "cpu" for t in tensors):
        return audit([t for t in tensors if t.numel()] if read_only else [])
    return contextlib.nullcontext()


# -- in place ---------------------------------------------------------------------------------


def _run_in_place(fn, op: Op, case: Case, device, inputs: Inputs, seen) -> Verdict:
    storage = inputs.storages[0].to(device, copy=True)
    x = view_of(storage, case.geometry)
    where = describe(x)
    why = shared_address(x)
    if why is not None:
        verdict = _refuses(fn, x, storage, case, why, seen)
    else:
        verdict = _in_place(fn, op, x, storage, case, seen)
    return replace(verdict, text=f"{where}: {verdict.text}")


def _refuses(fn, x: torch.Tensor, storage: torch.Tensor, case: Case, why: str, seen) -> Verdict:
    """A view whose elements share addresses (`why`): refused with an error naming its
    strides, before any launch, the storage untouched."""
    before = storage.clone()
    with count_launches() as launches:
        out = called(fn, x, num_warps=case.num_warps)
    if seen is not None:
        seen.saw(out, [storage])
    written = bool(changed(before, storage).any())
    if not made(out, Exception):
        said = f"accepted, though {why}" + ("; the storage was written" if written else "")
        return Verdict(Failure.ALIASING, f"{said}; refuse it (ValueError) before launching")
    if not made(out, ValueError, TypeError):
        return Verdict(
            Failure.UNCLEAR_ERROR, f"{raised_text(out)}, expected a ValueError naming the strides"
        )
    if written or len(launches):
        return Verdict(
            Failure.ALIASING,
            f"refused only after {len(launches)} launch(es)"
            + (" that wrote the storage" if written else "")
            + ": check the strides before launching",
        )
    message = message_of(out)
    named = str(tuple(x.stride())) in message or "stride" in message.lower()
    if not named:
        return Verdict(
            Failure.UNCLEAR_ERROR,
            f"raised {class_name(out)}({first_line(out)!r}), which does not name the "
            f"strides {tuple(x.stride())}",
        )
    return Verdict(None, f"refused ({class_name(out)}), storage untouched")


def _in_place(fn, op: Op, x: torch.Tensor, storage: torch.Tensor, case: Case, seen) -> Verdict:
    """A view with distinct addresses: softmaxed where it lies, nothing else touched."""
    expected = op.reference(x)
    before = storage.clone()
    outside = torch.ones(storage.shape, dtype=torch.bool, device=storage.device)
    if x.numel():
        outside[x.storage_offset() + _indices(x).flatten()] = False
    audited = _audited(x, read_only=False)
    with (
        count_launches(watch=x) as log,
        audited as trace,
        GuardAllocations() as mode,
        record_launches([storage]) as recording,
    ):
        out = called(fn, x, num_warps=case.num_warps)
    if seen is not None:
        in_place = made(out, torch.Tensor) and _same_view(out, x)
        seen.saw(out, [storage], recording, in_place=in_place)
    if trace is not None and trace.refused is not None:
        finding = verify(trace, x)[0]
        failure = IN_PLACE_FAILURES.get(finding.kind, AUDIT_FAILURES[finding.kind])
        return Verdict(failure, finding.text)
    if made(out, OwnershipError):
        return Verdict(Failure.OUTSIDE_VIEW, message_of(out))
    if made(out, Exception):
        return Verdict(Failure.EXCEPTION, raised_text(out))
    stray = mode.guards.stray()
    if stray:
        return Verdict(AUDIT_FAILURES[stray[0]], stray[1])
    moved = changed(before, storage) & outside
    if bool(moved.any()):
        index = int(moved.nonzero()[0])
        return Verdict(
            Failure.OUTSIDE_VIEW,
            f"storage index {index}, outside the view, changed: stores must land only at "
            "the view's own elements",
        )
    findings = verify_in_place(trace, x) if trace is not None and case.rows else []
    rank = {kind: i for i, kind in enumerate(IN_PLACE_ORDER)}
    faults = sorted((f for f in findings if f.kind in rank), key=lambda f: rank[f.kind])
    wrong = compare(x, expected, x.dtype, op) if case.rows else None
    if faults:
        text = faults[0].text + (f"; {wrong.text}" if wrong else "")
        return Verdict(IN_PLACE_FAILURES[faults[0].kind], text)
    if case.rows and not len(log):
        return Verdict(Failure.NO_KERNEL, "no Triton kernel was launched; x was written by torch")
    if not case.rows and len(log):
        return Verdict(Failure.EMPTY_ROWS, f"{len(log)} kernel launch(es) for a view with no rows")
    if wrong:
        evidence = [f.text for f in findings]
        return Verdict(wrong.failure, wrong.text + (f"; audit: {evidence[0]}" if evidence else ""))
    if log.torch_reads:
        return Verdict(
            Failure.COPY,
            f"torch read x outside the kernel: {log.torch_reads[0]}; read and write the view "
            "through its strides in the kernel alone",
        )
    if not (made(out, torch.Tensor) and _same_view(out, x)):
        what = class_name(out) if not made(out, torch.Tensor) else "another tensor"
        return Verdict(Failure.NOT_IN_PLACE, f"x was softmaxed, but the call returned {what}")
    return Verdict(None, "softmaxed in place")


def _indices(x: torch.Tensor) -> torch.Tensor:
    """The view's element offsets from its first element, on its device."""
    rows = torch.arange(x.shape[0], device=x.device).unsqueeze(1) * x.stride(0)
    return rows + torch.arange(x.shape[1], device=x.device) * x.stride(1)


def _same_view(out: torch.Tensor, x: torch.Tensor) -> bool:
    return out.data_ptr() == x.data_ptr() and out.shape == x.shape and out.stride() == x.stride()


# -- backward ---------------------------------------------------------------------------------


def _run_backward(fn, op: Op, case: Case, device, inputs: Inputs, seen) -> Verdict:
    y_storage, dy_storage = (s.to(device, copy=True) for s in inputs.storages)
    y, dy = view_of(y_storage, case.geometry), view_of(dy_storage, case.grad_geometry)
    where = f"y {describe(y)}; dy strides {tuple(dy.stride())}, offset {dy.storage_offset()}"
    verdict = _backward(fn, op, case, y, dy, (y_storage, dy_storage), seen)
    return replace(verdict, text=f"{where}: {verdict.text}")


def _backward(fn, op: Op, case: Case, y, dy, storages, seen) -> Verdict:
    befores = [s.clone() for s in storages]
    with (
        count_launches(watch=(y, dy)) as log,
        _audited(y, dy) as trace,
        GuardAllocations() as mode,
        record_launches(storages) as recording,
    ):
        out = called(fn, y, dy, num_warps=case.num_warps)
    if seen is not None:
        seen.saw(out, list(storages), recording)
    if trace is not None and trace.refused is not None:
        finding = verify(trace, y)[0]
        return Verdict(AUDIT_FAILURES[finding.kind], finding.text)
    if made(out, Exception):
        return Verdict(Failure.EXCEPTION, raised_text(out))
    stray = mode.guards.stray()
    if stray:
        return Verdict(AUDIT_FAILURES[stray[0]], stray[1])
    for name, before, after in zip(("y", "dy"), befores, storages, strict=True):
        moved = changed(before, after)
        if bool(moved.any()):
            index = int(moved.nonzero()[0])
            return Verdict(Failure.INPUT_WRITTEN, f"{name}'s storage changed at index {index}")
    if not made(out, torch.Tensor):
        return Verdict(Failure.NOT_A_TENSOR, f"returned {class_name(out)}, expected dx")
    shape = tuple(y.shape)
    if tuple(out.shape) != shape:
        return Verdict(Failure.SHAPE, f"dx has shape {tuple(out.shape)}, expected {shape}")
    if out.dtype != y.dtype:
        return Verdict(Failure.DTYPE, f"dx dtype {out.dtype}, expected {y.dtype} (y's)")
    if out.device != y.device:
        return Verdict(Failure.DEVICE, f"dx on {out.device}, expected {y.device} (y's)")
    if not out.is_contiguous():
        return Verdict(Failure.LAYOUT, f"dx has strides {tuple(out.stride())}, not contiguous")
    if not case.rows:
        if len(log):
            return Verdict(Failure.EMPTY_ROWS, f"{len(log)} kernel launch(es) for no rows")
        return Verdict(None, "empty dx, no launch")
    if not len(log):
        return Verdict(Failure.NO_KERNEL, "no Triton kernel was launched; dx came from torch")
    findings = verify(trace, y, out) if trace is not None else []
    faults = [f for f in findings if f.fault and f.kind != "unwritten"]
    expected = op.reference(y, dy)
    wrong = compare(out, expected, y.dtype, op)
    if faults:
        text = faults[0].text + (f"; {wrong.text}" if wrong else "")
        return Verdict(AUDIT_FAILURES[faults[0].kind], text)
    if wrong:
        without_sum = (y.double() * dy.double()).to(y.dtype).double()
        if compare(out, without_sum, y.dtype, op) is None:
            return Verdict(
                Failure.ROW_SUM, f"dx equals y * dy: the row sum is missing; {wrong.text}"
            )
        return Verdict(wrong.failure, wrong.text)
    if log.torch_reads:
        return Verdict(
            Failure.COPY,
            f"torch read y or dy outside the kernel: {log.torch_reads[0]}; pass the views and "
            "their strides to the kernel",
        )
    return Verdict(None, "dx matches")
