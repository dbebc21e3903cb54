"""The GPU timing's servers as the trusted side drives them: one process each, commands in,
replies out (`learning.workshops.measuring.timed_calls` is the other end).

A reply is read with a deadline and a bound on its size, and decoded as the untrusted data it
is (`untrusted.decoded`: JSON, an object, not too deep): anything else is the student's
failure, said in the grader's words (the timing cell is a hidden cell: no text the student's
server chose appears in it). A stoppable server (the student's)
has every process stopped (SIGSTOP) between its commands, so nothing of the submission runs
while the reference is timed. Each server has a gate of its own, a page only this process
writes: a timed command's seed goes there when this process starts its clock.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import select
import signal
import subprocess
import tempfile
import time

from grader.isolation.cpu_share import signal_tree
from learning.workshops.checking.child import child_env
from learning.workshops.checking.untrusted import Unreadable, decoded
from learning.workshops.measuring.gate import GATE_BYTES, SEED_BITS

LOAD_TIMEOUT_S = 120.0
"""Loading the definitions and compiling both kernels on the timing shapes."""
CALL_TIMEOUT_S = 20.0
REPLY_BYTES = 64 * 1024 * 1024
GATE_WAIT_S = 0.2
"""How long a timed command's work may take to be queued before the gate opens anyway: a
function that synchronises the device cannot queue ahead, and is timed from the opening."""
SPIN_S = 1.0
"""How long a timed reply is waited for by polling before this process sleeps for it."""
OUT_OF_MEMORY = "out of memory"
"""In the reason a server failed: CUDA's words for an allocation it could not make."""


class TimingFailed(Exception):
    """The student's side of the timing failed: 0 points, for the reason given in the
    grader's words; `detail` is what the server itself said (shown only where the server is
    the course's own, the reference's)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.detail = detail[:300]


class Server:
    """A running `timed_calls` server: commands on its stdin, replies on a pipe of its own,
    its output in a file; `stoppable` servers (the student's) are stopped between calls."""

    def __init__(self, argv: list[str], stoppable: bool) -> None:
        reply_read, reply_write = os.pipe()
        gate_fd = os.memfd_create("timing-gate")
        os.ftruncate(gate_fd, GATE_BYTES)
        self.gate = mmap.mmap(gate_fd, GATE_BYTES)
        self.word = ctypes.c_int64.from_buffer(self.gate)  # one aligned 8-byte store
        self.generation = 0
        self.log = tempfile.TemporaryFile()
        fds = {"{reply_fd}": str(reply_write), "{gate_fd}": str(gate_fd)}
        self.process = subprocess.Popen(
            [fds.get(word, word) for word in argv],
            stdin=subprocess.PIPE,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            pass_fds=(reply_write, gate_fd),
            env=child_env(PYTHONUNBUFFERED="1"),
            start_new_session=True,
        )
        os.close(reply_write)
        os.close(gate_fd)
        self.replies, self.stoppable, self.stopped = reply_read, stoppable, False
        self.buffer = b""

    def read(self, timeout_s: float, spin: bool = False) -> bytes:
        """One reply; TimingFailed when none comes in `timeout_s` or it is malformed. With
        `spin`, wait for its first bytes by polling (SPIN_S at most), not asleep: a timed
        reply is read when it comes, not when the scheduler wakes this process."""
        deadline = time.monotonic() + timeout_s
        if spin and not self.buffer:
            self._spin(min(deadline, time.monotonic() + SPIN_S))
        while b"\n" not in self.buffer:
            self._fill(deadline)
        head, self.buffer = self.buffer.split(b"\n", 1)
        if not head.isdigit() or int(head) > REPLY_BYTES:
            raise TimingFailed("a timing reply began with something that is not its length")
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

    def _spin(self, until: float) -> None:
        while not select.select([self.replies], [], [], 0)[0] and time.monotonic() < until:
            pass

    def first(self) -> dict:
        """The server's first reply, once its function has loaded; TimingFailed when it says
        the function did not load, or is not a JSON object."""
        reply = _reply(self.read(LOAD_TIMEOUT_S))
        if reply.get("loaded") is not True:
            said = reply.get("load_error")
            reason = "the definitions do not load in the timing's process"
            raise TimingFailed(reason, said if isinstance(said, str) else "")
        return reply

    def ask(self, words: str) -> bytes:
        """The reply to one untimed command (`rows`, `touch`)."""
        self.go()
        try:
            self._send(words)
            return self.read(CALL_TIMEOUT_S)
        finally:
            self.halt()

    def call(
        self, op: str, rows: int, cols: int, count: int, seed: int, timeout_s: float = 0.0
    ) -> tuple[dict, float]:
        """The reply to a gated command (`call`, `warm`, `null`, `copy`) whose inputs are
        drawn from `seed`, and the seconds from opening its gate to reading its reply."""
        timeout_s = timeout_s or CALL_TIMEOUT_S
        self.go()
        try:
            self.generation += 1
            self._send(f"{op} {rows} {cols} {count} {self.generation}")
            first = self.read(timeout_s) if self._arrives(GATE_WAIT_S) else None
            started = time.perf_counter()
            self.word.value = self.generation << SEED_BITS | seed % (1 << SEED_BITS)
            reply = _json(first if first is not None else self.read(timeout_s, spin=True))
            if "queued" in reply:
                reply = _json(self.read(timeout_s, spin=True))
            return reply, time.perf_counter() - started
        finally:
            self.halt()

    def _send(self, words: str) -> None:
        try:
            self.process.stdin.write((words + "\n").encode())
            self.process.stdin.flush()
        except OSError as exc:
            raise TimingFailed(f"the timing process ended ({exc})") from exc

    def _arrives(self, timeout_s: float) -> bool:
        """Whether a reply has begun to arrive, waiting `timeout_s` at most."""
        return bool(self.buffer) or bool(select.select([self.replies], [], [], timeout_s)[0])

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
        del self.word  # the page is freed with the last export of it
        self.gate.close()
        self.log.close()


def _reply(payload: bytes) -> dict:
    """A reply as a JSON object; TimingFailed, naming what it was instead, when it is not."""
    try:
        return decoded(payload)
    except Unreadable as exc:
        raise TimingFailed(f"a timing reply was not what was asked for: {exc}") from None


def _json(payload: bytes) -> dict:
    """A gated command's reply; TimingFailed when it is not a JSON object or says the call
    failed (in the grader's words: out of memory, or an error; the server's own in `detail`)."""
    reply = _reply(payload)
    if "error" in reply:
        said = reply["error"] if isinstance(reply["error"], str) else ""
        if OUT_OF_MEMORY in said.lower():
            raise TimingFailed(f"a timed call ran {OUT_OF_MEMORY} on the GPU", said)
        raise TimingFailed("a timed call raised an error; run the benchmark to see it", said)
    return reply
