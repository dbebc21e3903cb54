"""Running one queued job on this machine: the student's own command, sandboxed, bounded.

`run_job` writes the upload into a scratch folder of its own and runs what the student would
run locally, as a subprocess under the job's time bound:

- a check: `python -m learning.workshops.check OP --impl FILE [--hint]`, through
  `grader.queue.check_job`, which runs it once with `--sandbox required` and keeps both its
  text and its `--json` report. The check already runs the student's code in its bubblewrap
  sandbox (`learning.workshops.checking.sandbox`); without a CUDA device it runs the cases in
  Triton's interpreter, as on a student's laptop. It holds the GPU lock shared, as a
  grading's notebook does: checks may share a GPU, never with a timing.
- a benchmark: `python -m learning.workshops.benchmark --op OP --impl FILE --output OUT`.
  The benchmark imports the student's file into its own process (it times in-process, as on
  the student's machine), so the whole command runs in GRADING's sandbox
  (`grader.isolation.sandbox.run_sandboxed`: bubblewrap, the NVIDIA device nodes bound in,
  the scratch folder as /work, no course folder, the grader's environment cleared, cgroup
  limits), and OUT is read back from the scratch folder without following a link. It holds
  the GPU lock (`grader.gpu_lock`) exclusively while it runs: one job on a GPU at a time,
  and none beside a grading's timing. Then, still under the lock, the course times the
  upload itself for the board (`grader.queue.verified_timing`: grading's timing servers,
  the forward softmax only). On a machine without CUDA it answers exit status 2, "this
  worker has no GPU", and times nothing.

Decided here (the spec is silent): a check's result is the `--json` object plus "stdout" and
"stderr" (the text printed); a benchmark's is the results file's JSON exactly (so the
receipt's hash covers the file the student keeps), or, when the command wrote none,
{"error": its last line, "stdout": its output}. What the receipt's "reference" and
"copy_roof" hold are the rows the benchmark timed in this job: PyTorch's softmax on the same
views (`torch_softmax`; `torch` for the backward) and the plain device copy (`roof`). Those
timings come from the process that also ran the student's code, as a local run's do, so the
student's code could have bent them: the receipt shows where and when they were taken and
that they were not edited since, no more. Its "verified" fact is the course's own timing,
which the student's code cannot reach (the board reads only that), and grading's timing stays
the graded one.
A job past its bound has every process it started killed and fails with JobFailed.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from grader.gpu_lock import gpu_lock
from grader.isolation.cpu_share import signal_tree
from grader.isolation.sandbox import SandboxUnavailable, cuda_available, run_sandboxed
from grader.isolation.scratch import scratch
from grader.queue.gpu_facts import Sampler
from grader.queue.verified_timing import OP as VERIFIED_OP
from grader.queue.verified_timing import verified_timing

JOB_TIME_S = 600.0
"""The default bound on one job's run (`serve --job-time`)."""
NO_GPU = "this worker has no GPU"
CHECK, BENCHMARK = "check", "benchmark"
KINDS = (CHECK, BENCHMARK)
PHASE = {CHECK: "checking", BENCHMARK: "timing"}
"""The phase each kind of job runs in, as `GET /api/jobs/{id}` shows it."""
SUFFIXES = (".py", ".ipynb")
RESULT_BYTES = 8 * 1024**2
"""The most of a results file or a command's output read back."""
CHECK_OPTIONS = {"hint": bool, "seed": int}
BENCHMARK_OPTIONS = {
    "shapes": str,
    "warps": str,
    "modes": str,
    "layouts": str,
    "dtype": str,
    "reps": int,
    "torch_compile": bool,
}
"""The options a job may pass to its command, by name and type; "output" and "json" are the
student's side's (where it writes the result, how it prints it) and are not passed."""
LOCAL_ONLY = ("output", "json")
ROWS = {"copy_roof": ("roof",), "reference": ("torch_softmax", "torch")}
"""The results' variants each receipt fact holds."""


