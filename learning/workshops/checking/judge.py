"""The checker's own verdict on a case a child ran: from the data the child sent, never its word.

The child that loaded a submission runs the case's checks too (`cases.run_case`), with the
audit and the launch counter beside the call, but everything in that process can be replaced
by code that runs when the submission loads. So the parent, which built the input
(`exchange.build_inputs`), judges the output and the storages the child sent back
(`exchange.Observation`) against its own float64 reference, and a case passes only when both
verdicts pass (`settle`): the child's word can fail a case, never pass one.
"""

from __future__ import annotations

import torch

from learning.workshops.checking.bad_inputs import bad_case
from learning.workshops.checking.compare import changed, compare
from learning.workshops.checking.exchange import (
    TEXT_LIMIT,
    Inputs,
    WireError,
    tensor_from_wire,
    view_of,
)
from learning.workshops.checking.raised import refusal_verdict
from learning.workshops.checking.records import Case, CaseResult, Failure, Verdict
from learning.workshops.checking.suites import Op
from learning.workshops.checking.views import describe
from learning.workshops.contracts import shared_address

CHILD_TEXT_LIMIT = 2 * TEXT_LIMIT
"""Characters kept of a verdict's text that a child wrote."""


def settle(op: Op, case: Case, inputs: Inputs, child: CaseResult, seen: object) -> CaseResult:
    """The case's result: the child's failure when it reported one (its evidence names the
    bug best), else the parent's verdict on the data, else a pass."""
    launches = child.launches if isinstance(child.launches, int) else 0
    if not child.passed:
        verdict = Verdict(child.failure, child.verdict.text[:CHILD_TEXT_LIMIT])
        return CaseResult.of(case, verdict, max(0, launches), case.cols)
    verdict = judge(op, case, inputs, seen)
    if verdict.failure is None:
        verdict = Verdict(None, child.verdict.text[:CHILD_TEXT_LIMIT])
    return CaseResult.of(case, verdict, max(0, launches), case.cols)


def judge(op: Op, case: Case, inputs: Inputs, seen: object) -> Verdict:
    """The verdict on `case` from what the child saw (`Observation.to_wire()`)."""
    try:
        calls = seen.get("calls") if isinstance(seen, dict) else None
        if not isinstance(calls, list) or not calls or not all(isinstance(c, dict) for c in calls):
            raise WireError("no call of the function was reported")
        if case.bad_input:
            return _bad_input(op, case, calls[0])
        if op.kind == "backward":
            return _backward(op, case, inputs, calls[0])
        if op.kind == "in-place":
            return _in_place(op, case, inputs, calls[0])
        return _new(op, case, inputs, calls)
    except (WireError, KeyError, TypeError, ValueError, AttributeError) as exc:
        return Verdict(Failure.CRASH, f"the child's report of the call is not readable data: {exc}")


def _bad_input(op: Op, case: Case, call: dict) -> Verdict:
    generator = torch.Generator()  # the words do not depend on the values
    _, _, what, words = bad_case(case.bad_input, op.kind == "backward", "cpu", generator)
    return refusal_verdict(call["returned"], what, words)


def _raised(returned: dict) -> Verdict | None:
    if "raised" not in returned:
        return None
    kind = returned.get("kind")
    failure = Failure.MEMORY if kind == Failure.MEMORY.value else Failure.EXCEPTION
    text = str(returned.get("text") or f"raised {returned['raised']}")[:TEXT_LIMIT]
    return Verdict(failure, text)


def _storages_after(call: dict, befores: list[torch.Tensor]) -> list[torch.Tensor]:
    wires = call["storages"]
    if not isinstance(wires, list) or len(wires) != len(befores):
        raise WireError(f"{len(wires)} storages reported, {len(befores)} sent")
    afters = [tensor_from_wire(w) for w in wires]
    for before, after in zip(befores, afters, strict=True):
        if after.shape != before.shape or after.dtype != before.dtype:
            raise WireError("a storage came back with another shape or dtype")
    return afters


def _written(befores: list[torch.Tensor], afters: list[torch.Tensor], names: list[str]):
    for name, before, after in zip(names, befores, afters, strict=True):
        moved = changed(before, after)
        if bool(moved.any()):
            return Verdict(
                Failure.INPUT_WRITTEN,
                f"{name} storage changed at index {int(moved.nonzero()[0])}",
            )
    return None


def _output(returned: dict, shape: tuple, dtype: torch.dtype, what: str) -> Verdict | torch.Tensor:
    """The returned tensor's values when its type, shape, dtype and layout are right; else
    the verdict on what is wrong."""
    if "tensor" not in returned:
        kind = str(returned.get("type", "nothing"))[:100]
        return Verdict(Failure.NOT_A_TENSOR, f"returned {kind}, expected {what}")
    wire = returned["tensor"]
    got = tuple(wire["shape"])
    if got != shape:
        return Verdict(Failure.SHAPE, f"{what} shape {got}, expected {shape}")
    expected = str(dtype).removeprefix("torch.")
    if wire["dtype"] != expected:
        return Verdict(Failure.DTYPE, f"{what} dtype torch.{wire['dtype']}, expected {dtype}")
    if not _contiguous(got, tuple(wire["stride"])):
        return Verdict(
            Failure.LAYOUT, f"{what} has strides {tuple(wire['stride'])}, not contiguous"
        )
    return tensor_from_wire(wire)


def _contiguous(shape: tuple, stride: tuple) -> bool:
    """Whether `stride` lays `shape` out row-major without gaps (size-1 dimensions free)."""
    if 0 in shape:  # no element: any strides lay it out (torch calls it contiguous)
        return True
    expected = 1
    for size, step in zip(reversed(shape), reversed(stride), strict=True):
        if size > 1 and step != expected:
            return False
        expected *= size
    return True


