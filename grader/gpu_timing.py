"""Hidden GPU timing test: the student's kernel against the reference, same process.

Both run interleaved call by call on hidden transposed shapes with the L2 flushed before
every call, so drift and clocks hit them alike; the score comes from the ratio of medians,
never from an absolute time. Outputs are rechecked on fresh inputs after timing, and the
measurements go to a sidecar JSON beside the autograded notebook for the cohort report.
"""

from __future__ import annotations

import json
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import triton

import grader.reference as reference
from grader.hidden import secret_seed
from learning.workshops.testing import quiet
from learning.workshops.timing import interleaved, require_cuda, summarize

SIDECAR = "i1_timing.json"
SHAPES = ((4096, 4096), (8192, 2048), (16384, 1024), (65536, 512), (2048, 8192))
BANDS = ((1.10, 1.0), (1.5, 0.75), (2.5, 0.5), (5.0, 0.25))
"""(largest student/reference ratio, fraction of the points). Slower but correct kernels
get 0.1; wrong ones 0. From H200 runs (README, results): two runs of the same kernel differ
by 0.3% at most and the reference timed against itself gives 1.00, so 1.10 leaves a wide
margin for noise; copying first costs 1.17-1.26x, so it lands in the 0.75 band; a kernel
that reads its input twice would cost about 2x."""
SLOWEST_FRACTION = 0.1
REPS = 40


@dataclass(frozen=True)
class ShapeTiming:
    """One hidden shape: both medians, their ratio, and whether the outputs held up."""

    rows: int
    cols: int
    student_ms: float
    reference_ms: float
    student_min_ms: float
    student_max_ms: float
    ratio: float
    correct: bool
    fraction: float
    reason: str


def band(ratio: float) -> float:
    """The fraction of the points a correct kernel earns at this student/reference ratio."""
    for limit, fraction in BANDS:
        if ratio <= limit:
            return fraction
    return SLOWEST_FRACTION


def hidden_shapes(count: int = 2) -> list[tuple[int, int]]:
    """The timing shapes, drawn from the secret seed (the same for every student)."""
    return random.Random(f"{secret_seed()}/timing").sample(SHAPES, count)


def _transposed(rows: int, cols: int, seed: int) -> torch.Tensor:
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(cols, rows, device="cuda", generator=generator).t()


def _correct(fn, x: torch.Tensor) -> bool:
    out = fn(x, 4)
    if not isinstance(out, torch.Tensor) or out.shape != x.shape or out.dtype != x.dtype:
        return False
    want = torch.softmax(x.double(), dim=1)
    return bool(torch.allclose(out.double(), want, rtol=1e-5, atol=1e-6))


def time_shape(fn, rows: int, cols: int, seed: int) -> ShapeTiming:
    """Time `fn` against the reference on one transposed shape; recheck on fresh inputs."""
    x = _transposed(rows, cols, seed)
    samples = interleaved(
        {"student": lambda: fn(x, 4), "reference": lambda: reference.strided_softmax(x, 4)},
        reps=REPS,
        mode="cold",
    )
    student, ref = summarize(samples["student"]), summarize(samples["reference"])
    ratio = student.median_ms / ref.median_ms
    fresh = _transposed(rows, cols, seed + 1)
    correct = _correct(fn, x) and _correct(fn, fresh)
    fraction = band(ratio) if correct else 0.0
    reason = "" if correct else "wrong output after timing (on the timed or on fresh inputs)"
    return ShapeTiming(
        rows,
        cols,
        student.median_ms,
        ref.median_ms,
        student.min_ms,
        student.max_ms,
        ratio,
        correct,
        fraction,
        reason,
    )


def timing_points(fn, max_points: float, sidecar: str | Path = SIDECAR) -> float:
    """Points for the hidden timing cell: the mean band over the hidden shapes.

    Without a CUDA device this raises, with one sentence, so the cell fails on its own and
    every other cell still grades.
    """
    require_cuda()
    started = time.monotonic()
    with quiet():
        timings = [
            time_shape(fn, rows, cols, secret_seed() + i)
            for i, (rows, cols) in enumerate(hidden_shapes())
        ]
    fraction = sum(t.fraction for t in timings) / len(timings)
    points = round(max_points * fraction, 3)
    _write_sidecar(Path(sidecar), timings, points, max_points, time.monotonic() - started)
    return points


def _write_sidecar(path: Path, timings, points, max_points, seconds: float) -> None:
    record = {
        "schema": "i1-timing/1",
        "device": torch.cuda.get_device_name(),
        "versions": {
            "torch": torch.__version__,
            "triton": triton.__version__,
            "python": sys.version.split()[0],
        },
        "mode": "cold",
        "reps": REPS,
        "points": points,
        "max_points": max_points,
        "seconds": round(seconds, 2),
        "shapes": [asdict(t) for t in timings],
    }
    path.write_text(json.dumps(record, indent=2) + "\n")
