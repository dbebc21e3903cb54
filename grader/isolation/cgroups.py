"""A fresh cgroup per controller for one sandbox, beside this process's own: its processes,
its memory and its CPU, each capped by the kernel; whatever is left in them afterwards is
killed. Where a controller cannot be made (no root, cgroups not delegated) its limit falls
back to what the caller runs instead (RLIMIT_NPROC, `grader.isolation.cpu_share`)."""

from __future__ import annotations

import itertools
import os
import signal
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from grader.isolation.host import say_once
from grader.isolation.limits import DEFAULT_LIMITS, Limits
from learning.workshops.checking.bubblewrap import SANDBOX_UID, privileged

_serial = itertools.count()
CPU_PERIOD_US = 100_000
"""The cpu cgroup's accounting period; its quota is the sandbox's cores times this."""
CGROUP_CONTROLLERS = ("pids", "memory", "cpu")
"""The cgroup controllers a sandbox gets one of, where this process may make them."""


def cpu_limited(cgroups: Sequence[Path]) -> bool:
    """Whether one of `cgroups` holds the sandbox to a CPU quota (v1's cpu.cfs_quota_us or
    v2's cpu.max, written by `_make_cgroups`)."""
    for cgroup in cgroups:
        for name, unlimited in (("cpu.cfs_quota_us", "-1"), ("cpu.max", "max")):
            with suppress(OSError):
                if not (cgroup / name).read_text().startswith(unlimited):
                    return True
    return False


@contextmanager
def sandbox_cgroups(limits: Limits = DEFAULT_LIMITS) -> Iterator[list[Path]]:
    """Fresh pids, memory and cpu cgroups for one sandbox, under this process's own; on
    exit, whatever is still in them is killed and they are removed."""
    made = _make_cgroups(limits)
    if not any((c / "pids.max").exists() for c in made):
        say_once(
            "note: no pids cgroup could be made beside this process's own (that needs root "
            "and cgroup v1's pids controller, or v2's enabled in the parent's subtree_control); "
            f"the sandbox's processes are bounded by RLIMIT_NPROC={limits.processes} of uid "
            f"{SANDBOX_UID if privileged() else os.getuid()} instead, which counts every "
            "process of that user."
        )
    try:
        yield made
    finally:
        for cgroup in made:
            _kill_and_remove(cgroup)


def _make_cgroups(limits: Limits) -> list[Path]:
    """One cgroup per controller (cgroup v1) or one with all (v2), each with its limits:
    processes, memory, and a CPU quota of `limits.cpu_cores` with the same weight as every
    other sandbox's (so a sandbox of a hundred busy processes counts as one beside another)."""
    quota = max(1000, int(limits.cpu_cores * CPU_PERIOD_US))
    wanted = {
        "pids": {"pids.max": limits.processes},
        "memory": {"memory.limit_in_bytes": limits.memory_bytes},
        "cpu": {"cpu.shares": 1024, "cpu.cfs_period_us": CPU_PERIOD_US, "cpu.cfs_quota_us": quota},
    }
    wanted = {name: files for name, files in wanted.items() if name in CGROUP_CONTROLLERS}
    made = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            if controller in wanted:
                cgroup = _make_cgroup(Path("/sys/fs/cgroup", controller), path, wanted[controller])
                made += [cgroup] if cgroup else []
    if not made and Path("/sys/fs/cgroup/cgroup.controllers").exists():  # unified (v2)
        path = Path("/proc/self/cgroup").read_text().split("::", 1)[-1].strip()
        limits_v2 = {
            "pids": {"pids.max": limits.processes},
            "memory": {"memory.max": limits.memory_bytes},
            "cpu": {"cpu.weight": 100, "cpu.max": f"{quota} {CPU_PERIOD_US}"},
        }
        files = {k: v for c in CGROUP_CONTROLLERS for k, v in limits_v2.get(c, {}).items()}
        cgroup = _make_cgroup(Path("/sys/fs/cgroup"), path, files)
        made += [cgroup] if cgroup else []
    return made


def _make_cgroup(mount: Path, own: str, limit_files: dict[str, int | str]) -> Path | None:
    """A new cgroup beside this process's own, with `limit_files` written; None if refused."""
    cgroup = mount / own.lstrip("/") / f"i1-sandbox-{os.getpid()}-{next(_serial)}"
    try:
        cgroup.mkdir()
    except OSError:
        return None
    written = 0
    for name, value in limit_files.items():
        try:
            (cgroup / name).write_text(str(value))
            written += 1
        except OSError:  # no such controller here (v2, not enabled in the parent's subtree)
            continue
    if not written:
        cgroup.rmdir()
        return None
    return cgroup


def _kill_and_remove(cgroup: Path, tries: int = 500) -> None:
    """Kill every process left in `cgroup` until it is empty, then remove it."""
    for _ in range(tries):
        pids = [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if not pids:
            try:
                cgroup.rmdir()
                return
            except OSError:  # the last ones are still being reaped
                pass
        time.sleep(0.01)
    say_once(f"note: could not remove the cgroup {cgroup}; remove it by hand (rmdir).")
