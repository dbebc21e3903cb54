"""Hidden GPU timing test: the student's kernel against the reference, same process.

Both run interleaved call by call on hidden transposed shapes with the L2 flushed before
every call, so drift and clocks hit them alike; the score comes from the ratio of medians,
never from an absolute time. Outputs are rechecked on fresh inputs after timing, and the
measurements go to a sidecar JSON beside the autograded notebook for the cohort report.

This module is the trusted side: the timing cell's `timing_points`, which starts the timing
child (`grader.grading.timing_child`, run in the sandbox, where the student's code runs),
reads back its record and scores it here, by the course's bands. The student's code runs in
the timing process, so the timing checks its own honesty three ways: the child checks that
what the measurement relies on (CUDA events, the clock, the reference) is the same objects
after the student's calls as before, and that the student's CUDA events agree with the
host's wall clock as well as the reference's do (work hidden on a side stream escapes the
events, not the clock); and this process, outside the student's reach, checks that the
events add up to less time than the whole timing process took. An exception in the timing's
own code (not the student's function, not a GPU context the student's kernel killed) is the
checker's: the child exits 3 and the cell raises `CheckerFault`.
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grader.grading.timing_record import (
    BANDS,
    SCHEMA,
    SIDECAR,
    SLOWEST_FRACTION,
    TEST,
    Band,
    band,
    from_json,
)
from learning.workshops.checking.child import child_env
from learning.workshops.checking.faults import (
    INTERNAL_ERROR,
    INTERNAL_EXIT,
    CheckerFault,
    internal_message,
)
from learning.workshops.checking.sidecars import RecordError
from learning.workshops.measuring.timing import require_cuda
from learning.workshops.notebook.testing import checker_faults, record_status

SUBMISSION = "strided_softmax.ipynb"
CHILD_TIMEOUT_S = 300.0
SHAPES = ((4096, 4096), (8192, 2048), (16384, 1024), (65536, 512), (2048, 8192))


def hidden_shapes(count: int = 2, key: str | None = None) -> list[tuple[int, int]]:
    """The timing shapes, drawn from `key` (a grading's draw; by default the draw of the
    course around the current folder, from its secret)."""
    return random.Random(f"{key or _course_key()}/timing").sample(SHAPES, count)


def inputs_seed(key: str) -> int:
    """The seed of the timed inputs of the draw whose key is `key`."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)


@dataclass(frozen=True)
class Sandbox:
    """How the timing child runs in a sandbox: `wrap` makes its command; `impl` and `record`
    are the notebook and the record as the child sees them, `record_here` where this
    process reads the record back; `key` draws the shapes and values."""

    wrap: object
    impl: str
    record: str
    record_here: Path
    key: str
    started: subprocess.Popen | None = None  # the child, when `start_ahead` started it


def timing_command(impl: str, record: str, key: str, wait_for_go: bool = False) -> list[str]:
    """The timing child's command: the shapes and the inputs' seed drawn from `key`."""
    shapes = ",".join(f"{r}x{c}" for r, c in hidden_shapes(key=key))
    command = [sys.executable, "-m", "grader.grading.timing_child", "--impl", impl]
    command += ["--out", record]
    command += ["--shapes", shapes, "--seed", str(inputs_seed(key))]
    return command + (["--wait-for-go"] if wait_for_go else [])


def start_ahead(sandbox: Sandbox) -> subprocess.Popen:
    """Start the sandboxed timing child now, beside other work: it loads the submission and
    compiles both kernels on the timed shapes, then waits on its stdin until `timing_points`
    lets it measure, with the GPU to itself. Its start (Python, torch, CUDA, the compiles)
    is then off the grading's critical path."""
    command = sandbox.wrap(timing_command(sandbox.impl, sandbox.record, sandbox.key, True))
    return subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )


