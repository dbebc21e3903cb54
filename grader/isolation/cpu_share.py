"""Hold a command and everything it starts to a CPU share, where no cpu cgroup can be made.

    python -I cpu_share.py --cores C [--nice N] -- COMMAND...

Without a cgroup the kernel shares the CPU per process, so a sandbox that forks a hundred
busy loops takes a hundred times its neighbour's share. This runs COMMAND as its child (at
nice N, default 10, so the grader's own processes go first) and every TICK_S reads the CPU
time of every process descended from it in /proc, then does two things with SIGSTOP and
SIGCONT (which no process can catch or block):

- at most C processes (rounded down, at least one) of the tree run at once: of those busy
  (on a CPU most of the last tick, or running at two samples in a row) the ones that waited
  longest run and the rest are stopped, in turn, so a hundred busy loops take C cores
  beside a neighbour, not a hundred shares of the machine;
- while the tree has used more than C cores (a token bucket: C CPU seconds a second, BURST_S
  of them saved at most; this catches many busy threads in one process) all of it stops,
  until the budget is back.

A child's time counts while it lives and, once reaped, through its parent's cutime, less
what was already counted of it: never charged twice, never refunded. Not seen: a process that
lives less than a tick under a parent that ignores SIGCHLD (the kernel keeps no account of
it). A cpu cgroup has no such gap. Measured on 2 cores shared with other jobs, a neighbour's
loop beside 16 busy processes (one core each) ran 1.1-2.0x slower with this, 1.2-2.9x with a
cgroup, 7.5-8.5x with neither.

It exits with COMMAND's status, and dies with its own parent (COMMAND's bwrap then dies
with it). Only the standard library: it runs with the grader's Python in isolated mode.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time

TICK_S = 0.05
BURST_S = 0.2
"""CPU seconds per core a tree may run ahead of its share (the bucket's size)."""
BUSY_FRACTION = 0.4
"""A process that used this much of a tick's CPU is busy, and waits its turn to run."""
PR_SET_PDEATHSIG = 1


class Ledger:
    """The CPU seconds a process tree has used, each second counted once."""

    def __init__(self) -> None:
        self.own: dict[int, int] = {}  # pid -> its utime+stime, in clock ticks, when last seen
        self.reaped: dict[int, int] = {}  # pid -> cutime+cstime when last seen
        self.owed: dict[int, int] = {}  # parent pid -> ticks of its dead children counted
        self.parent: dict[int, int] = {}
        self.running: set[int] = set()  # pids running (state R) when last seen
        self.busy: set[int] = set()
        self.hz = os.sysconf("SC_CLK_TCK")

    def charge(self, tree: dict[int, tuple]) -> float:
        """The CPU seconds used since the last call, from `tree`: pid -> (ppid, own ticks,
        reaped children's ticks[, state]). `busy` is then the processes that ran most of the
        tick, or were running when seen now and last time (a start-up's brief runs are not)."""
        used, self.busy, running = 0, set(), set()
        for pid in [p for p in self.own if p not in tree]:  # ended: its parent may reap it
            parent = self.parent.pop(pid)
            self.owed[parent] = self.owed.get(parent, 0) + self.own.pop(pid) + self.reaped[pid]
            self.reaped.pop(pid)
        for pid, (ppid, own, reaped, *state) in tree.items():
            ran = max(0, own - self.own.get(pid, 0))
            used += ran
            if state == [b"R"]:
                running.add(pid)
            if ran >= BUSY_FRACTION * TICK_S * self.hz or pid in running & self.running:
                self.busy.add(pid)
            grew = max(0, reaped - self.reaped.get(pid, 0))
            credit = min(grew, self.owed.get(pid, 0))
            used += grew - credit
            if credit:
                self.owed[pid] -= credit
            self.own[pid], self.reaped[pid], self.parent[pid] = own, reaped, ppid
        self.running = running
        return used / self.hz


def descendants(root: int) -> dict[int, tuple[int, int, int, bytes]]:
    """Every living process below `root`: pid -> (ppid, utime+stime, cutime+cstime, state)."""
    stats: dict[int, tuple[int, int, int, bytes]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        fields = data[data.rindex(b")") + 2 :].split()
        own, reaped = int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])
        stats[int(name)] = (int(fields[1]), own, reaped, fields[0])
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_) in stats.items():
        children.setdefault(ppid, []).append(pid)
    found, pending = {}, [root]
    while pending:
        for child in children.get(pending.pop(), ()):
            found[child] = stats[child]
            pending.append(child)
    return found


