"""The GPU's lock: any number of submissions' code on the GPU together, or one timing alone.

`grader.parallel` gives each worker I1_GPU_LOCK, the path of its GPU's lock file in the
course. Grading one submission holds it shared (`gpu_share`, from before its first sandbox
starts until its grading ends: its notebook, its checks and its timing server all run under
it); the hidden timing cell (`grader.grading.gpu_timing`) holds it exclusively (`gpu_lock`)
while it times, so no other submission's code holds the GPU then. A timing gives up its own
submission's share first and takes it back afterwards, and waits at a turnstile (a second
lock file) that a new share must pass too: two timings never wait for each other, and a
stream of new submissions cannot keep a timing waiting. Without the variable (one worker,
or no GPU) both are nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import IO

GPU_LOCK_ENV = "I1_GPU_LOCK"
"""Environment variable naming the lock file of this worker's GPU."""
_shares: dict[str, IO] = {}
"""The lock files this process holds shared, by path."""


def lock_file(course: Path, gpu: str) -> Path:
    """The lock file of GPU `gpu` (as CUDA_VISIBLE_DEVICES names it) of this machine, in the
    course: `autograded/.gpu-<host>-<gpu>.lock`, named after the machine too, since a course on
    a shared filesystem is graded from several. Grading's workers and the queue's use it alike,
    so a queue job and a grading's timing never share a GPU."""
    host = socket.gethostname().split(".")[0]
    return Path(course) / "autograded" / f".gpu-{host}-{gpu}.lock".replace(os.sep, "_")


@contextlib.contextmanager
def _turnstile(path: str) -> Iterator[None]:
    with open(path + ".turnstile", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _share(handle: IO, path: str) -> None:
    with _turnstile(path):  # behind any timing already waiting
        pass
    fcntl.flock(handle, fcntl.LOCK_SH)


@contextlib.contextmanager
def gpu_share() -> Iterator[None]:
    """Hold this worker's GPU lock shared for the block (nested: once)."""
    path = os.environ.get(GPU_LOCK_ENV)
    if not path or path in _shares:
        yield
        return
    with open(path, "a") as handle:
        _share(handle, path)
        _shares[path] = handle
        try:
            yield
        finally:
            del _shares[path]
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def gpu_lock(shared: bool = False) -> Iterator[None]:
    """Hold this worker's GPU lock exclusively for the block (shared with `shared=True`): no
    other holder in the meantime. This process's own share is given up for the block."""
    path = os.environ.get(GPU_LOCK_ENV)
    if shared or not path:
        with gpu_share():
            yield
        return
    held = _shares.get(path)
    with contextlib.ExitStack() as stack:
        handle = held or stack.enter_context(open(path, "a"))
        if held:
            fcntl.flock(held, fcntl.LOCK_UN)  # first, or two timings would wait on each other
        with _turnstile(path):
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
            if held:
                _share(held, path)
