"""Running one sandbox's command to a deadline: its output and its report pipe read
together, each cut at its limit, and the whole process group killed at the deadline or
when the report overflows."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass
class SandboxRun:
    """What one sandboxed command did, its output and report cut at their limits."""

    returncode: int | None
    timed_out: bool
    seconds: float
    output: bytes
    report: bytes | None = None
    report_overflow: bool = False


def run_bounded(
    command: Sequence[str],
    *,
    cwd: Path,
    deadline: float | None,
    report: tuple[int | None, int | None] = (None, None),
    limits_bytes: tuple[int, int | None] = (1024**2, None),
    env: dict[str, str] | None = None,
) -> SandboxRun:
    """Run `command` in `cwd`, in a session of its own, until it ends or the monotonic
    `deadline` passes. `report` is a pipe's (read, write) ends: the command inherits the
    write end and the read end's bytes come back as the report. `limits_bytes` caps the
    output and the report (None: no report)."""
    started = time.monotonic()
    read_fd, write_fd = report
    output_limit, report_limit = limits_bytes
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        pass_fds=() if write_fd is None else (write_fd,),
        start_new_session=True,
        env=env,
    )
    if write_fd is not None:
        os.close(write_fd)
    streams = _Streams(proc, read_fd, output_limit, report_limit or 0)
    timed_out = not streams.drain(deadline)
    if not timed_out and not streams.report_overflow:
        timed_out = not _waited(proc, deadline)
    if timed_out or streams.report_overflow:
        _kill(proc)
    returncode = proc.wait()
    return SandboxRun(
        returncode,
        timed_out,
        time.monotonic() - started,
        bytes(streams.output),
        None if read_fd is None else bytes(streams.report),
        streams.report_overflow,
    )


def _waited(proc: subprocess.Popen, deadline: float | None) -> bool:
    """Wait for `proc` to end by the deadline; False if it did not."""
    try:
        proc.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return False
    return True


def _kill(proc: subprocess.Popen) -> None:
    """Kill bwrap and its process group: the sandbox's PID namespace dies with it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class _Streams:
    """The sandbox's output and report pipes, read together, each kept up to its limit."""

    GRACE_S = 1.0
    """How long the pipes may stay open after the command ended (unsafe mode: a daemon)."""

    def __init__(self, proc: subprocess.Popen, report_fd: int | None, out_max: int, rep_max: int):
        self.proc, self.out_max, self.rep_max = proc, out_max, rep_max
        self.output, self.report = bytearray(), bytearray()
        self.report_overflow = False
        self.open = {proc.stdout.fileno(): self.output}
        if report_fd is not None:
            self.open[report_fd] = self.report
        self._fds = list(self.open)

    def drain(self, deadline: float | None) -> bool:
        """Read until both pipes close (True), or the deadline passes (False)."""
        ended_at = None
        try:
            while self.open and not self.report_overflow:
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    return False
                if ended_at is None and self.proc.poll() is not None:
                    ended_at = now
                if ended_at is not None and now - ended_at > self.GRACE_S:
                    return True
                wait = 0.1 if deadline is None else min(0.1, deadline - now)
                for fd in select.select(list(self.open), [], [], wait)[0]:
                    self._read(fd)
            return True
        finally:
            self.proc.stdout.close()
            for fd in self._fds[1:]:
                os.close(fd)

    def _read(self, fd: int) -> None:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            del self.open[fd]
            return
        kept = self.open[fd]
        limit = self.out_max if kept is self.output else self.rep_max
        if kept is self.report and len(kept) + len(chunk) > limit:
            self.report_overflow = True
        kept += chunk[: max(0, limit - len(kept))]
