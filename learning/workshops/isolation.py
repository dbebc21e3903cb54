"""Run an implementation's cases in a child process, so its crashes and hangs are results.

A segfault, a fatal error, a hang or a GPU context lost to an illegal address fails the
case that was running, with its cause, and a fresh child picks up at the next case; a
runaway allocation fails at the child's memory limit. After a few crashes the rest are
reported as not run, rather than paying a process start for each. A case whose checks
themselves raised fails as `internal-error` (see `faults`), and the same child goes on.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from learning.workshops.cases import Case, CaseResult, Failure, Verdict
from learning.workshops.child import child_env
from learning.workshops.faults import internal_result

CHILD_MODULE = "learning.workshops.child"
"""The module each child runs (`python -m`); it reports over the pipe `--report-fd` names."""
MAX_CRASHES = 3
LOAD_TIMEOUT_S = 180.0
MEMORY_LIMIT_BYTES = 8 * 1024**3
"""Host memory a child may map for its heap: the cases need well under 1 GiB, and a
runaway allocation fails at 8 GiB with an error rather than making the machine swap."""


@dataclass
class IsolatedRun:
    """The results of running cases in child processes."""

    results: list[CaseResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the interpreter did unlike a GPU
    load_error: str | None = None
    mode: str = "unknown"
    device: str = "unknown"


Wrap = Callable[[list[str]], list[str]]
"""Turns a child's command into the one that runs it (inside a sandbox, say)."""


def run_isolated(
    impl: Path,
    op: str,
    function: str,
    cases: list[Case],
    seed: int,
    case_timeout_s: float,
    wrap: Wrap | None = None,
) -> IsolatedRun:
    """Run every case of `cases` against `function` from `impl`, each crash contained;
    `wrap` runs each child another way (`impl` is then a path as the child sees it)."""
    run = IsolatedRun()
    remaining = list(cases)
    crashes = 0
    while remaining:
        done, failure = _run_child(
            impl, op, function, remaining, seed, case_timeout_s, run, wrap or list
        )
        if run.load_error:
            return run
        remaining = remaining[done:]
        if failure is None:
            break
        crashes += 1
        run.results.append(failure)
        remaining = remaining[1:]
        if crashes >= MAX_CRASHES:
            why = f"not run, the implementation crashed {crashes} times already"
            run.results.extend(_failed(c, failure.failure, why) for c in remaining)
            break
    return run


def _run_child(impl, op, function, cases, seed, case_timeout_s, run: IsolatedRun, wrap: Wrap):
    """Run one child over `cases`; return how many finished and the failure that stopped it."""
    job = {
        "impl": str(impl),
        "op": op,
        "function": function,
        "seed": seed,
        "cases": [asdict(c) for c in cases],
        "memory_limit": MEMORY_LIMIT_BYTES,
    }
    read_fd, write_fd = os.pipe()
    log = tempfile.TemporaryFile()
    child = subprocess.Popen(
        wrap([sys.executable, "-m", CHILD_MODULE, "--report-fd", str(write_fd)]),
        stdin=subprocess.PIPE,
        stdout=log,
        stderr=subprocess.STDOUT,
        pass_fds=(write_fd,),
        env=child_env(PYTHONUNBUFFERED="1"),
    )
    os.close(write_fd)
    child.stdin.write(json.dumps(job).encode())
    child.stdin.close()
    events = _EventReader(read_fd)
    finished = 0
    loaded = False
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    try:
        while True:
            event = events.next(deadline)
            if event is None:  # hung
                _kill(child)
                if not loaded:
                    run.load_error = f"{impl} took over {LOAD_TIMEOUT_S:.0f} s to load."
                    return finished, None
                why = f"no result after {case_timeout_s:.0f} s"
                return finished, _failed(cases[finished], Failure.TIMEOUT, why)
            if event == "eof":
                code = child.wait()
                if finished == len(cases) or run.load_error:
                    return finished, None
                if not loaded:
                    run.load_error = f"the child process died loading {impl}: {_cause(code, log)}"
                    return finished, None
                return finished, _failed(cases[finished], Failure.CRASH, _cause(code, log))
            kind = event.pop("event")
            if kind == "load-error":
                run.load_error = event["detail"]
            elif kind == "loaded":
                loaded = True
                run.mode, run.device = event["mode"], event["device"]
            elif kind == "start":
                deadline = time.monotonic() + case_timeout_s
            elif kind == "result":
                run.results.append(CaseResult.from_event(event))
                finished += 1
            elif kind == "note":
                run.notes.append(event["text"])
            elif kind == "internal-error":  # the checks raised: the checker's fault, not a crash
                text = f"{event['detail']} at {event['where']}"
                run.results.append(internal_result(cases[finished], text))
                finished += 1
    finally:
        events.close()
        if child.poll() is None:
            _kill(child)
        log.close()


def _failed(case: Case, failure: Failure, why: str) -> CaseResult:
    return CaseResult.of(case, Verdict(failure, why))


def _cause(code: int, log) -> str:
    """Why the child ended: the signal, or the exit status, and its last output line."""
    if code < 0:
        try:
            what = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            what = f"killed by signal {-code}"
    else:
        what = f"exited with status {code}"
    log.seek(0)
    lines = [line for line in log.read().decode(errors="replace").splitlines() if line.strip()]
    return what + (f" ({lines[-1].strip()[:200]})" if lines else "")


def _kill(child: subprocess.Popen) -> None:
    child.kill()
    child.wait()


class _EventReader:
    """JSON lines from a pipe, with a deadline per line."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def next(self, deadline: float):
        """The next event, "eof" when the writer is gone, or None past the deadline."""
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return "eof"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        os.close(self.fd)
