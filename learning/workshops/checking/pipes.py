"""A worker process spoken to in JSON lines: a job pipe in, a report pipe out.

The submission's child (`child`) and the clean room (`clean_room`) are both such workers:
started with `Worker.spawn` (inside a sandbox where `wrap` puts them), sent jobs with `send`,
read with a deadline per line (`EventReader`), and ended with everything they hold open. A
worker's own output goes to a log, never to the report pipe, so nothing it prints can pass
for an event; when it dies, `cause` says how, with its last line of output.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable

from learning.workshops.checking.child import child_env
from learning.workshops.checking.untrusted import Unreadable, decoded

CAUSE_WAIT_S = 10.0
"""How long a worker whose report ended may take to exit before it is killed."""
MAX_EVENT_BYTES = 32 * 1024**2
"""The longest report line read from a worker; a longer one ends it as a crash."""

Wrap = Callable[[list[str]], list[str]]
"""Turns a worker's command into the one that runs it (inside a sandbox, say)."""


class Worker:
    """One running worker: its process, the job pipe, the report pipe and its output log."""

    def __init__(self, process: subprocess.Popen, jobs, events: EventReader, log) -> None:
        self.process, self.jobs, self.events, self.log = process, jobs, events, log

    @classmethod
    def spawn(cls, argv: list[str], wrap: Wrap, memory_limit: int):
        """Start `argv` (a `python -m` command of a worker module) through `wrap`, with its
        job and report pipes and memory limit appended as options."""
        job_read, job_write = os.pipe()
        report_read, report_write = os.pipe()
        log = tempfile.TemporaryFile()
        argv = [*argv, "--job-fd", str(job_read), "--report-fd", str(report_write)]
        argv += ["--memory-limit", str(memory_limit)]
        process = subprocess.Popen(
            wrap(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(job_read, report_write),
            env=child_env(PYTHONUNBUFFERED="1"),
        )
        os.close(job_read)
        os.close(report_write)
        return cls(process, os.fdopen(job_write, "w"), EventReader(report_read), log)

    def send(self, job: dict) -> None:
        """Hand the worker a job; a worker that is gone shows as end of its report."""
        try:
            self.jobs.write(json.dumps(job) + "\n")
            self.jobs.flush()
        except OSError:
            pass

    def cause(self) -> str:
        """Why the worker ended: the signal, or the exit status, and its last output line."""
        try:
            code = self.process.wait(timeout=CAUSE_WAIT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        return exit_cause(code, self.log)

    def close(self) -> None:
        """End the worker and everything it holds open."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.jobs, self.events, self.log):
            try:
                stream.close()
            except OSError:
                pass


def exit_cause(code: int, log) -> str:
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


class EventReader:
    """JSON lines from a pipe, with a deadline per line."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def next(self, deadline: float):
        """The next event (a JSON object); "eof" when the writer is gone, "overflow" for a
        line longer than MAX_EVENT_BYTES, "garbled (why)" for one that is not a JSON object
        or nests too deep (`untrusted.decoded`), None past the deadline."""
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_EVENT_BYTES:
                return "overflow"
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return "eof"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            return decoded(line)
        except Unreadable as exc:
            return f"garbled ({exc})"

    def close(self) -> None:
        os.close(self.fd)
