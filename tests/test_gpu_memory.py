"""The GPU memory watch, against a stand-in `nvidia-smi` that reports what the test says:
the sandbox over the limit is killed, and nothing else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.isolation import gpu_memory
from grader.isolation.sandbox import sandboxed
from grader.isolation.scratch import scratch
from tests.sandboxing import needs_sandbox

FAKE_SMI = """\
#!{python}
import json, sys
state = json.load(open({state!r}))
if any(a.startswith("--query-gpu") for a in sys.argv):
    print(state["total_mib"])
else:
    for pid, mib in state["apps"]:
        print(f"{{pid}}, {{mib}}")
"""


@pytest.fixture
def smi(tmp_path, monkeypatch):
    """Set what the stand-in nvidia-smi reports: {pid: MiB}, and the GPU's total MiB."""
    state = tmp_path / "smi.json"
    script = tmp_path / "bin" / "nvidia-smi"
    script.parent.mkdir()
    script.write_text(FAKE_SMI.format(python=sys.executable, state=str(state)))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")

    def report(apps: dict[int, int], total_mib: int = 80_000) -> None:
        state.write_text(json.dumps({"apps": list(apps.items()), "total_mib": total_mib}))

    return report


def test_the_limit_is_the_workers_share_of_the_gpu(smi, monkeypatch):
    smi({}, total_mib=100_000)
    monkeypatch.setenv(gpu_memory.SHARERS_ENV, "2")
    assert gpu_memory.limit_bytes() == int(100_000 * gpu_memory.MiB * 0.9 / 2)
    monkeypatch.setenv(gpu_memory.SHARERS_ENV, "1")
    assert gpu_memory.limit_bytes() is None  # a GPU of its own: nothing to share


@needs_sandbox
def test_the_sandbox_over_the_limit_is_killed_and_nothing_else(smi):
    """A sandboxed process over the limit dies; one under it, and the trusted side's own
    process holding more than both, live on."""
    said = []
    with scratch() as work:
        sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
        big = subprocess.Popen(sandboxed(sleep, work=work))
        small = subprocess.Popen(sandboxed(sleep, work=work))
        trusted = subprocess.Popen(sleep)
        try:
            deadline = time.monotonic() + 20
            while len(gpu_memory.sandboxes(os.getpid())) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            inner = {root: max(pids) for root, pids in gpu_memory.sandboxes(os.getpid()).items()}
            smi({inner[_bwrap(big)]: 3000, inner[_bwrap(small)]: 500, trusted.pid: 9000})
            watch = gpu_memory.GpuMemoryWatch(2000 * gpu_memory.MiB, said.append)
            watch.tick()
            assert big.wait(10) != 0
            assert small.poll() is None and trusted.poll() is None
            assert said and "held 2.9 GiB of GPU memory" in said[0]
            smi({inner[_bwrap(small)]: 500, trusted.pid: 9000})
            watch.tick()
            assert small.poll() is None and len(said) == 1  # under the limit: left alone
        finally:
            for process in (big, small, trusted):
                process.kill()
                process.wait()


def _bwrap(process: subprocess.Popen) -> int:
    """The outermost bwrap of a sandboxed command (the command may exec it, or fork it)."""
    tree = gpu_memory.sandboxes(os.getpid())
    return next(root for root in tree if root == process.pid or _above(process.pid, root))


def _above(pid: int, root: int) -> bool:
    stat = Path(f"/proc/{root}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1]) == pid
