"""What one sandbox may use, derived from the machine it runs on and how many submissions
are graded on it at once.

`grader.parallel` runs N workers, each grading one submission at a time, and a submission
runs up to SANDBOXES_PER_WORKER sandboxes at once (its notebook, and its hidden checks
beside it). The workers tell their sandboxes N through I1_GRADING_WORKERS; a plain
`nbgrader autograde` is one worker. Each sandbox gets an equal share of the machine's
memory (MEMORY_FRACTION of it, the rest left to the grader and the system), never more than
MEMORY_CAP nor the machine itself, and a CPU share of the machine's cores divided among the
workers (at least one core), enforced by a cpu cgroup or, without one,
`grader.isolation.cpu_share`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

MiB, GiB = 1024**2, 1024**3
WORKERS_ENV = "I1_GRADING_WORKERS"
"""How many submissions this machine grades at once (`grader.parallel` sets it)."""
SANDBOXES_PER_WORKER = 2
"""Sandboxes one submission runs at once: its notebook and its hidden checks."""
MEMORY_FRACTION = 0.75
"""The part of the machine's memory the sandboxes share; the rest is the grader's."""
MEMORY_CAP = 16 * GiB
"""The most one sandbox gets, however large the machine (a notebook needs far less)."""
MEMORY_FLOOR = 2 * GiB
"""The least one sandbox gets (torch and a Triton kernel), unless the machine is smaller."""


def machine_memory_bytes() -> int:
    """The machine's memory: /proc/meminfo's MemTotal, else the page count times the size."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def machine_cpus() -> int:
    """The cores this process may run on (its affinity mask, as a container or Slurm sets it)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def grading_workers(env: Mapping[str, str] | None = None) -> int:
    """The number of submissions graded at once on this machine: I1_GRADING_WORKERS, else 1.
    ValueError, naming the variable, when it is not a positive whole number."""
    text = (os.environ if env is None else env).get(WORKERS_ENV, "1").strip() or "1"
    try:
        workers = int(text)
    except ValueError:
        workers = 0
    if workers < 1:
        raise ValueError(
            f"{WORKERS_ENV}={text!r}: it counts the submissions graded at once on this "
            "machine, a whole number of at least 1; unset it for a single nbgrader autograde"
        )
    return workers


def memory_share(total_bytes: int, workers: int) -> int:
    """One sandbox's memory on a machine of `total_bytes` grading `workers` submissions at
    once: an equal part of MEMORY_FRACTION of it, within [MEMORY_FLOOR, MEMORY_CAP], and
    never more than MEMORY_FRACTION of the machine."""
    usable = int(total_bytes * MEMORY_FRACTION)
    share = usable // (max(1, workers) * SANDBOXES_PER_WORKER)
    return min(max(share, MEMORY_FLOOR), MEMORY_CAP, usable)


def cpu_share(cpus: int, workers: int) -> float:
    """One sandbox's CPU, in cores, on a machine of `cpus` cores grading `workers` at once:
    an equal part of the cores, at least one, at most all of them."""
    return float(min(cpus, max(1.0, cpus / max(1, workers))))


def _memory() -> int:
    return memory_share(machine_memory_bytes(), grading_workers())


def _cores() -> float:
    return cpu_share(machine_cpus(), grading_workers())


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use; the kernel enforces each limit, not the sandboxed code.
    The memory and CPU defaults are this machine's share (see the module's docstring)."""

    processes: int = 1024
    """Processes and threads of the whole sandbox (its pids cgroup's pids.max)."""
    memory_bytes: int = field(default_factory=_memory)
    """Heap per process (RLIMIT_DATA) and the whole sandbox's memory (its memory cgroup)."""
    file_bytes: int = 1 * GiB
    """The largest file a process may write (RLIMIT_FSIZE)."""
    tmp_bytes: int = 1 * GiB
    """The size of `/tmp` inside (a tmpfs, so memory); `/dev/shm` gets 64 MiB."""
    work_bytes: int = 1 * GiB
    """The size of a scratch folder `scratch()` makes (a tmpfs where it can mount one)."""
    cpu_s: int | None = None
    """CPU seconds per process (RLIMIT_CPU), or None for no limit."""
    cpu_cores: float = field(default_factory=_cores)
    """The whole sandbox's CPU, in cores: its cpu cgroup's quota (with a weight equal to
    every other sandbox's), or `grader.isolation.cpu_share` where no cpu cgroup is made."""

    def __post_init__(self) -> None:
        if self.cpu_cores <= 0:
            raise ValueError(f"cpu_cores must be positive, got {self.cpu_cores}: 1.0 is a core")
        if self.memory_bytes > machine_memory_bytes():
            raise ValueError(
                f"memory_bytes={self.memory_bytes} is more than this machine's memory "
                f"({machine_memory_bytes()} bytes): leave it out to get the machine's share"
            )


DEFAULT_LIMITS = Limits()
"""This machine's share for one sandbox, as this process's I1_GRADING_WORKERS sets it."""
