"""The workshop page's names are the course's API: its module, its two names and its three
commands work verbatim, whatever the layout beneath them (shared/seeds/000_*.txt)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from learning.workshops.checking.child import child_env

REPO = Path(__file__).resolve().parents[1]
PAGE_COMMANDS = (
    "python -m learning.workshops.check strided_softmax --hint",
    "python -m learning.workshops.check strided_softmax",
    "python -m learning.workshops.benchmark --op strided_softmax --output results/local/i1.json",
)
"""The three commands the page prints, character for character."""

PAGE_SOLUTION = """
import contextlib

import torch
import triton
import triton.language as tl

from learning.workshops.contracts import matrix, warps


@triton.jit
def softmax_kernel(X, Y, SR, SC, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * SR + cols * SC, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(Y + row * N + cols, y.to(Y.dtype.element_ty), mask=mask)


def strided_softmax(x, num_warps=4):
    M, N = matrix(x)
    warps(num_warps)
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0:
        return y
    on_device = torch.cuda.device(x.device) if x.is_cuda else contextlib.nullcontext()
    with on_device:
        softmax_kernel[(M,)](
            x, y, x.stride(0), x.stride(1), N, BLOCK=triton.next_power_of_2(N),
            num_warps=num_warps,
        )
    return y
"""
"""A solution written from the page alone: its imports are the page's."""


def test_page_module_and_names_import():
    """Does `from learning.workshops.contracts import matrix, warps` work, as the page says?"""
    from learning.workshops.contracts import matrix, warps

    assert matrix.__module__ == "learning.workshops.contracts"
    assert callable(warps)


def page_command(command: str, folder: Path) -> subprocess.CompletedProcess:
    """One of the page's commands, run verbatim in `folder` with this Python as `python`."""
    argv = shlex.split(command)
    assert argv[0] == "python"
    env = child_env()
    env.pop("TRITON_INTERPRET", None)  # the commands choose their mode themselves
    return subprocess.run(
        [sys.executable, *argv[1:]], cwd=folder, env=env, capture_output=True, text=True
    )


@pytest.fixture(scope="module")
def student_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("student")
    (folder / "strided_softmax.py").write_text(PAGE_SOLUTION)
    return folder


@pytest.mark.parametrize("command", PAGE_COMMANDS[:2])
def test_page_check_commands_pass_a_page_solution(command, student_folder):
    """Do the page's two check commands, run verbatim beside strided_softmax.py, pass a
    solution written from the page?"""
    done = page_command(command, student_folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "strided_softmax" in done.stdout


def test_page_benchmark_command(student_folder):
    """Does the page's benchmark command run verbatim: on a GPU it writes the results file,
    without one it says in one line that timing needs a CUDA device (exit 2)?"""
    done = page_command(PAGE_COMMANDS[2], student_folder)
    results = student_folder / "results" / "local" / "i1.json"
    if os.environ.get("CUDA_VISIBLE_DEVICES") != "" and _cuda():
        assert done.returncode == 0, done.stderr
        assert results.is_file()
    else:
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.startswith("benchmark: ") and "CUDA device" in done.stderr
        assert "Traceback" not in done.stderr


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()
