"""GPU timing: raw samples from CUDA events; statistics are a separate step.

Every function here returns the milliseconds of each timed call. `cold` flushes the L2
cache before every call (by writing a buffer larger than it), `warm` times calls back to
back with the L2 left as the last call left it. Before each call the stream is kept busy
(the flush, or a short GPU spin in `warm`), so the CPU queues the call before the GPU gets
to it and the events time the GPU's work: without that, a kernel shorter than its Python
launch (tens of microseconds) would be timed as the launch. `interleaved` alternates
several functions call by call, so clock and thermal drift hit them alike: the way to
compare two kernels in one process.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch

MODES = ("cold", "warm")
FLUSH_BYTES = 512 * 1024 * 1024
"""Larger than any current L2 (an H200 has 60 MB, a B200 126 MB)."""


class NoCudaError(RuntimeError):
    """Timing needs a CUDA device; interpreter timings are not GPU figures."""


def require_cuda() -> None:
    """Raise NoCudaError, with one clear sentence, when no CUDA device is present."""
    if not torch.cuda.is_available():
        raise NoCudaError(
            "GPU timing needs a CUDA device and this machine has none; Triton's interpreter "
            "times Python, not a GPU, so nothing was measured."
        )


@dataclass(frozen=True)
class Stats:
    """Summary of one sample set, in milliseconds."""

    median_ms: float
    min_ms: float
    max_ms: float
    samples: int


def summarize(samples_ms: list[float]) -> Stats:
    """Median, min and max of `samples_ms`."""
    if not samples_ms:
        raise ValueError("no samples to summarize")
    return Stats(statistics.median(samples_ms), min(samples_ms), max(samples_ms), len(samples_ms))


HOLD_CYCLES = 400_000
"""GPU clock cycles of the spin before each warm call: about 0.2 ms at 2 GHz, longer than
the launch overhead it hides, and it touches no memory, so the L2 stays warm."""


class _Flusher:
    def __init__(self, device: torch.device) -> None:
        self.buffer = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        self.buffer.zero_()


def _hold() -> None:
    """Keep the current stream busy for HOLD_CYCLES without touching memory."""
    torch.cuda._sleep(HOLD_CYCLES)


def interleaved(
    fns: dict[str, Callable[[], object]],
    reps: int,
    mode: str,
    warmup: int = 5,
    device: torch.device | None = None,
) -> dict[str, list[float]]:
    """Time each function `reps` times, alternating between them call by call."""
    require_cuda()
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}.")
    device = device or torch.device("cuda", torch.cuda.current_device())
    before_each = _Flusher(device) if mode == "cold" else _hold
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize(device)
    events = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            before_each()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            events[name].append((start, end))
    torch.cuda.synchronize(device)
    return {name: [s.elapsed_time(e) for s, e in pairs] for name, pairs in events.items()}
