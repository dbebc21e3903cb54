"""What crosses between the checker and the child that runs a submission: data, never verdicts.

The parent builds every case's input itself (`build_inputs`: the NaN-filled storages the
views live in, and a repeat's second values) and sends their bytes; the child rebuilds them
on its device, calls the student's function and sends back what it saw (`Observation`): the
output's values and layout, or the exception, and each storage after the call. The parent
then judges that data against its own float64 reference (`judge`). Whatever else the child
reports (launches, the audit, torch's reads) can only fail a case, never pass one.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass

import torch

from learning.workshops.checking.launch_record import Recording
from learning.workshops.checking.raised import exception_kind, raised_text, refusal_facts
from learning.workshops.checking.records import DTYPES
from learning.workshops.checking.untrusted import class_name, made
from learning.workshops.checking.views import sentinel_view

WIRE_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
}
"""The dtypes a tensor may cross in; anything else is sent as its type's name only."""
MAX_TENSOR_BYTES = 64 * 1024**2
"""The most bytes one tensor may carry across; a larger output is reported by its layout."""
MAX_DIMS, MAX_SIZE = 8, 2**31
"""The most dimensions, and elements along one, of a tensor a child sends."""
TEXT_LIMIT = 300
"""Characters kept of any text a child sends (an exception's message, say)."""


class WireError(ValueError):
    """Data from a child that does not describe what it claims to."""


@dataclass
class Inputs:
    """One case's input, as the parent built it: the storages its views live in (on the CPU,
    before the call) and, for a repeat, the second call's values of the first storage."""

    storages: list[torch.Tensor]
    second: torch.Tensor | None = None

    def to_wire(self) -> dict:
        wire = {"storages": [tensor_to_wire(s) for s in self.storages]}
        if self.second is not None:
            wire["second"] = tensor_to_wire(self.second)
        return wire

    @classmethod
    def from_wire(cls, wire: dict, device: torch.device | str) -> Inputs:
        """The inputs a parent sent, on `device` (in the child)."""
        storages = [tensor_from_wire(s).to(device) for s in wire["storages"]]
        second = tensor_from_wire(wire["second"]) if "second" in wire else None
        return cls(storages, second)


def build_inputs(kind: str, case, seed: int) -> Inputs:
    """The storages of `case` for an op of `kind` ("new", "in-place", "backward"), drawn from
    `seed` on the CPU (a bad-input case has none: its input is the spec itself)."""
    if case.bad_input:
        return Inputs([])
    generator = torch.Generator().manual_seed(seed)
    dtype = DTYPES[case.dtype]
    if kind == "backward":
        y_storage, _ = sentinel_view(case.geometry, dtype, "cpu", generator)
        y_storage.abs_().div_(max(case.cols, 1))  # like a softmax's rows: positive, ~1/N each
        dy_storage, _ = sentinel_view(case.grad_geometry, dtype, "cpu", generator)
        return Inputs([y_storage, dy_storage])
    storage, _ = sentinel_view(case.geometry, dtype, "cpu", generator, case.fill)
    second = None
    if case.repeat:  # new values where the storage held data, the NaN sentinel kept
        fresh = torch.randn(storage.shape, generator=generator, dtype=torch.float64)
        second = torch.where(storage.isnan(), storage.double(), fresh).to(dtype)
    return Inputs([storage], second)


def view_of(storage: torch.Tensor, geometry) -> torch.Tensor:
    """The (rows x cols) view `geometry` describes over `storage`."""
    shape = (geometry.rows, geometry.cols)
    return torch.as_strided(storage, shape, geometry.strides, geometry.offset)


def tensor_to_wire(t: torch.Tensor) -> dict:
    """A tensor as data: its layout, and its logical values in row-major order as bytes
    (bounded by MAX_TENSOR_BYTES; a larger one, or an unknown dtype, goes without)."""
    dtype = str(t.dtype).removeprefix("torch.")
    wire = {
        "dtype": dtype,
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "device": t.device.type,
    }
    if dtype in WIRE_DTYPES and t.numel() * t.element_size() <= MAX_TENSOR_BYTES:
        flat = torch.empty(t.numel(), dtype=t.dtype)  # strides of any view, 0 and size 1 too
        flat.copy_(t.detach().reshape(-1))
        wire["data"] = base64.b64encode(flat.view(torch.uint8).numpy().tobytes()).decode()
    return wire


def tensor_from_wire(wire: object) -> torch.Tensor:
    """The CPU tensor a wire dict holds (contiguous, of its shape); WireError when it is not
    one, or its bytes do not fit its shape and dtype."""
    if not isinstance(wire, dict) or wire.get("dtype") not in WIRE_DTYPES:
        raise WireError("not a tensor of a known dtype")
    shape = wire.get("shape")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(_size(n) for n in shape):
        raise WireError("a tensor without a valid shape")
    dtype = WIRE_DTYPES[wire["dtype"]]
    data = wire.get("data")
    if not isinstance(data, str):
        raise WireError("a tensor without its values")
    raw = base64.b64decode(data.encode(), validate=True)
    size = torch.empty((), dtype=dtype).element_size()
    if len(raw) != math.prod(shape) * size:
        raise WireError(f"{len(raw)} bytes for a {tuple(shape)} {wire['dtype']} tensor")
    if not raw:  # no element: frombuffer refuses an empty buffer
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape)


def _size(n: object) -> bool:
    """Whether `n` is a tensor dimension's size as a child may send one."""
    return type(n) is int and 0 <= n <= MAX_SIZE


def returned_to_wire(value: object) -> dict:
    """What a call gave back, as data: a tensor, the exception it raised, or another type
    (its class's name: read past the object's own hooks, as every part of it here)."""
    if made(value, BaseException):
        facts = refusal_facts(value)  # the kind a bad input must raise, subclasses included
        return {
            **facts,
            "message": facts["message"][: 3 * TEXT_LIMIT],
            "text": raised_text(value)[:TEXT_LIMIT],
            "kind": str(exception_kind(value)),
        }
    if type(value) is torch.Tensor:  # a subclass runs the student's code: `raised.returned`
        return {"tensor": tensor_to_wire(value)}
    return {"type": class_name(value)}


class Observation:
    """What the child saw of one case, filled in as the runner calls the function: each
    call's returned value and the storages after it. `to_wire` is what the parent judges."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def saw(
        self,
        returned: object,
        storages: list[torch.Tensor],
        launches: Recording | None = None,
        **facts: bool | int | str,
    ) -> None:
        """One call: what it returned (or raised), its input storages afterwards, and the
        kernel launches it made (`launch_record`), which the parent replays."""
        call = {
            "returned": returned_to_wire(returned),
            "storages": [tensor_to_wire(s) for s in storages],
            **facts,
        }
        if launches is not None:
            call["launches"] = launches.to_wire(storages, returned)
        self.calls.append(call)

    def saw_again(self, first: object) -> None:
        """After a repeat's second call: the first call's output as it is now."""
        if self.calls:
            self.calls[-1]["first_after"] = returned_to_wire(first)

    def to_wire(self) -> dict:
        return {"calls": self.calls}
