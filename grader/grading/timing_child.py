"""The timing child: times the student's kernel against the reference and writes the record.

`grader.grading.gpu_timing` starts it in the sandbox (`python -m grader.grading.timing_child`,
one of the few grader modules the timing sandbox sees, `grader.grading.runner.TIMING_KIT`),
and scores what it writes on the trusted side. The student's code runs in this process, so
here the timing checks two ways that it was not fooled: what the measurement relies on
(CUDA events, the clock, the reference) must be the same objects after the student's calls
as before, and the student's CUDA events must agree with the host's wall clock as well as
the reference's do (work hidden on a side stream escapes the events, not the clock). Exit
status: 0 with the record written, 1 when the student's code failed, 2 without a course
secret to draw from, 3 when the timing's own code failed.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import torch
import triton

import grader.reference as reference
from grader.grading.gpu_timing import _course_key, hidden_shapes, inputs_seed
from grader.grading.timing_record import SCHEMA, TEST, ShapeTiming, band
from learning.workshops.checking.child import context_lost
from learning.workshops.checking.faults import (
    INTERNAL_EXIT,
    call_student,
    fault_text,
    internal_message,
)
from learning.workshops.measuring.timing import interleaved, summarize
from learning.workshops.notebook.testing import quiet

REPS = 40
WALL_CALLS = 20
AGREEMENT = (0.5, 2.0)
"""Bounds on (student events / student wall clock) / (reference events / reference wall
clock). On the hidden shapes (64 MiB and more, GPU-bound) events and wall clock per call
agree within a few percent for both; work that escapes the events drives it towards 0."""


def _transposed(rows: int, cols: int, seed: int) -> torch.Tensor:
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(cols, rows, device="cuda", generator=generator).t()


def _correct(fn, x: torch.Tensor) -> bool:
    out = fn(x, 4)
    if not isinstance(out, torch.Tensor) or out.shape != x.shape or out.dtype != x.dtype:
        return False
    if out.device != x.device:
        return False
    want = torch.softmax(x.double(), dim=1)
    return bool(torch.allclose(out.double(), want, rtol=1e-5, atol=1e-6))


def wall_ms(fn, x: torch.Tensor, calls: int = WALL_CALLS) -> float:
    """Milliseconds per call of `calls` back-to-back calls, by the host's clock."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn(x, 4)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3 / calls


def events_disagree(student_ms, student_wall, reference_ms, reference_wall) -> str:
    """Why the student's events cannot be trusted, or "" when they agree with the clock as
    well as the reference's do."""
    agreement = (student_ms / student_wall) / (reference_ms / reference_wall)
    if AGREEMENT[0] <= agreement <= AGREEMENT[1]:
        return ""
    return (
        f"the CUDA events say {student_ms:.3f} ms a call but the wall clock says "
        f"{student_wall:.3f} ms (the reference: {reference_ms:.3f} and {reference_wall:.3f} ms): "
        "work ran outside the timed events"
    )


def time_shape(fn, reference_fn, rows: int, cols: int, seed: int) -> ShapeTiming:
    """Time `fn` against `reference_fn` on one transposed shape; cross-check the events
    with the wall clock; recheck the output on fresh inputs."""
    x = _transposed(rows, cols, seed)
    samples = interleaved(
        {"student": lambda: fn(x, 4), "reference": lambda: reference_fn(x, 4)},
        reps=REPS,
        mode="cold",
    )
    student, ref = summarize(samples["student"]), summarize(samples["reference"])
    student_wall, reference_wall = wall_ms(fn, x), wall_ms(reference_fn, x)
    ratio = student.median_ms / ref.median_ms
    fresh = _transposed(rows, cols, seed + 1)
    correct = _correct(fn, x) and _correct(fn, fresh)
    reason = "" if correct else "wrong output after timing (on the timed or on fresh inputs)"
    reason = reason or events_disagree(
        student.median_ms, student_wall, ref.median_ms, reference_wall
    )
    return ShapeTiming(
        rows,
        cols,
        student.median_ms,
        ref.median_ms,
        student.min_ms,
        student.max_ms,
        ratio,
        correct,
        0.0 if reason else band(ratio),
        reason,
        student_wall,
        reference_wall,
        sum(samples["student"]) + sum(samples["reference"]),
    )


def machinery() -> dict[str, object]:
    """What the measurement and the reference rely on, to compare by identity before and
    after the student's code ran in this process."""
    from triton.runtime.jit import JITFunction, KernelInterface

    import learning.workshops.measuring.timing as timing

    return {
        "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.Tensor.zero_": torch.Tensor.zero_,
        "torch.allclose": torch.allclose,
        "time.perf_counter": time.perf_counter,
        "triton KernelInterface.__getitem__": KernelInterface.__getitem__,
        "triton JITFunction.run": JITFunction.run,
        "grader.reference.strided_softmax": reference.strided_softmax,
        "grader.reference.softmax_kernel": reference.softmax_kernel,
        "learning.workshops.measuring.timing.interleaved": timing.interleaved,
        "learning.workshops.measuring.timing.summarize": timing.summarize,
    }


