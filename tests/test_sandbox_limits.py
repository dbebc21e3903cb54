"""Each sandbox's share of the machine: memory and cores divided among the workers, a CPU
share that one submission's busy processes cannot take from its neighbour (with a cpu
cgroup and without), and a deadline from the course's cells, not the student's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from sandboxing import sandbox_missing
from traitlets.config import Config

from grader import autograde_workers
from grader.grading import execute as executing
from grader.isolation import cgroups, cpu_share, limits, sandbox
from grader.isolation.limits import GiB, Limits, memory_share
from grader.isolation.process import SandboxRun
from grader.isolation.scratch import scratch

NEEDS_BWRAP = pytest.mark.skipif(
    sandbox_missing() is not None and not os.environ.get(sandbox.UNSAFE_ENV),
    reason="needs a working bubblewrap (grader.isolation.bwrap)",
)


def test_memory_share_divides_the_machine_among_the_workers():
    """Does each sandbox get an equal part of 3/4 of the machine, two per worker, within
    the floor and the cap, and never more than the machine has?"""
    assert memory_share(24 * GiB, 2) == 24 * GiB * 3 // 4 // 4  # 4.5 GiB
    assert memory_share(24 * GiB, 1) == 9 * GiB
    assert memory_share(512 * GiB, 1) == limits.MEMORY_CAP
    assert memory_share(24 * GiB, 64) == limits.MEMORY_FLOOR
    assert memory_share(1 * GiB, 1) == 1 * GiB * 3 // 4  # a tiny machine: under its memory
    for total in (1 * GiB, 8 * GiB, 128 * GiB):
        for workers in (1, 2, 16, 128):
            assert memory_share(total, workers) < total


def test_cpu_share_divides_the_cores_and_keeps_one():
    """Does each sandbox get the cores divided among the workers, at least one, at most all?"""
    assert limits.cpu_share(16, 4) == 4.0
    assert limits.cpu_share(2, 2) == 1.0
    assert limits.cpu_share(2, 8) == 1.0
    assert limits.cpu_share(2, 1) == 2.0


def test_the_worker_count_reaches_the_limits(tmp_path, monkeypatch):
    """Does each grader.parallel worker tell its sandboxes how many workers share the
    machine, so that their default memory shrinks with it, and is a bad count refused?"""
    env = autograde_workers.worker_env(tmp_path, 0, [], 1, workers=3)
    assert env[limits.WORKERS_ENV] == "3"
    monkeypatch.setattr(limits, "machine_memory_bytes", lambda: 24 * GiB)
    monkeypatch.setattr(limits, "machine_cpus", lambda: 6)
    monkeypatch.setenv(limits.WORKERS_ENV, "3")
    assert (Limits().memory_bytes, Limits().cpu_cores) == (3 * GiB, 2.0)
    monkeypatch.setenv(limits.WORKERS_ENV, "many")
    with pytest.raises(ValueError, match="I1_GRADING_WORKERS='many'"):
        Limits()


def test_a_sandbox_above_the_machine_is_refused():
    """Is a memory limit over the machine's memory refused, saying what to do?"""
    with pytest.raises(ValueError, match="more than this machine's memory"):
        Limits(memory_bytes=limits.machine_memory_bytes() + 1)


def test_the_ledger_counts_a_reaped_child_once_and_a_lost_one_still():
    """Is a child's CPU counted once when its parent reaps it (not again through cutime),
    and still counted when its parent ignores SIGCHLD (no refund)?"""
    ledger = cpu_share.Ledger()
    ledger.hz = 1
    assert ledger.charge({10: (1, 0, 0), 11: (10, 5, 0)}) == 5
    assert ledger.charge({10: (1, 0, 7)}) == 2  # reaped: 5 already counted, 2 more it used
    assert ledger.charge({20: (1, 0, 0), 21: (20, 4, 0)}) == 4
    assert ledger.charge({20: (1, 0, 0)}) == 0  # gone unreaped: counted, never refunded


BUSY = """
import os, sys, time
for _ in range(int(sys.argv[1])):
    if os.fork() == 0:
        os.setsid()  # a session of its own: the kernel's autogroups share per session
        break
deadline = time.monotonic() + 20
while not os.path.exists("/work/stop") and time.monotonic() < deadline:
    sum(range(20000))
"""
MEASURE = """
import time
started = time.perf_counter()
total = 0
for i in range(5_000_000):
    total += i
print(time.perf_counter() - started)
"""


def _measure(share: Limits) -> float:
    """Seconds a fixed CPU-bound loop takes in a sandbox of its own."""
    with scratch(share) as work:
        run = sandbox.run_sandboxed(
            [sys.executable, "-c", MEASURE], work=work, timeout_s=60, limits=share, gpu=False
        )
    assert run.returncode == 0, run.output
    return float(run.output.decode().split()[-1])


