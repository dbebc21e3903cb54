"""The time per test file that `make test` prints at the end (tests/file_budget.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from file_budget import table

TESTS = Path(__file__).resolve().parent
SLOW = """import time

import pytest


@pytest.fixture
def slow_both_ends():
    time.sleep(0.3)
    yield
    time.sleep(0.3)


def test_slow(slow_both_ends):
    time.sleep(0.3)
"""
FAST = "def test_fast():\n    pass\n"


def run_pytest(folder: Path, *args: str) -> str:
    """pytest's output for the two small files in `folder`, with file_budget loaded by -p."""
    (folder / "test_slow.py").write_text(SLOW)
    (folder / "test_fast.py").write_text(FAST)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "file_budget", "-p", "no:cacheprovider", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_each_file_is_summed_on_the_controller_and_flagged_over_budget(tmp_path):
    """Run on two xdist workers, does the table give each file its setup, call and teardown
    together (0.9 s for the slow one, which no phase reaches alone), flag only the file over
    the budget, and end with the total?"""
    out = run_pytest(tmp_path, "-n", "2", "--file-budget=0.8")
    assert "seconds per test file (budget 0.8 s)" in out, out
    slow = re.search(r"^ +([\d.]+) s  test_slow\.py  OVER BUDGET$", out, re.M)
    assert slow and 0.9 <= float(slow[1]) < 5, out
    assert re.search(r"^ +0\.\d s  test_fast\.py$", out, re.M), out
    assert re.search(
        r"^ +[\d.]+ s  total of 2 files \(summed over workers\); 1 over 0\.8 s$", out, re.M
    )


def test_without_the_option_no_table_is_printed(tmp_path):
    """Is the table left out of a run that does not ask for it (a single test run stays short)?"""
    assert "seconds per test file" not in run_pytest(tmp_path)


def test_the_table_lists_every_file_over_budget_and_counts_the_rest():
    """With more files than the table shows, are all files over budget listed, slowest first,
    and the rest counted in one line?"""
    seconds = {f"tests/test_{i:02}.py": float(i) for i in range(30)}
    lines = table(seconds, budget_s=15)
    assert lines[0] == "    29.0 s  tests/test_29.py  OVER BUDGET"
    assert sum("OVER BUDGET" in line for line in lines) == 14
    assert "(16 more files, each at most 15.0 s)" in lines[-2]
    assert lines[-1] == "   435.0 s  total of 30 files (summed over workers); 14 over 15 s"
