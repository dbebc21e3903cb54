"""Guard the buffers a call allocates, so stray and missing stores show on a GPU too.

Under the interpreter the ownership audit sees every store. On a GPU nothing does, so
the checks make faults visible in memory instead: while the student's function runs, each
`torch.empty` of a floating dtype (how the contract's output is allocated) is served from a
larger buffer filled with NaN, with a NaN guard after the tensor. An element no program
wrote stays NaN, which the value checks see; a store that ran past the tensor's end (a
missing mask in its last row, or wrong strides) changes the guard, which `Guards.stray`
reports. The same
holds on the CPU, so both devices reach the same verdicts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from learning.workshops.checking.dispatch_mode import DispatchMode

GUARD_MIN = 1024
"""Elements of guard after each buffer at least: more than a block's lanes past a row."""
GUARD_MAX_BYTES = 2**26
"""Larger allocations are left unguarded: no case's output comes near 64 MiB, and the NaN
fill would touch every page of what a runaway allocation only reserves (a loop of 256 MiB
buffers spent 0.3-0.4 s filling each before it reached the memory limit)."""


@dataclass
class Guards:
    """The guarded allocations made while the mode was open."""

    buffers: list[tuple[torch.Tensor, int, tuple[int, ...]]] = field(default_factory=list)

    def stray(self) -> tuple[str, str] | None:
        """The first store past the end of an allocation, as a failure and its detail:
        "overrun" when the guard's first elements were written in one run (a row's lanes
        continued past the last column), "ownership" for stores landing further off."""
        for buffer, size, shape in self.buffers:
            written = (~buffer[size:].isnan()).nonzero().flatten()
            if not written.numel():
                continue
            count, first = int(written.numel()), int(written[0])
            what = f"the {shape} tensor the call allocated"
            if first == 0 and int(written[-1]) == count - 1 and count < max(shape[-1:] or (1,)):
                return "overrun", (
                    f"lanes past the last row's end were active: a store ran {count} "
                    f"element(s) past the end of {what}"
                )
            return "ownership", (
                f"a store landed {first + 1} element(s) past the end of {what} "
                f"({count} elements there written): stores at addresses the output does not have"
            )
        return None


class GuardAllocations(DispatchMode):
    """Serve floating-point `torch.empty` calls from NaN-filled buffers with a guard."""

    def __init__(self) -> None:
        super().__init__()
        self.guards = Guards()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is not torch.ops.aten.empty.memory_format or not _guarded(kwargs):
            return func(*args, **kwargs)
        layout = kwargs.get("memory_format")
        if layout not in (None, torch.contiguous_format):
            return func(*args, **kwargs)
        shape = tuple(int(n) for n in args[0])
        size = math.prod(shape)
        if size * _dtype(kwargs).itemsize > GUARD_MAX_BYTES:
            return func(*args, **kwargs)
        guard = max(GUARD_MIN, shape[-1] if shape else 1)
        buffer = func([size + guard], **kwargs)
        buffer.fill_(float("nan"))
        self.guards.buffers.append((buffer, size, shape))
        return buffer[:size].view(shape)


def _dtype(kwargs: dict) -> torch.dtype:
    return kwargs.get("dtype") or torch.get_default_dtype()


def _guarded(kwargs: dict) -> bool:
    """Whether an allocation is guarded: floating point, on the CPU or a GPU (on the meta
    device, say, a guard could not be read)."""
    device = torch.device(kwargs.get("device") or "cpu")
    return _dtype(kwargs).is_floating_point and device.type in ("cpu", "cuda")
