"""The GPU timing's servers as the trusted side drives them: one process each, commands in,
replies out (`learning.workshops.measuring.timed_calls` is the other end).

A reply is read with a deadline and a bound on its size; a stoppable server (the student's)
has every process stopped (SIGSTOP) between its commands, so nothing of the submission runs
while the reference is timed.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import tempfile
import time

from grader.isolation.cpu_share import signal_tree
from learning.workshops.checking.child import child_env

LOAD_TIMEOUT_S = 120.0
"""Loading the definitions and compiling both kernels on the timing shapes."""
CALL_TIMEOUT_S = 20.0
REPLY_BYTES = 64 * 1024 * 1024


class TimingFailed(Exception):
    """The student's side of the timing failed: 0 points, for the reason given."""


class Server:
    """A running `timed_calls` server: commands on its stdin, replies on a pipe of its own,
    its output in a file; `stoppable` servers (the student's) are stopped between calls."""

    def __init__(self, argv: list[str], stoppable: bool) -> None:
        reply_read, reply_write = os.pipe()
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [*argv[:-1], argv[-1].format(reply_fd=reply_write)],
            stdin=subprocess.PIPE,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            pass_fds=(reply_write,),
            env=child_env(PYTHONUNBUFFERED="1"),
            start_new_session=True,
        )
        os.close(reply_write)
        self.replies, self.stoppable, self.stopped = reply_read, stoppable, False
        self.buffer = b""

    def read(self, timeout_s: float) -> bytes:
        """One reply; TimingFailed when none comes in `timeout_s` or it is malformed."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self.buffer:
            self._fill(deadline)
        head, self.buffer = self.buffer.split(b"\n", 1)
        if not head.isdigit() or int(head) > REPLY_BYTES:
            raise TimingFailed(f"a timing reply began {head[:40]!r}, not its length")
        size = int(head)
        while len(self.buffer) < size:
            self._fill(deadline)
        payload, self.buffer = self.buffer[:size], self.buffer[size:]
        return payload

    def _fill(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self.replies], [], [], left)[0]:
            raise TimingFailed("no reply in time")
        chunk = os.read(self.replies, 1 << 20)
        if not chunk:
            raise TimingFailed(f"the timing process ended ({self.cause()})")
        self.buffer += chunk

    def first(self) -> dict:
        """The server's first reply, once its function has loaded."""
        reply = json.loads(self.read(LOAD_TIMEOUT_S))
        if "loaded" not in reply:
            raise TimingFailed(f"the definitions do not load ({reply.get('load_error', reply)})")
        return reply

    def ask(self, words: str, timeout_s: float | None = None) -> tuple[bytes, float]:
        """The reply to one command and the seconds from sending it to reading the reply."""
        self.go()
        try:
            started = time.perf_counter()
            self.process.stdin.write((words + "\n").encode())
            self.process.stdin.flush()
            payload = self.read(CALL_TIMEOUT_S if timeout_s is None else timeout_s)
            return payload, time.perf_counter() - started
        except OSError as exc:
            raise TimingFailed(f"the timing process ended ({exc})") from exc
        finally:
            self.halt()

    def call(self, words: str, timeout_s: float | None = None) -> tuple[dict, float]:
        payload, seconds = self.ask(words, timeout_s)
        try:
            reply = json.loads(payload)
        except ValueError as exc:
            raise TimingFailed("a timing reply was not JSON") from exc
        if not isinstance(reply, dict) or "error" in reply:
            raise TimingFailed(str(reply.get("error", reply) if isinstance(reply, dict) else reply))
        return reply, seconds

    def halt(self) -> None:
        """Stop every process of a stoppable server until the next command."""
        if self.stoppable and not self.stopped:
            signal_tree(self.process.pid, signal.SIGSTOP)
            self.stopped = True

    def go(self) -> None:
        if self.stopped:
            signal_tree(self.process.pid, signal.SIGCONT)
            self.stopped = False

    def cause(self) -> str:
        code = self.process.poll()
        return "still running" if code is None else f"exit status {code}"

    def close(self) -> None:
        """End the server and every process it started."""
        self.go()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()
        os.close(self.replies)
        self.log.close()
