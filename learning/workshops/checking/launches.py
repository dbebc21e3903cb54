"""What a call ran: its Triton kernel launches, and torch reading the input outside them.

Launches are seen where every launch style ends up, so none escapes: under the
interpreter `InterpretedFunction.run` (JIT calls, autotuner and heuristics wrappers, and
the handles `warmup` returns there); on a GPU Triton's launch-enter hook, which the
compiled launcher calls for JIT calls and pre-compiled handles alike. The checks need to
know whether a kernel ran at all, and whether one ran for an input with no rows.

A torch dispatch mode sees every aten operation; one that reads the watched input's
memory outside a launch (a copy such as `x.contiguous()`, a dtype change, torch math) is a
second pass over memory that the direct path exists to avoid. Views, metadata and
allocations read nothing and are not recorded; torch work inside a launch call (the
interpreter's own, an autotuner's timing) is the launcher's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_leaves
from triton import knobs
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import KernelInterface

from learning.workshops.checking.dispatch_mode import DispatchMode

ALLOCATIONS = frozenset(
    {
        "empty_like",
        "new_empty",
        "new_empty_strided",
        "zeros_like",
        "ones_like",
        "full_like",
        "new_zeros",
        "new_ones",
        "new_full",
    }
)
"""Operations that take the input only for its shape, dtype and device."""

GLOSSES = {
    "clone": "a copy, as x.contiguous() or x.clone() makes",
    "_to_copy": "a copy with a new dtype or device, as x.to(...), x.float() or x.half() makes",
    "copy_": "a copy into another tensor, as y.copy_(x) makes",
    "_softmax": "torch.softmax",
}


@dataclass
class Launch:
    """One `kernel[grid](...)` call."""

    kernel: str
    grid: tuple


@dataclass
class LaunchLog:
    """The launches seen while the context was open, and torch's reads of the input."""

    launches: list[Launch] = field(default_factory=list)
    torch_reads: list[str] = field(default_factory=list)
    depth: int = 0  # launches in progress: torch inside them is the launcher's own work

    def __len__(self) -> int:
        return len(self.launches)


def _grid_of(grid) -> tuple:
    if callable(grid):
        return ("callable",)
    return tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)


def describe_read(name: str) -> str:
    """`aten.<name>`, with what students write to get it when that is known."""
    gloss = GLOSSES.get(name)
    return f"aten.{name} ({gloss})" if gloss else f"aten.{name} (torch compute on the input)"


def _reads_input(func, name: str, args, kwargs, storages: frozenset[int]) -> bool:
    if func.is_view or name in ALLOCATIONS:
        return False
    return any(
        isinstance(leaf, torch.Tensor)
        and leaf.numel() > 0
        and leaf.untyped_storage().data_ptr() in storages
        for leaf in tree_leaves((args, kwargs))
    )


def _torch_reads(log: LaunchLog, watch: torch.Tensor | tuple[torch.Tensor, ...] | None):
    """A dispatch mode that records operations reading `watch` (a tensor, or several)
    outside launches."""
    watched = [t for t in (watch if isinstance(watch, tuple) else (watch,)) if t is not None]
    storages = frozenset(t.untyped_storage().data_ptr() for t in watched if t.numel())
    if not storages:
        return contextlib.nullcontext()

    class ReadRecorder(DispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = func._schema.name.split("::")[-1]
            if log.depth == 0 and _reads_input(func, name, args, kwargs, storages):
                log.torch_reads.append(describe_read(name))
            return func(*args, **kwargs)

    return ReadRecorder()


@contextlib.contextmanager
def count_launches(
    watch: torch.Tensor | tuple[torch.Tensor, ...] | None = None,
) -> Iterator[LaunchLog]:
    """Record every kernel launch made while the block runs, and with `watch` (a tensor or
    several), every torch operation outside a launch that reads their memory."""
    log = LaunchLog()
    getitem = KernelInterface.__getitem__
    interpreted = InterpretedFunction.run

    def inside(call):
        log.depth += 1
        try:
            return call()
        finally:
            log.depth -= 1

    def launcher(kernel, grid):
        launch = getitem(kernel, grid)
        return lambda *args, **kwargs: inside(lambda: launch(*args, **kwargs))

    def interpreted_run(kernel, *args, grid, warmup, **kwargs):
        if not warmup:
            log.launches.append(Launch(kernel.__name__, _grid_of(grid)))
        return inside(lambda: interpreted(kernel, *args, grid=grid, warmup=warmup, **kwargs))

    def launch_entered(metadata) -> None:
        log.launches.append(Launch(_kernel_name(metadata), ("compiled",)))

    KernelInterface.__getitem__ = launcher
    InterpretedFunction.run = interpreted_run
    knobs.runtime.launch_enter_hook.add(launch_entered)
    try:
        with _torch_reads(log, watch):
            yield log
    finally:
        knobs.runtime.launch_enter_hook.remove(launch_entered)
        InterpretedFunction.run = interpreted
        KernelInterface.__getitem__ = getitem


def _kernel_name(metadata) -> str:
    """The launched kernel's name from the hook's metadata (a dict-like), if it has one."""
    try:
        return str(metadata["name"])
    except (KeyError, TypeError, IndexError):
        return "kernel"