PR_SET_PDEATHSIG = 1
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl


class JobFailed(Exception):
    """The job produced no result of the student's command; the message is its cause."""


@dataclass(frozen=True)
class Outcome:
    """What a job's command gave: the result the student gets, the receipt's facts, its exit
    status."""

    result: dict
    facts: dict
    exit_status: int


def run_job(
    course_root: Path,
    job,
    on_phase: Callable[[str], None],
    time_limit_s: float = JOB_TIME_S,
) -> Outcome:
    """Run `job` (a `grader.queue.store.Job`) here; JobFailed for a job that ran past
    `time_limit_s`, asked for an unknown kind or option, or found no sandbox."""
    if job.kind not in KINDS:
        raise JobFailed(f"unknown kind of job {job.kind!r}: choose {' or '.join(KINDS)}")
    started = time.time()
    name = upload_name(job.filename, job.op)
    phase = PHASE[job.kind]
    on_phase(phase)
    began = time.monotonic()
    if job.kind == CHECK:
        gpu, verified, (result, status) = None, None, run_check(job, name, time_limit_s)
    elif not cuda_available():
        gpu, verified = None, None
        result, status = {"error": NO_GPU, "stdout": f"benchmark: {NO_GPU}"}, 2
    else:
        gpu, verified, result, status = run_benchmark(job, name, time_limit_s)
    phases = {"queued": queued_s(job), phase: round(time.monotonic() - began, 3)}
    facts = {
        "job": job.id,
        "student": job.student,
        "op": job.op,
        "kind": job.kind,
        "gpu": gpu,
        **timed_rows(result if job.kind == BENCHMARK and status == 0 else None),
        "verified": verified,
        "draw_sha256": hashlib.sha256(job.content).hexdigest(),
        "phases": phases,
        "worker": socket.gethostname(),
        "started": _iso(started),
        "finished": _iso(time.time()),
    }
    return Outcome(result, facts, status)


def upload_name(filename: str, op: str) -> str:
    """The name the upload is written under: its own base name where it is a .py file or a
    notebook (the service refused others), never a path."""
    base = Path(filename).name
    return base if Path(base).suffix in SUFFIXES and base[0] not in ".-" else f"{op}.ipynb"


def options_argv(options: dict, allowed: dict[str, type]) -> list[str]:
    """The job's options as its command's arguments (`--name=value`, so no value reads as
    another option); JobFailed for an unknown option or a value of the wrong type."""
    argv = []
    for name, value in sorted(options.items()):
        if name in LOCAL_ONLY:
            continue
        kind = allowed.get(name)
        if kind is None or type(value) is not kind:
            known = ", ".join(allowed)
            raise JobFailed(f"option {name}={value!r} is not one the queue runs (it runs {known})")
        flag = "--" + name.replace("_", "-")
        argv += [flag] if kind is bool and value else [] if kind is bool else [f"{flag}={value}"]
    return argv


def run_check(job, name: str, time_limit_s: float) -> tuple[dict, int]:
    """The check's result (its `--json` report, "stdout", "stderr") and exit status; the
    GPU lock held shared."""
    extra = options_argv(job.options, CHECK_OPTIONS)
    with tempfile.TemporaryDirectory(prefix="i1-queue-") as folder, gpu_lock(shared=True):
        work = Path(folder)
        (work / name).write_bytes(job.content)
        argv = [sys.executable, "-m", "grader.queue.check_job", job.op, name, "report.json"]
        out, err, status = bounded(argv + extra, work, time_limit_s)
        report = work / "report.json"
        result = json.loads(report.read_text()) if report.is_file() else {}
    return {**result, "stdout": out, "stderr": err}, status


