"""A bound on the GPU memory of one submission's sandboxes, kept from outside them.

CUDA offers no per-process memory limit that the process cannot lift (a caching
allocator's fraction is the process's own setting), so a `GpuMemoryWatch` reads each
process's device memory from the driver (`nvidia-smi --query-compute-apps`), adds up what
the sandboxes below this process hold (a sandbox: a `bwrap` process and everything under
it), and kills the sandbox that holds the most whenever the total is over the limit.
`grader.parallel` gives each worker the number of workers sharing its GPU
(I1_GPU_SHARERS); the limit is then 90% of that GPU's memory over that number, so one
submission's code cannot take the memory another's needs. With one worker, or without
`nvidia-smi`, nothing is watched.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable

from grader.isolation.cpu_share import descendants, signal_tree
from grader.periodic import Periodic

SHARERS_ENV = "I1_GPU_SHARERS"
"""How many grading workers share this worker's GPU (set by `grader.parallel`)."""
SHARE = 0.9
"""The part of the GPU's memory the sharing submissions divide among them."""
INTERVAL_S = 0.25
MiB = 1024 * 1024


def _smi(*query: str) -> list[list[str]]:
    """Rows of an nvidia-smi CSV query (no header, no units); [] when it cannot answer."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        done = subprocess.run(
            [smi, *query, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    rows = [[cell.strip() for cell in line.split(",")] for line in done.stdout.splitlines()]
    return [row for row in rows if all(cell.isdigit() for cell in row)]


def used_by_process() -> dict[int, int]:
    """Device memory in bytes of each process with a CUDA context, by pid."""
    used: dict[int, int] = {}
    for pid, mib in _smi("--query-compute-apps=pid,used_memory"):
        used[int(pid)] = used.get(int(pid), 0) + int(mib) * MiB
    return used


def limit_bytes() -> int | None:
    """This submission's share of its GPU's memory, or None when it shares it with no one."""
    sharers = int(os.environ.get(SHARERS_ENV, "1") or 1)
    totals = _smi("--query-gpu=memory.total")
    if sharers <= 1 or not totals:
        return None
    return int(int(totals[0][0]) * MiB * SHARE / sharers)


def sandboxes(root: int) -> dict[int, set[int]]:
    """Every sandbox below `root`: its outermost bwrap's pid, and the pids under it."""
    tree = descendants(root)
    found: dict[int, set[int]] = {}
    for pid in tree:
        chain, up = [], pid
        while up in tree:
            chain.append(up)
            up = tree[up][0]
        outer = next((p for p in reversed(chain) if _is_bwrap(p)), None)
        if outer is not None:
            found.setdefault(outer, set()).add(pid)
    return found


def _is_bwrap(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/comm") as handle:
            return handle.read().strip() == "bwrap"
    except OSError:
        return False


class GpuMemoryWatch(Periodic):
    """While open, kills the sandbox below this process that holds the most device memory
    whenever the sandboxes together hold more than `limit` bytes; `said` gets a sentence."""

    def __init__(self, limit: int, said: Callable[[str], None], interval_s: float = INTERVAL_S):
        super().__init__(interval_s)
        self.limit, self.said = limit, said

    def tick(self) -> None:
        """Look once; kill the largest sandbox when the sandboxes are over the limit."""
        used = used_by_process()
        if not used:
            return
        found = sandboxes(os.getpid())
        held = {root: sum(used.get(p, 0) for p in pids) for root, pids in found.items()}
        total = sum(held.values())
        if total <= self.limit:
            return
        root = max(held, key=held.get)
        signal_tree(root, signal.SIGKILL)
        self.said(
            f"a sandbox held {held[root] / 2**30:.1f} GiB of GPU memory, and this submission's "
            f"sandboxes {total / 2**30:.1f} GiB, over its share of {self.limit / 2**30:.1f} "
            "GiB: that sandbox was killed"
        )