def replaced(before: dict[str, object]) -> list[str]:
    """The names in `before` that no longer refer to the same object."""
    now = machinery()
    return [name for name, obj in before.items() if now[name] is not obj]


def measure(
    impl: Path,
    out: Path,
    shapes: list[tuple[int, int]],
    seed: int,
    ready: Callable[[], object] | None = None,
) -> None:
    """Time the function in `impl` against the reference on `shapes`; write `out`. With
    `ready`, first call both once on each shape (their compiles), then wait for `ready()`
    to return before measuring."""
    from learning.workshops.checking.child import limit_memory
    from learning.workshops.checking.isolation import MEMORY_LIMIT_BYTES
    from learning.workshops.checking.loader import load_function
    from learning.workshops.contracts import select_mode

    limit_memory(MEMORY_LIMIT_BYTES)
    select_mode(verbose=False)
    before = machinery()
    reference_fn = reference.strided_softmax
    fn = functools.partial(call_student, "strided_softmax", load_function(impl, "strided_softmax"))
    if ready is not None:
        with quiet():
            for i, (rows, cols) in enumerate(shapes):
                x = _transposed(rows, cols, seed + i)
                fn(x, 4)
                reference_fn(x, 4)
            torch.cuda.synchronize()
        ready()
    started = time.monotonic()
    with quiet():
        timings = [
            time_shape(fn, reference_fn, rows, cols, seed + i)
            for i, (rows, cols) in enumerate(shapes)
        ]
    changed = replaced(before)
    if changed:
        why = f"the submission replaced {', '.join(changed)} while it was timed"
        timings = [replace(t, fraction=0.0, reason=why) for t in timings]
    fraction = sum(t.fraction for t in timings) / len(timings)
    _write_sidecar(out, timings, fraction, time.monotonic() - started)


def _write_sidecar(path: Path, timings, fraction: float, seconds: float) -> None:
    record = {
        "schema": SCHEMA,
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
    """Time a submission: exit 0 with the sidecar written, 1 when the student's code failed,
    2 without --shapes and --seed in a course with no secret to draw them from, 3 when the
    timing's own code failed (an internal error)."""
    from learning.workshops.checking.loader import LoadError

    parser = argparse.ArgumentParser(description="Time a submission against the reference.")
    parser.add_argument("--impl", required=True, help="the graded notebook or a .py file")
    parser.add_argument("--out", required=True, help="the sidecar JSON to write")
    parser.add_argument("--shapes", help="ROWSxCOLS,... (default: drawn from the secret)")
    parser.add_argument("--seed", type=int, help="the inputs' seed (default: from the secret)")
    parser.add_argument(
        "--course",
        help="the course whose secret draws the default shapes and seed (default: the course "
        "around the current folder)",
    )
    parser.add_argument(
        "--wait-for-go",
        action="store_true",
        help="compile both kernels on the shapes, then wait for a line on stdin to measure",
    )
    args = parser.parse_args(argv)
    key = None
    if not args.shapes or args.seed is None:  # drawn from the course secret
        from grader.seeding import MissingSecret

        try:
            key = _course_key(args.course)
        except MissingSecret as exc:
            print(f"gpu_timing: {exc}", file=sys.stderr)
            return 2
    try:
        shapes = _shapes(args.shapes) if args.shapes else hidden_shapes(key=key)
        seed = args.seed if args.seed is not None else inputs_seed(key)
        ready = sys.stdin.readline if args.wait_for_go else None
        measure(Path(args.impl), Path(args.out), shapes, seed, ready)
    except (LoadError, AssertionError) as exc:  # not loaded, or the student's function raised
        print(" ".join(str(exc).split()), file=sys.stderr)
        return 1
    except Exception as exc:
        lost = context_lost(torch.device("cuda")) if torch.cuda.is_initialized() else None
        if lost:  # the student's kernel killed the context; it surfaced in the timing's code
            print(f"the GPU context died: {lost}", file=sys.stderr)
            return 1
        print(" ".join(internal_message([f"{TEST}: {fault_text(exc)}"]).split()), file=sys.stderr)
        return INTERNAL_EXIT
    return 0


def _shapes(text: str) -> list[tuple[int, int]]:
    return [tuple(int(n) for n in shape.split("x")) for shape in text.split(",")]


if __name__ == "__main__":
    sys.exit(main())