def run_benchmark(
    job, name: str, time_limit_s: float
) -> tuple[dict | None, dict | None, dict, int]:
    """The GPU's facts, the course's verified timing (forward jobs; else None), the
    benchmark's result and its exit status: the command run in grading's sandbox, then the
    course's timing of the upload (`grader.queue.verified_timing`), under the GPU lock."""
    extra = options_argv(job.options, BENCHMARK_OPTIONS)
    argv = [sys.executable, "-m", "learning.workshops.benchmark", "--op", job.op]
    argv += ["--impl", f"/work/{name}", "--output", "/work/results.json", *extra]
    with scratch(prefix="i1-queue-") as work, gpu_lock(), Sampler() as sampler:
        (work / name).write_bytes(job.content)
        (work / name).chmod(0o644)
        try:
            run = run_sandboxed(argv, work=work, timeout_s=time_limit_s, gpu=True)
        except SandboxUnavailable as exc:
            raise JobFailed(f"no sandbox on this worker: {exc}") from None
        if run.timed_out:
            raise JobFailed(past(time_limit_s))
        output = run.output.decode(errors="replace")
        written = read_back(work / "results.json") if run.returncode == 0 else None
        verified = verified_timing(job.content, name, job.id) if job.op == VERIFIED_OP else None
    if written is None:
        lines = output.strip().splitlines() or [f"exit status {run.returncode}"]
        failed = {"error": lines[-1], "stdout": output}
        return sampler.facts, verified, failed, run.returncode or 1
    return sampler.facts, verified, written, 0


def read_back(path: Path) -> dict | None:
    """The JSON object a sandbox left at `path`: not through a link, not from a FIFO, at
    most RESULT_BYTES; None for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not os.path.isfile(f"/proc/self/fd/{fd}") or os.fstat(fd).st_size > RESULT_BYTES:
            return None
        try:
            data = json.loads(handle.read(RESULT_BYTES))
        except ValueError:
            return None
    return data if isinstance(data, dict) else None


def bounded(argv: list[str], cwd: Path, time_limit_s: float) -> tuple[str, str, int]:
    """Run `argv` in `cwd` in a session of its own: its stdout, stderr and exit status;
    JobFailed, with every process it started killed, when it runs past `time_limit_s`. It
    dies with this process too (PR_SET_PDEATHSIG), so a worker killed mid-job leaves none."""
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=die_with_parent,
    )
    try:
        out, err = process.communicate(timeout=time_limit_s)
    except subprocess.TimeoutExpired:
        kill(process)
        raise JobFailed(past(time_limit_s)) from None
    text = (
        out[:RESULT_BYTES].decode(errors="replace"),
        err[:RESULT_BYTES].decode("utf-8", "replace"),
    )
    return *text, process.returncode


def kill(process: subprocess.Popen) -> None:
    """Kill `process`, everything it started and its process group, and reap it."""
    signal_tree(process.pid, signal.SIGKILL)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.communicate()


def die_with_parent() -> None:
    """In the child, before exec: be killed when the worker dies (prctl PR_SET_PDEATHSIG).
    The function was looked up before the fork, so the child takes no loader lock."""
    _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL)


def past(time_limit_s: float) -> str:
    """The cause a job past its bound fails with."""
    return f"the job ran past {time_limit_s:g} s"


def timed_rows(results: dict | None) -> dict:
    """The receipt's "copy_roof" and "reference": the results' rows of those variants, each
    {"variant", "rows": [shape, layout, mode, num_warps, median_ms, gbps_logical]}; None
    for a job that timed nothing."""
    facts: dict = {}
    for fact, variants in ROWS.items():
        rows = [r for r in (results or {}).get("rows", []) if r.get("variant") in variants]
        facts[fact] = (
            {"variant": rows[0]["variant"], "rows": [_row(r) for r in rows]} if rows else None
        )
    return facts


def _row(row: dict) -> dict:
    keys = ("rows", "cols", "layout", "mode", "num_warps", "median_ms", "gbps_logical")
    return {key: row.get(key) for key in keys}


def queued_s(job) -> float | None:
    """How long the job waited in the queue, from its submission to its claim."""
    return None if job.started is None else round(job.started - job.created, 3)


def _iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds")
