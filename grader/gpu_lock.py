"""One GPU timing at a time per GPU: the lock a timing holds while it times.

`grader.parallel` gives each worker I1_GPU_LOCK, the path of its GPU's lock file in the
course, and the hidden timing cell (`grader.grading.gpu_timing`) holds `gpu_lock()`, an
exclusive `fcntl.flock` on that file, while it times: correctness cells run in parallel,
timings on one GPU never overlap. Without the variable (one worker, or no GPU) the lock is
nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

GPU_LOCK_ENV = "I1_GPU_LOCK"
"""Environment variable naming the lock file the timing cell holds while it times."""


@contextlib.contextmanager
def gpu_lock(shared: bool = False) -> Iterator[None]:
    """Hold this worker's GPU lock (I1_GPU_LOCK) for the block; without one, do nothing.

    Exclusive by default (timing); `shared=True` lets any number of holders in together
    but none while an exclusive holder times.
    """
    path = os.environ.get(GPU_LOCK_ENV)
    if not path:
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
