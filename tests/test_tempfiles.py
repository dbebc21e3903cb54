"""Grading leaves no temporary folders behind, even when a student's code crashes.

Each test points the temporary folder (`tempfile.gettempdir()`, TMPDIR for a child) at a
fresh folder of its own, so that other processes using /tmp cannot disturb it, and checks
that it is empty afterwards.
"""

from __future__ import annotations

import inspect
import json
import linecache
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from sandboxing import sandbox_missing
from test_loader import KERNEL_NOTEBOOK

from grader.isolation import sandbox, scratch
from learning.workshops.checking.child import child_env
from learning.workshops.checking.loader import load_function, load_module

KERNEL_CELLS = list(KERNEL_NOTEBOOK[:3])
"""The notebook definitions of test_loader: imports, a Triton kernel, its wrapper."""
CRASHING_CELLS = [
    "import ctypes",
    "def crash(fn):\n    return ctypes.string_at(0)  # a segfault while the module loads",
    "@crash\ndef strided_softmax(x, num_warps=4):\n    return x",
]


def notebook(path: Path, cells: list[str]) -> Path:
    cells = [{"cell_type": "code", "metadata": {}, "source": c, "outputs": []} for c in cells]
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4}))
    return path


@pytest.fixture
def tmp(tmp_path, monkeypatch) -> Path:
    """This test's own temporary folder, empty."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_a_notebook_loads_and_runs_with_no_temporary_folder(tmp_path, tmp):
    """Does a notebook's Triton kernel load and run, with its source readable as Triton and
    tracebacks read it (even after linecache is cleared), and leave nothing behind?"""
    path = notebook(tmp_path / "impl.ipynb", KERNEL_CELLS)
    double = load_function(path, "double")
    module = sys.modules[double.__module__]
    linecache.clearcache()
    assert "tl.store(Y + cols" in inspect.getsource(module.double_kernel.fn)
    x = torch.arange(5.0, device="cuda" if torch.cuda.is_available() else "cpu")
    assert double(x).tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert double.__code__.co_filename == f"{path.resolve()} (definitions)"
    assert os.listdir(tmp) == []


def test_a_failing_notebook_load_leaves_no_temporary_folder(tmp_path, tmp):
    """Does a notebook whose definitions raise while loading leave nothing behind?"""
    path = notebook(tmp_path / "impl.ipynb", ["import math", "X = 1", "@math.sqrt\ndef f(): pass"])
    with pytest.raises(Exception, match="raised TypeError while loading"):
        load_module(path)
    assert os.listdir(tmp) == []


def test_a_load_that_crashes_the_process_leaves_no_temporary_folder(tmp_path, tmp):
    """When the student's code segfaults the child while loading, is nothing left behind?"""
    path = notebook(tmp_path / "impl.ipynb", CRASHING_CELLS)
    code = "import sys; from pathlib import Path; from learning.workshops.checking.loader import "
    code += "load_function; load_function(Path(sys.argv[1]), 'strided_softmax')"
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        env=child_env(TMPDIR=str(tmp)),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode < 0, done.stderr  # killed by its signal
    assert os.listdir(tmp) == []


def test_remove_tree_removes_what_a_sandbox_locked(tmp_path):
    """Are folders of mode 000 removed, and is a symlink's target left alone?"""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the sandbox's")
    outside.chmod(0o755)
    folder = tmp_path / "i1-sandbox-x"
    (folder / "a" / "b").mkdir(parents=True)
    (folder / "a" / "b" / "f").write_text("x")
    (folder / "link").symlink_to(outside)
    (folder / "a" / "b").chmod(0)
    (folder / "a").chmod(0)
    folder.chmod(0)
    scratch.remove_tree(folder)
    assert not folder.exists()
    assert (outside / "keep.txt").read_text() == "not the sandbox's"
    assert stat.S_IMODE(outside.stat().st_mode) == 0o755


def test_a_sandbox_leaves_no_scratch_folder(tmp):
    """After a sandboxed run that locks its folders and then crashes, is its scratch gone?"""
    if sandbox_missing() is not None:
        pytest.skip(sandbox_missing())
    code = (
        "import ctypes, os; os.makedirs('/work/a/b'); open('/work/a/b/f', 'w').write('x'); "
        "os.chmod('/work/a/b', 0); os.chmod('/work/a', 0); ctypes.string_at(0)"
    )
    with scratch.scratch() as work:
        assert work.parent == tmp
        run = sandbox.run_sandboxed([sys.executable, "-c", code], work=work, timeout_s=60)
    assert run.returncode != 0
    assert os.listdir(tmp) == []