def _values(op: Op, out: torch.Tensor, reference: torch.Tensor, dtype) -> Verdict | None:
    return compare(out, reference, dtype, op) if out.numel() else None


def _new(op: Op, case: Case, inputs: Inputs, calls: list[dict]) -> Verdict:
    x = view_of(inputs.storages[0], case.geometry)
    verdict = _one_call(op, case, inputs.storages[0], calls[0])
    if verdict is None and case.repeat:
        verdict = _again(op, case, inputs, calls, op.reference(x))
    where = describe(x)
    return Verdict(None, f"{where}: ok") if verdict is None else _at(where, verdict)


def _one_call(op: Op, case: Case, storage: torch.Tensor, call: dict) -> Verdict | None:
    x = view_of(storage, case.geometry)
    raised = _raised(call["returned"])
    if raised is not None:
        return raised
    written = _written([storage], _storages_after(call, [storage]), ["the input's"])
    if written is not None:
        return written
    out = _output(call["returned"], tuple(x.shape), x.dtype, "output")
    if isinstance(out, Verdict):
        return out
    return _values(op, out, op.reference(x), x.dtype) if case.rows else None


def _again(
    op: Op, case: Case, inputs: Inputs, calls: list[dict], first_reference
) -> Verdict | None:
    """A repeat: the second call on new values must be right, the first output unchanged."""
    if len(calls) < 2 or inputs.second is None:
        return Verdict(Failure.STALE_OUTPUT, "the second call with new values was not made")
    verdict = _one_call(op, case, inputs.second, calls[1])
    if verdict is not None:
        if verdict.failure in (Failure.VALUES, Failure.PERMUTED):
            return Verdict(Failure.STALE_OUTPUT, f"the second call with new values {verdict.text}")
        return Verdict(verdict.failure, f"second call: {verdict.text}")
    first = calls[1].get("first_after")
    first = _output(first, tuple(first_reference.shape), inputs.storages[0].dtype, "output")
    if isinstance(first, Verdict) or _values(op, first, first_reference, inputs.second.dtype):
        text = "the first call's output changed when the function was called again"
        return Verdict(Failure.STALE_OUTPUT, text)
    return None


def _in_place(op: Op, case: Case, inputs: Inputs, call: dict) -> Verdict:
    storage = inputs.storages[0]
    x = view_of(storage, case.geometry)
    where = describe(x)
    after = _storages_after(call, [storage])[0]
    returned = call["returned"]
    why = shared_address(x)
    if why is not None:
        if "raised" not in returned:
            return _at(where, Verdict(Failure.ALIASING, f"accepted, though {why}"))
        if returned.get("refusal") not in ("ValueError", "TypeError"):
            return _at(where, Verdict(Failure.UNCLEAR_ERROR, f"raised {returned['raised']}"))
        if bool(changed(storage, after).any()):
            return _at(where, Verdict(Failure.ALIASING, "refused only after writing the storage"))
        message = str(returned.get("message", ""))
        if str(tuple(x.stride())) not in message and "stride" not in message.lower():
            return _at(where, Verdict(Failure.UNCLEAR_ERROR, "the error does not name the strides"))
        return Verdict(None, f"{where}: refused, storage untouched")
    raised = _raised(returned)
    if raised is not None:
        return _at(where, raised)
    inside = torch.zeros(storage.shape, dtype=torch.bool)
    if x.numel():
        inside[view_of(torch.arange(storage.numel()), case.geometry).flatten()] = True
    moved = changed(storage, after) & ~inside
    if bool(moved.any()):
        index = int(moved.nonzero()[0])
        return _at(
            where,
            Verdict(Failure.OUTSIDE_VIEW, f"storage index {index}, outside the view, changed"),
        )
    if case.rows:
        wrong = _values(op, view_of(after, case.geometry), op.reference(x), x.dtype)
        if wrong is not None:
            return _at(where, wrong)
    if call.get("in_place") is not True:
        return _at(
            where, Verdict(Failure.NOT_IN_PLACE, "x was softmaxed, but the call returned another")
        )
    return Verdict(None, f"{where}: softmaxed in place")


def _backward(op: Op, case: Case, inputs: Inputs, call: dict) -> Verdict:
    y = view_of(inputs.storages[0], case.geometry)
    dy = view_of(inputs.storages[1], case.grad_geometry)
    where = f"y {describe(y)}; dy strides {tuple(dy.stride())}, offset {dy.storage_offset()}"
    raised = _raised(call["returned"])
    if raised is not None:
        return _at(where, raised)
    afters = _storages_after(call, inputs.storages)
    written = _written(inputs.storages, afters, ["y's", "dy's"])
    if written is not None:
        return _at(where, written)
    out = _output(call["returned"], tuple(y.shape), y.dtype, "dx")
    if isinstance(out, Verdict):
        return _at(where, out)
    if case.rows:
        wrong = _values(op, out, op.reference(y, dy), y.dtype)
        if wrong is not None:
            without_sum = (y.double() * dy.double()).to(y.dtype).double()
            if compare(out, without_sum, y.dtype, op) is None:
                wrong = Verdict(
                    Failure.ROW_SUM, f"dx equals y * dy: the row sum is missing; {wrong.text}"
                )
            return _at(where, wrong)
    return Verdict(None, f"{where}: dx matches")


def _at(where: str, verdict: Verdict) -> Verdict:
    return Verdict(verdict.failure, f"{where}: {verdict.text}")
