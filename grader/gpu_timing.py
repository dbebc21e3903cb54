"""Hidden GPU timing test: the student's kernel against the reference, same process.

Both run interleaved call by call on hidden transposed shapes with the L2 flushed before
every call, so drift and clocks hit them alike; the score comes from the ratio of medians,
never from an absolute time. Outputs are rechecked on fresh inputs after timing, and the
measurements go to a sidecar JSON beside the autograded notebook for the cohort report.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import triton

import grader.reference as reference
from grader.hidden import secret_seed
from grader.parallel import gpu_lock
from learning.workshops.testing import quiet
from learning.workshops.timing import interleaved, require_cuda, summarize

SIDECAR = "i1_timing.json"
SUBMISSION = "strided_softmax.ipynb"
CHILD_TIMEOUT_S = 300.0
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


def timing_points(
    max_points: float, impl: str | Path = SUBMISSION, sidecar: str | Path = SIDECAR
) -> float:
    """Points for the hidden timing cell: the mean band over the hidden shapes.

    The timing runs in a child process on the definitions in `impl` (the graded notebook):
    a crash or hang there scores 0 with its cause, and nothing the notebook's cells patch
    in the grading kernel (clocks, events, torch) reaches the measurement. Without a CUDA
    device this raises, with one sentence, so the cell fails and every other cell grades.
    """
    require_cuda()
    path, out = Path(impl).resolve(), Path(sidecar).resolve()
    out.unlink(missing_ok=True)
    command = [sys.executable, "-m", "grader.gpu_timing", "--impl", str(path), "--out", str(out)]
    root = str(Path(__file__).resolve().parents[1])
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    )
    try:
        with gpu_lock():  # parallel autograde: one timing per GPU at a time (I1_GPU_LOCK)
            done = subprocess.run(
                command, capture_output=True, text=True, env=env, timeout=CHILD_TIMEOUT_S
            )
        why = (
            ""
            if done.returncode == 0
            else _last_line(done.stderr) or f"exit status {done.returncode}"
        )
    except subprocess.TimeoutExpired:
        why = f"no result after {CHILD_TIMEOUT_S:.0f} s"
    if why or not out.is_file():
        out.write_text(
            json.dumps(
                {
                    "schema": "i1-timing/1",
                    "points": 0.0,
                    "max_points": max_points,
                    "shapes": [],
                    "error": why or "no timing written",
                },
                indent=2,
            )
            + "\n"
        )
        print(f"timing: 0 points: {why or 'no timing written'}")
        return 0.0
    record = json.loads(out.read_text())
    record["points"] = round(max_points * record["fraction"], 3)
    record["max_points"] = max_points
    out.write_text(json.dumps(record, indent=2) + "\n")
    return record["points"]


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def measure(impl: Path, out: Path) -> None:
    """Time the function in `impl` against the reference on the hidden shapes; write `out`."""
    from learning.workshops.contracts import select_mode
    from learning.workshops.loader import load_function

    select_mode(verbose=False)
    fn = load_function(impl, "strided_softmax")
    started = time.monotonic()
    with quiet():
        timings = [
            time_shape(fn, rows, cols, secret_seed() + i)
            for i, (rows, cols) in enumerate(hidden_shapes())
        ]
    fraction = sum(t.fraction for t in timings) / len(timings)
    _write_sidecar(out, timings, fraction, time.monotonic() - started)


def _write_sidecar(path: Path, timings, fraction: float, seconds: float) -> None:
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
        "fraction": fraction,
        "seconds": round(seconds, 2),
        "shapes": [asdict(t) for t in timings],
    }
    path.write_text(json.dumps(record, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Time a submission against the reference.")
    parser.add_argument("--impl", required=True, help="the graded notebook or a .py file")
    parser.add_argument("--out", required=True, help="the sidecar JSON to write")
    args = parser.parse_args(argv)
    measure(Path(args.impl), Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
