"""Count Triton kernel launches made inside a block of code.

Every launch, compiled or interpreted, goes through `KernelInterface.__getitem__`
(`kernel[grid](...)`); wrapping it tells the checks whether a kernel ran at all and
whether one ran for an input with no rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from triton.runtime.jit import KernelInterface


@dataclass
class Launch:
    """One `kernel[grid](...)` call."""

    kernel: str
    grid: tuple


@dataclass
class LaunchLog:
    """The launches seen while the context was open."""

    launches: list[Launch] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.launches)


def _grid_of(grid) -> tuple:
    if callable(grid):
        return ("callable",)
    return tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)


@contextlib.contextmanager
def count_launches() -> Iterator[LaunchLog]:
    """Record every kernel launch made while the block runs."""
    log = LaunchLog()
    original = KernelInterface.__getitem__

    def recording_getitem(kernel, grid):
        launch = original(kernel, grid)

        def run(*args, **kwargs):
            name = getattr(kernel, "__name__", type(kernel).__name__)
            log.launches.append(Launch(str(name), _grid_of(grid)))
            return launch(*args, **kwargs)

        return run

    KernelInterface.__getitem__ = recording_getitem
    try:
        yield log
    finally:
        KernelInterface.__getitem__ = original