def _let_measure(child: subprocess.Popen) -> tuple[int, str]:
    """Tell a child started ahead to measure; its exit status and stderr once it ends
    (TimeoutExpired, the child killed, after CHILD_TIMEOUT_S)."""
    try:
        child.stdin.write("go\n")
        child.stdin.flush()
    except OSError:  # it ended already: its status says why
        pass
    try:
        _, stderr = child.communicate(timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        raise
    return child.returncode, stderr


def timing_points(
    max_points: float,
    impl: str | Path = SUBMISSION,
    sidecar: str | Path = SIDECAR,
    sandbox: Sandbox | None = None,
    bands: Sequence[Band] = BANDS,
    slowest: float = SLOWEST_FRACTION,
) -> float:
    """Points for the hidden timing cell: the mean band over the hidden shapes (`bands`,
    and `slowest` for a correct kernel slower than all of them).

    The timing runs in a child process on the definitions in `impl` (the graded notebook):
    a crash or hang there scores 0 with its cause, and nothing the notebook's cells patch
    in the grading kernel (clocks, events, torch) reaches the measurement. Without a CUDA
    device this raises, with one sentence, so the cell fails and every other cell grades. When
    the timing's own code fails, this raises CheckerFault, which says it is not the student's.
    """
    if sandbox is None:
        from grader.grading.hidden import refuse_in_autograde

        refuse_in_autograde("timing_points")
    require_cuda()
    with checker_faults(TEST):
        impl, sidecar = Path(impl).resolve(), Path(sidecar).resolve()
        return _timing_points(max_points, impl, sidecar, sandbox, bands, slowest)


def _timing_points(
    max_points: float,
    path: Path,
    out: Path,
    sandbox: Sandbox | None,
    bands: Sequence[Band],
    slowest: float,
) -> float:
    from grader.gpu_lock import gpu_lock
    from grader.grading.hidden import last_line

    out.unlink(missing_ok=True)
    key = sandbox.key if sandbox else _course_key()
    impl, record = (sandbox.impl, sandbox.record) if sandbox else (str(path), str(out))
    command = timing_command(impl, record, key)
    if sandbox:
        command = sandbox.wrap(command)
    try:
        with gpu_lock():  # parallel autograde: one timing per GPU at a time (I1_GPU_LOCK)
            started = time.monotonic()
            if sandbox and sandbox.started:
                returncode, stderr = _let_measure(sandbox.started)
            else:
                done = subprocess.run(
                    command,
                    capture_output=True,
                    text=True,
                    env=child_env(),
                    timeout=CHILD_TIMEOUT_S,
                )
                returncode, stderr = done.returncode, done.stderr
            elapsed_s = time.monotonic() - started
        if returncode == INTERNAL_EXIT:
            _checker_failed(out, max_points, (stderr.strip().splitlines() or [""])[-1])
        why = "" if returncode == 0 else last_line(stderr) or f"exit status {returncode}"
    except subprocess.TimeoutExpired:
        why = f"no result after {CHILD_TIMEOUT_S:.0f} s"
    if sandbox and not why:  # the child wrote where it could; this process keeps the record
        from grader.isolation.scratch import read_regular

        try:
            out.write_bytes(read_regular(sandbox.record_here, 1_000_000))
        except OSError as exc:
            why = f"the timing process left no record it could read ({exc})"
    record = _read_record(out) if not why else None
    if record is not None:
        why = exceeds_process_time(record, elapsed_s) or _score(
            record, max_points, out, bands, slowest
        )
    elif not why:
        why = "the timing process wrote no readable record"
    if why:
        _write_failure(out, max_points, why)
        print(f"timing: 0 points: {why}")
        return 0.0
    for shape in record["shapes"]:
        if shape["reason"]:
            print(f"timing: {shape['rows']}x{shape['cols']} earns nothing: {shape['reason']}")
    out.write_text(json.dumps(record, indent=2) + "\n")
    return record["points"]


def _score(
    record: dict, max_points: float, out: Path, bands: Sequence[Band], slowest: float
) -> str:
    """Give the child's record its points, each shape's band worked out here from its ratio
    with the course's `bands`; why it is still no timing record, or ""."""
    for shape in record["shapes"]:
        ratio, honest = shape.get("ratio"), shape.get("correct") is True and not shape["reason"]
        if isinstance(ratio, (int, float)) and ratio > 0:  # else from_json says what is wrong
            shape["fraction"] = band(ratio, bands, slowest) if honest else 0.0
    if record["shapes"]:
        record["fraction"] = sum(s["fraction"] for s in record["shapes"]) / len(record["shapes"])
    record["points"] = round(max_points * record["fraction"], 3)
    record["max_points"] = max_points
    record["bands"] = [[b.limit, b.fraction] for b in bands]
    record["slowest_fraction"] = slowest
    try:
        from_json(record, out)
    except RecordError as exc:
        return f"the timing process wrote a bad record ({exc.reason})"
    return ""


def _write_failure(out: Path, max_points: float, why: str, internal: bool = False) -> None:
    """A timing record of 0 points that says why (and whether the checker was at fault)."""
    record = {"schema": SCHEMA, "points": 0.0, "max_points": max_points, "shapes": []}
    record["error"] = why
    if internal:
        record["internal_error"] = True
    out.write_text(json.dumps(record, indent=2) + "\n")


def _checker_failed(out: Path, max_points: float, line: str) -> None:
    """The timing child's own code failed (exit 3): record it as the checker's, and raise."""
    message = line or internal_message([f"{TEST}: the timing child exited {INTERNAL_EXIT}"])
    _write_failure(out, max_points, message, internal=True)
    record_status(TEST, INTERNAL_ERROR, internal_errors=[message])
    raise CheckerFault(message)


def _read_record(path: Path) -> dict | None:
    """The child's sidecar, or None when it is missing or lacks what the parent reads."""
    try:
        record = json.loads(path.read_text())
        numbers = [record["fraction"], record["seconds"]]
        numbers += [shape["events_ms"] for shape in record["shapes"]]
        keys = all({"rows", "cols", "reason"} <= shape.keys() for shape in record["shapes"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if keys and all(isinstance(n, (int, float)) for n in numbers):
        return record
    return None


def exceeds_process_time(record: dict, elapsed_s: float) -> str:
    """Why the child's record cannot be true, seen from outside it: its events or its own
    clock add up to more time than the whole child process took; "" when they fit."""
    events_s = sum(float(s["events_ms"]) for s in record["shapes"]) / 1e3
    claimed_s = max(events_s, float(record["seconds"]))
    if claimed_s <= elapsed_s:
        return ""
    return (
        f"the timing process ran {elapsed_s:.1f} s but its measurements add up to "
        f"{claimed_s:.1f} s: they were altered from inside the submission"
    )


def _course_key(course: str | None = None) -> str:
    """The key of the draw of no submission in particular, from the secret of `course` (default:
    the course around the current folder); MissingSecret without one."""
    from grader.grading.hidden import course_draw

    return course_draw(Path(course) if course else None).key