def _slowdown(share: Limits, forks: int = 15) -> float:
    """How many times slower the loop runs beside a sandbox of `forks` + 1 busy processes."""
    alone = min(_measure(share), _measure(share))
    with scratch(share) as work:
        bomb = threading.Thread(
            target=sandbox.run_sandboxed,
            args=([sys.executable, "-c", BUSY, str(forks)],),
            kwargs={"work": work, "timeout_s": 30, "limits": share, "gpu": False},
        )
        bomb.start()
        try:
            time.sleep(1.0)  # every busy process has started
            beside = min(_measure(share), _measure(share))  # the least disturbed by others
        finally:
            (work / "stop").write_text("")
            bomb.join()
    print(f"alone {alone:.2f} s, beside {forks + 1} busy processes {beside:.2f} s")
    return beside / alone


@NEEDS_BWRAP
def test_busy_processes_leave_the_neighbour_its_share():
    """Does a sandbox that forks busy loops on every core leave a neighbouring sandbox's
    CPU-bound work at most about 3x slower (each sandbox one core of two: 2 workers)?"""
    with cgroups.sandbox_cgroups() as made:
        if not cgroups.cpu_limited(made):
            pytest.skip("no cpu cgroup can be made here: the fallback's test covers it")
    assert _slowdown(Limits(cpu_cores=1.0)) < 3


@NEEDS_BWRAP
def test_without_a_cpu_cgroup_the_share_still_holds(monkeypatch):
    """With no cpu cgroup (as where cgroups are not delegated), does cpu_share hold the busy
    sandbox to its core, leaving the neighbour at most about 3x slower?"""
    monkeypatch.setattr(cgroups, "CGROUP_CONTROLLERS", ("pids", "memory"))
    with cgroups.sandbox_cgroups() as made:
        assert not cgroups.cpu_limited(made)
        assert str(sandbox.CPU_SHARE) in sandbox._outside(Limits(), made)
    assert _slowdown(Limits(cpu_cores=1.0)) < 3


TREE = """\
import subprocess, sys, threading, time
GRANDCHILD = "import subprocess, time; subprocess.Popen(['sleep', '60']); time.sleep(60)"
subprocess.Popen([sys.executable, "-c", GRANDCHILD])
threading.Thread(target=lambda: subprocess.Popen(["sleep", "60"])).start()
time.sleep(60)
"""
"""A process with a child that has a child of its own, and a child forked by a thread."""


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_signal_tree_finds_every_process_below_and_stops_it():
    """Does the walk of the kernel's children lists find the whole tree below a process, a
    grandchild and a thread's child included, as a scan of every process does; and does
    `signal_tree` stop them all, then let them all go on?"""
    root = subprocess.Popen([sys.executable, "-c", TREE], start_new_session=True)
    try:
        deadline = time.monotonic() + 30  # all four started, each asleep in its sleep
        while time.monotonic() < deadline:
            found = cpu_share.tree(root.pid)
            if len(found) == 4 and all(_state(p) == "S" for p in found):
                break
            time.sleep(0.05)
        assert len(found) == 4 and sorted(found) == sorted(
            [root.pid, *cpu_share.descendants(root.pid)]
        )
        for sig, stopped in ((signal.SIGSTOP, True), (signal.SIGCONT, False)):
            cpu_share.signal_tree(root.pid, sig)
            deadline = time.monotonic() + 10  # a signal is delivered soon after, not at once
            while any((_state(p) == "T") != stopped for p in found) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert all((_state(p) == "T") == stopped for p in found), [_state(p) for p in found]
    finally:
        os.killpg(root.pid, signal.SIGKILL)
        root.wait()


def _course(root: Path, code_cells: int) -> None:
    release = root / "release" / "a1"
    release.mkdir(parents=True)
    cells = [new_code_cell(f"x = {n}") for n in range(code_cells)]
    nbformat.write(new_notebook(cells=cells), release / "nb.ipynb")


def test_the_deadline_counts_the_courses_cells_not_the_students(tmp_path, monkeypatch):
    """Does a submission with 50 cells of its own get the deadline of the course's 3 code
    cells, however many it adds?"""
    _course(tmp_path, 3)
    folder = tmp_path / "autograded" / "s" / "a1"
    folder.mkdir(parents=True)
    nb = new_notebook(cells=[new_code_cell("pass") for _ in range(50)])
    resources = {
        "metadata": {"path": str(folder)},
        "unique_key": "nb",
        "nbgrader": {"student": "s", "assignment": "a1", "notebook": "nb", "db_url": ""},
    }
    asked = []

    def run(*args, timeout_s, **kw):
        asked.append(timeout_s)
        return SandboxRun(1, False, 0.0, b"")

    monkeypatch.setattr(executing, "run_sandboxed", run)
    config = Config({"CourseDirectory": {"root": str(tmp_path)}})
    execute = executing.SandboxedExecute(timeout=30, startup_timeout=20, config=config)
    with pytest.raises(Exception, match="no executed notebook"):
        execute.preprocess(nb, resources)
    assert asked == [executing.wall_s(3, 30, 20)] == [20 + 3 * 40 + 60]
