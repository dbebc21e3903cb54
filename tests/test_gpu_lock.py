"""The GPU lock across processes: shares together, a timing alone, no deadlock, no starving."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from grader.gpu_lock import GPU_LOCK_ENV

SCRIPT = """\
import sys, time
from grader.gpu_lock import gpu_lock, gpu_share
wait, hold, timing = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3] == "timing"
time.sleep(wait)
with gpu_share():
    start = time.monotonic()
    if timing:
        with gpu_lock():
            start = time.monotonic()
            time.sleep(hold)
            end = time.monotonic()
    else:
        time.sleep(hold)
        end = time.monotonic()
print(start, end)
"""
ROOT = Path(__file__).resolve().parents[1]


def run(lock: Path, *holders: tuple[float, float, str]) -> list[tuple[float, float]]:
    """Each holder (wait s, hold s, "timing" or "share") in its own process: the start and
    end of what each held, in monotonic time."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{GPU_LOCK_ENV: str(lock)})
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(w), str(h), kind],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for w, h, kind in holders
    ]
    out = [p.communicate(timeout=60)[0].split() for p in processes]
    return [(float(a), float(b)) for a, b in out]


def test_a_timing_waits_for_every_other_share(tmp_path):
    share, timing = run(tmp_path / "gpu.lock", (0, 2.0, "share"), (0.8, 0.2, "timing"))
    assert timing[0] >= share[1]


def test_two_timings_of_sharing_submissions_take_turns(tmp_path):
    """Both hold a share, then both time: no deadlock, and the timings never overlap."""
    started = time.monotonic()
    a, b = run(tmp_path / "gpu.lock", (0, 0.5, "timing"), (0, 0.5, "timing"))
    assert time.monotonic() - started < 30
    assert a[1] <= b[0] or b[1] <= a[0]


def test_a_new_share_waits_behind_a_waiting_timing(tmp_path):
    """A submission that starts while a timing waits gets in only after the timing."""
    first, timing, late = run(
        tmp_path / "gpu.lock", (0, 2.0, "share"), (0.8, 0.3, "timing"), (1.4, 0.1, "share")
    )
    assert timing[0] >= first[1]
    assert late[0] >= timing[1]
