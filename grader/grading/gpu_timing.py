"""Hidden GPU timing test: the student's kernel against the reference, timed from outside both.

Two processes serve timed calls (`learning.workshops.measuring.timed_calls`): one runs the
course's reference and never loads student code; the other runs the student's function in
the submission's sandbox and never has the reference, this module or the secret. This
process, the trusted side, owns the measurement:

- it draws every timed command's input seed from the grading's draw, and gives it to a
  server only when it starts that command's clock, through the server's gate (a page the
  device waits on): each input is fresh and unknown until its call starts, so a replayed,
  cached or early answer is wrong;
- it gives each seed to both servers in turn, interleaved command by command (the order
  swapped every round), and times each command by its own clock, from opening the gate to
  reading the reply; the server synchronises the device before the command and before the
  reply, so work a call leaves running counts against it;
- it subtracts the cost of the harness around the call (drawing the input, the checksum,
  the two round trips), timed the same way on the reference's server ("null" calls);
- it compares every call's checksum with the reference's on the same input, and some rows
  of a sample of calls in full: a shape earns timing points only when all of them hold;
- it refuses a time below what a plain device copy of the same bytes takes in the same run
  (the physics floor): 0 points, the reason in the record and the log;
- between its calls the student's processes are stopped (SIGSTOP), and after them the
  reference is timed again alone: a reference slower beside the submission than alone means
  the submission's work kept the GPU busy, and its timing earns nothing;
- it holds the GPU lock exclusively (`grader.gpu_lock`): no other submission's code holds
  the GPU while it times.

Scores come from the ratio of the student's time to the reference's, by the course's bands.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from grader.grading.timing_record import (
    BANDS,
    SCHEMA,
    SIDECAR,
    SLOWEST_FRACTION,
    TEST,
    Band,
    ShapeTiming,
    band,
    from_json,
)
from grader.grading.timing_servers import (
    LOAD_TIMEOUT_S,
    OUT_OF_MEMORY,
    SEED_BITS,
    Server,
    TimingFailed,
)
from learning.workshops.checking.faults import (
    INTERNAL_ERROR,
    CheckerFault,
    internal_message,
)
from learning.workshops.checking.sidecars import RecordError
from learning.workshops.measuring.timing import require_cuda
from learning.workshops.notebook.testing import checker_faults, record_status

SUBMISSION = "strided_softmax.ipynb"
SHAPES = ((4096, 4096), (8192, 2048), (16384, 1024), (65536, 512), (2048, 8192))
SERVER = "learning.workshops.measuring.timed_calls"
REFERENCE = Path(__file__).resolve().parents[1] / "reference.py"
REPS = 21
"""Timed commands of each server per shape (odd: the median is one command's)."""
CALLS = 30
"""Calls in one timed command, back to back, each on a fresh input, queued by the host behind
the command's gate before the clock starts: the command's time is the GPU's work, not
Python's or the pipe's."""
ALONE_REPS = 7
"""The reference's commands per shape once the student's processes are gone."""
ROW_SAMPLES = 3
"""Commands per shape whose last output's rows are compared in full, ROWS_PER_SAMPLE rows
each."""
ROWS_PER_SAMPLE = 8
FLOOR = 0.9
"""A student time below this share of a plain device copy of the same bytes is refused: a
softmax reads and writes every element, so it cannot beat a copy, and the margin is the
measurement's noise (a few percent on the H200)."""
INTERFERENCE = 1.10
"""The reference beside the submission at most this much slower than alone."""
RETRIES = 1
"""Whole timings run again when the reference was disturbed, or the student's server ran
out of GPU memory, before the submission is held responsible."""


def _server_argv(impl: str) -> list[str]:
    fds = ["--reply-fd", "{reply_fd}", "--gate-fd", "{gate_fd}"]
    return [sys.executable, "-m", SERVER, "--impl", impl, *fds]


def hidden_shapes(count: int = 2, key: str | None = None) -> list[tuple[int, int]]:
    """The timing shapes, drawn from `key` (a grading's draw; by default the draw of the
    course around the current folder, from its secret)."""
    return random.Random(f"{key or _course_key()}/timing").sample(SHAPES, count)


@dataclass
class Sandbox:
    """How the student's server runs: `wrap` makes its sandboxed command, `impl` is the
    notebook as the sandbox sees it, `key` the grading's draw."""

    wrap: Callable[[list[str]], list[str]]
    impl: str
    key: str
    started: Servers | None = None  # the servers, when `start_ahead` started them


@dataclass
class Servers:
    """Both servers, started and warmed on the shapes in a thread (`start_ahead`)."""

    sandbox: Sandbox
    shapes: list[tuple[int, int]]
    student: Server | None = None
    reference: Server | None = None
    failure: str = ""  # why the student's server did not get ready
    device: str = ""
    ready: threading.Event = field(default_factory=threading.Event)
    closing: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        try:
            self.reference = Server(_server_argv(str(REFERENCE)), stoppable=False)
            command = self.sandbox.wrap(_server_argv(self.sandbox.impl))
            self.student = Server(command, stoppable=True)
            self.device = self.reference.first()["device"]
            try:
                self.student.first()
                for i, (rows, cols) in enumerate(self.shapes):
                    self.student.call("warm", rows, cols, 2, i, LOAD_TIMEOUT_S)
            except TimingFailed as exc:
                self.failure = str(exc)
            for i, (rows, cols) in enumerate(self.shapes):
                self.reference.call("warm", rows, cols, 2, i, LOAD_TIMEOUT_S)
        except Exception as exc:  # the reference's side: the checker's fault, said in full
            detail = getattr(exc, "detail", "")
            said = f"internal: {type(exc).__name__}: {exc}"
            self.failure = said + (f" ({detail})" if detail else "")
        finally:
            if self.student:
                self.student.halt()
            self.ready.set()

    def start_and_stay(self) -> None:
        """`start`, then keep this thread until `close`: bubblewrap's --die-with-parent ends
        a sandbox when the thread that started it ends."""
        self.start()
        self.closing.wait()

    def close(self) -> None:
        self.closing.set()
        for server in (self.student, self.reference):
            if server is not None:
                server.close()
        self.student = self.reference = None


def start_ahead(sandbox: Sandbox) -> Servers:
    """Start both servers now, beside other work: they load and compile on the timed shapes
    in a thread, and the student's then waits, stopped, until `timing_points` measures."""
    servers = Servers(sandbox, hidden_shapes(key=sandbox.key))
    thread = threading.Thread(target=servers.start_and_stay, daemon=True)
    thread.start()
    return servers


def timing_points(
    max_points: float,
    impl: str | Path = SUBMISSION,
    sidecar: str | Path = SIDECAR,
    sandbox: Sandbox | None = None,
    bands: Sequence[Band] = BANDS,
    slowest: float = SLOWEST_FRACTION,
    refused: str = "",
) -> float:
    """Points for the hidden timing cell: the mean band over the hidden shapes (`bands`,
    and `slowest` for a correct kernel slower than all of them); none, with the reason
    written in the record, when the trusted side `refused` the timing (its hidden cases
    showed outputs that no kernel of the submission computed).

    Without a CUDA device this raises, with one sentence, so the cell fails and every other
    cell grades. When the timing's own code fails, this raises CheckerFault, which says it
    is not the student's."""
    if sandbox is None:
        from grader.grading.hidden import refuse_in_autograde

        refuse_in_autograde("timing_points")
    require_cuda()
    if refused:
        _write_failure(Path(sidecar).resolve(), max_points, refused)
        print(f"timing: 0 points: {refused}")
        return 0.0
    sandbox = sandbox or Sandbox(list, str(Path(impl).resolve()), _course_key())
    with checker_faults(TEST):
        return _timing_points(max_points, Path(sidecar).resolve(), sandbox, bands, slowest)


def _timing_points(
    max_points: float, out: Path, sandbox: Sandbox, bands: Sequence[Band], slowest: float
) -> float:
    from grader.gpu_lock import gpu_lock

    out.unlink(missing_ok=True)
    started = time.monotonic()
    with gpu_lock():  # parallel autograde: nothing else of any submission on this GPU
        record, why = measure(sandbox)
    if record is not None:
        record["seconds"] = round(time.monotonic() - started, 2)
        why = _score(record, max_points, out, bands, slowest)
    if why:
        _write_failure(out, max_points, why)
        print(f"timing: 0 points: {why}")
        return 0.0
    for shape in record["shapes"]:
        if shape["reason"]:
            print(f"timing: {shape['rows']}x{shape['cols']} earns nothing: {shape['reason']}")
    out.write_text(json.dumps(record, indent=2) + "\n")
    return record["points"]


def measure(
    sandbox: Sandbox, shapes: Sequence[tuple[int, int]] | None = None
) -> tuple[dict | None, str]:
    """The timing record of the submission against the reference on `shapes` (by default
    the draw's hidden ones), timed again once when the reference was disturbed or the
    student's server ran out of memory; or None and why the student's side failed.
    CheckerFault when the reference's side failed. The caller holds the GPU lock."""
    record: dict | None = None
    why = ""
    for attempt in range(RETRIES + 1):
        servers = sandbox.started if attempt == 0 and sandbox.started else None
        servers = servers or _start_now(sandbox, shapes)
        try:
            record, why = _measure(servers, sandbox.key)
        finally:
            servers.close()
            sandbox.started = None
        disturbed = record.pop("disturbed", False) if record else OUT_OF_MEMORY in why
        if not disturbed or attempt == RETRIES:
            break
    return record, why


def _start_now(sandbox: Sandbox, shapes: Sequence[tuple[int, int]] | None = None) -> Servers:
    servers = Servers(sandbox, list(shapes or hidden_shapes(key=sandbox.key)))
    servers.start()
    return servers


def _measure(servers: Servers, key: str) -> tuple[dict | None, str]:
    """The timing record of both servers on their shapes, or None and why the student's side
    failed; CheckerFault when the reference's side did."""
    began = time.monotonic()
    servers.ready.wait()
    ready = time.monotonic()
    if servers.failure.startswith("internal: "):
        _checker_failed(servers.failure.removeprefix("internal: "))
    if servers.failure:
        return None, servers.failure
    rng = random.Random(f"{key}/timing/inputs")
    try:
        shapes = [_time_shape(servers, rows, cols, rng) for rows, cols in servers.shapes]
    except TimingFailed as exc:
        return None, str(exc)
    timed = time.monotonic()
    servers.student.close()  # nothing of the submission's is left on the GPU
    servers.student = None
    closed = time.monotonic()
    disturbed = False
    for i, (rows, cols) in enumerate(servers.shapes):
        alone = _alone_ms(servers.reference, rows, cols, rng)
        shapes[i]["reference_alone_ms"] = alone
        if shapes[i]["reference_ms"] > INTERFERENCE * alone and not shapes[i]["reason"]:
            disturbed = True
            shapes[i]["fraction"] = 0.0
            shapes[i]["reason"] = (
                f"the reference took {shapes[i]['reference_ms']:.3f} ms a call beside the "
                f"submission but {alone:.3f} ms alone: the submission's work kept the GPU busy"
            )
    record = {
        "schema": SCHEMA,
        "device": servers.device,
        "versions": _versions(),
        "mode": "fresh",
        "reps": REPS,
        "disturbed": disturbed,
        "shapes": shapes,
        "phase_seconds": {  # the student's server's close is between timed and alone
            "ready": round(ready - began, 2),
            "timed": round(timed - ready, 2),
            "alone": round(time.monotonic() - closed, 2),
        },
    }
    return record, ""


def _time_shape(servers: Servers, rows: int, cols: int, rng: random.Random) -> dict:
    """One shape: REPS interleaved calls of both servers on fresh inputs, the harness's and a
    copy's cost beside them (fewer once an answer is wrong); the student's and the reference's
    medians, net of the harness."""
    student, reference = servers.student, servers.reference
    times: dict[str, list[float]] = {"student": [], "reference": [], "null": [], "copy": []}
    sampled = set(rng.sample(range(REPS), ROW_SAMPLES))
    reason = ""
    for i in range(REPS):
        seed = rng.getrandbits(SEED_BITS)
        order = [("student", student), ("reference", reference)]
        replies = {}
        for name, server in order if i % 2 else order[::-1]:
            _other(servers, server).ask("touch")  # every command follows a context switch
            replies[name], seconds = server.call("call", rows, cols, CALLS, seed)
            times[name].append(seconds)
        for name in ("null", "copy"):
            student.ask("touch")
            times[name].append(reference.call(name, rows, cols, CALLS, seed)[1])
        reason = reason or _checksums_differ(replies["student"], replies["reference"])
        if i in sampled and not reason:
            reason = _rows_differ(student, reference, rows, cols, rng)
        if reason:  # a wrong answer earns nothing however fast: no more of the GPU's time
            break
    null = statistics.median(times["null"])
    ms = {name: (statistics.median(t) - null) * 1e3 / CALLS for name, t in times.items()}
    net = [(t - null) * 1e3 / CALLS for t in times["student"]]
    if min(ms["reference"], ms["copy"]) <= 0:
        raise CheckerFault(internal_message([f"{TEST}: the harness's cost swamped the calls"]))
    ratio = max(ms["student"], 1e-6) / ms["reference"]
    if not reason and ms["student"] < FLOOR * ms["copy"]:
        reason = (
            f"{ms['student']:.3f} ms a call is faster than a plain copy of the same bytes "
            f"({ms['copy']:.3f} ms) allows: a time no softmax can reach, refused"
        )
    return {
        **asdict(
            ShapeTiming(
                rows,
                cols,
                max(ms["student"], 1e-6),
                ms["reference"],
                max(min(net), 1e-6),
                max(max(net), 1e-6),
                ratio,
                not reason.startswith("wrong"),
                0.0 if reason else band(ratio),
                reason,
            )
        ),
        "copy_ms": ms["copy"],
        "harness_ms": null * 1e3 / CALLS,
    }


def _other(servers: Servers, server: Server) -> Server:
    return servers.reference if server is servers.student else servers.student


def _checksums_differ(student: dict, reference: dict) -> str:
    """Why the student's checksums of a command's calls are not the reference's, or ""."""
    got, want = student.get("sums"), reference["sums"]
    if isinstance(got, list) and len(got) == len(want):
        calls = zip(got, want, strict=True)
        if all(_close(g, w) for g, w in calls):
            return ""
    return "wrong output on a timed input (its checksum differs from the reference's)"


def _close(got: object, want: list[float]) -> bool:
    scale = max(1.0, *(abs(w) for w in want))
    if not isinstance(got, list) or len(got) != len(want):
        return False
    pairs = zip(got, want, strict=True)
    return all(isinstance(g, float) and abs(g - w) <= 1e-4 * scale for g, w in pairs)


def _rows_differ(student: Server, reference: Server, rows: int, cols: int, rng) -> str:
    import numpy as np

    picked = " ".join(str(r) for r in rng.sample(range(rows), ROWS_PER_SAMPLE))
    raw = student.ask(f"rows {picked}")  # the student's bytes: whole float32s only
    got = np.frombuffer(raw[: len(raw) // 4 * 4], dtype=np.float32)
    want = np.frombuffer(reference.ask(f"rows {picked}"), dtype=np.float32)
    if got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-6):
        return ""
    return "wrong output on a timed input (rows compared in full differ from the reference's)"


def _alone_ms(reference: Server, rows: int, cols: int, rng: random.Random) -> float:
    """The reference's net milliseconds a call with no process of the submission left."""
    calls, nulls = [], []
    for _ in range(ALONE_REPS):
        seed = rng.getrandbits(SEED_BITS)
        calls.append(reference.call("call", rows, cols, CALLS, seed)[1])
        nulls.append(reference.call("null", rows, cols, CALLS, seed)[1])
    return (statistics.median(calls) - statistics.median(nulls)) * 1e3 / CALLS


def _versions() -> dict[str, str]:
    import torch
    import triton

    return {"torch": torch.__version__, "triton": triton.__version__, "python": sys.version[:6]}


def _score(
    record: dict, max_points: float, out: Path, bands: Sequence[Band], slowest: float
) -> str:
    """Give the record its points, each shape's band from its ratio with the course's `bands`;
    why it is still no timing record, or ""."""
    for shape in record["shapes"]:
        honest = shape["correct"] and not shape["reason"]
        shape["fraction"] = band(shape["ratio"], bands, slowest) if honest else 0.0
    record["fraction"] = sum(s["fraction"] for s in record["shapes"]) / len(record["shapes"])
    record["points"] = round(max_points * record["fraction"], 3)
    record["max_points"] = max_points
    record["bands"] = [[b.limit, b.fraction] for b in bands]
    record["slowest_fraction"] = slowest
    try:
        from_json(record, out)
    except RecordError as exc:
        return f"the timing wrote a bad record ({exc.reason})"
    return ""


def _write_failure(out: Path, max_points: float, why: str, internal: bool = False) -> None:
    """A timing record of 0 points that says why (and whether the checker was at fault)."""
    record = {"schema": SCHEMA, "points": 0.0, "max_points": max_points, "shapes": []}
    record["error"] = why
    if internal:
        record["internal_error"] = True
    out.write_text(json.dumps(record, indent=2) + "\n")


def _checker_failed(line: str) -> None:
    """The reference's side of the timing failed: the checker's fault, raised as such."""
    message = internal_message([f"{TEST}: {line}"])
    record_status(TEST, INTERNAL_ERROR, internal_errors=[message])
    raise CheckerFault(message)


def _course_key(course: str | None = None) -> str:
    """The key of the draw of no submission in particular, from the secret of `course` (default:
    the course around the current folder); MissingSecret without one."""
    from grader.grading.hidden import course_draw

    return course_draw(Path(course) if course else None).key