def tree(root: int) -> list[int]:
    """`root` and every living process below it, found through each process's children as
    the kernel lists them (/proc/PID/task/TID/children): the tree's own few files, not every
    process's, where the kernel has those lists; else by `descendants`."""
    if not os.path.exists(f"/proc/{root}/task/{root}/children"):
        return [root, *descendants(root)]
    found, pending = [], [root]
    while pending:
        pid = pending.pop()
        found.append(pid)
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:  # it ended
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children", "rb") as handle:
                    pending += [int(child) for child in handle.read().split()]
            except OSError:
                continue
    return found


def signal_tree(root: int, sig: int) -> None:
    """`sig` to `root` and every process below it (twice over, for any forked between)."""
    for _ in range(2):
        _signal_all(tree(root), sig)


def _signal_all(pids, sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


class Turns:
    """Which busy processes of a tree run now: at most `width`, those that waited longest."""

    def __init__(self, width: int) -> None:
        self.width, self.held, self.ran, self.tick = width, set(), {}, 0

    def next(self, tree, busy: set[int]) -> tuple[set[int], set[int]]:
        """(to stop, to continue) this tick, of the living processes in `tree`."""
        self.tick += 1
        waiting = (busy | self.held) & tree.keys()
        running = set(sorted(waiting, key=lambda pid: self.ran.get(pid, -1))[: self.width])
        for pid in running:
            self.ran[pid] = self.tick
        stop, resume = waiting - running, self.held & running
        self.held = stop
        return stop, resume


def _ended(child: subprocess.Popen, wait_s: float) -> bool:
    """Whether `child` ends within `wait_s` (at once when it does)."""
    try:
        child.wait(wait_s)
    except subprocess.TimeoutExpired:
        return False
    return True


def govern(child: subprocess.Popen, cores: float) -> int:
    """Keep `child`'s descendants within `cores` until `child` ends; its exit status."""
    ledger, turns, budget = Ledger(), Turns(max(1, int(cores))), BURST_S * cores
    last, stopped = time.monotonic(), False
    while not _ended(child, TICK_S):
        now = time.monotonic()
        budget = min(budget + (now - last) * cores, BURST_S * cores)
        last = now
        tree = descendants(child.pid)
        budget -= ledger.charge(tree)
        stop, resume = turns.next(tree, ledger.busy)
        if budget < 0:  # stopped again each tick: a process forked meanwhile stops too
            _signal_all(tree, signal.SIGSTOP)
            stopped = True
            continue
        if stopped:
            _signal_all(set(tree) - stop, signal.SIGCONT)
            stopped = False
        _signal_all(stop, signal.SIGSTOP)
        _signal_all(resume, signal.SIGCONT)
    _signal_all(descendants(os.getpid()), signal.SIGCONT)  # nothing is left stopped
    return child.returncode if child.returncode >= 0 else 128 - child.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cpu_share.py", description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=float, required=True, help="the tree's share, in cores")
    parser.add_argument("--nice", type=int, default=10, help="the command's niceness")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.cores <= 0:
        parser.error("give a positive --cores and a command after --")
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    child = subprocess.Popen(command, close_fds=False, preexec_fn=lambda: os.nice(args.nice))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: child.kill())
    return govern(child, args.cores)


if __name__ == "__main__":
    sys.exit(main())
