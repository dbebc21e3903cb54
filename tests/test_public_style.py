"""Kernels written the ways public Triton softmax code is written (tests/public_style/):
each correct one passes `check`, each buggy one gets the hints that name its bugs. The same
table holds on a GPU: run this file there and the compiled kernels must give the same."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from learning.workshops.check import run_check

FOLDER = Path(__file__).with_name("public_style")
FORWARD, BACKWARD = "strided_softmax", "strided_softmax_backward"
EXPECTED = {
    "aliases": (FORWARD, []),  # exp = tl.exp and tl functions imported by name
    "autotuned_many": (FORWARD, []),  # 120 configs keyed on the width
    "three_pass_tiles": (FORWARD, []),  # tl.range loops over column tiles
    "bf16_backward": (BACKWARD, []),  # bfloat16 arithmetic with no float32 cast
    "rows_at_pid_times_n": (FORWARD, ["strides"]),
    "two_rows_per_program": (FORWARD, ["strides"]),
    "tutorial_row_stride": (FORWARD, ["column-stride", "output-layout"]),
    "row_stride_in_bytes": (FORWARD, ["row-stride"]),
    "backward_contiguous_tile": (BACKWARD, ["strides", "output-layout"]),
    "backward_row_strides": (BACKWARD, ["column-stride", "output-layout"]),
    "backward_typo": (BACKWARD, ["exception"]),
}
"""Each kernel's op and the hints its check gives, in order ([]: every case passes)."""


def test_every_kernel_in_the_folder_is_in_the_table():
    """Is each file of tests/public_style/ judged here, and each entry a file?"""
    assert {p.stem for p in FOLDER.glob("*.py")} == set(EXPECTED)


@pytest.mark.parametrize("name", EXPECTED)
def test_public_style_kernel_gets_the_hints_for_its_bugs(name):
    """Does `check --hint` pass the kernel when it is correct, and give exactly the hints
    that name its bugs when it is not (the check's own child, as students run it)?"""
    op, hints = EXPECTED[name]
    started = time.monotonic()
    report = run_check(op, FOLDER / f"{name}.py", seed=5)
    failed = [r.detail for r in report.results if not r.passed]
    assert [h.id for h in report.hints] == hints, failed
    assert report.passed == (not hints), failed
    assert time.monotonic() - started < 60, "a check takes at most a minute"


def test_an_autotuned_kernel_says_it_ran_its_first_config():
    """Does the check of a kernel autotuned over 120 configs say that it ran the first one
    for each key, untimed, on this device as on the other?"""
    report = run_check(FORWARD, FOLDER / "autotuned_many.py", seed=5)
    [note] = [n for n in report.notes if "autotune" in n]
    assert "ran the first of 120 autotune configs" in note and "without timing them" in note


@pytest.mark.skipif(
    torch.cuda.is_available(),
    reason="a GPU's check runs unaudited itself (test_public_style_kernel_gets_the_hints...)",
)
@pytest.mark.parametrize("name", EXPECTED)
def test_the_hints_need_no_audit(name, monkeypatch):
    """On a GPU no audit watches the loads and stores: do values, layout, the NaN-filled
    storage and the guarded output alone give each kernel the same hints (the part of a
    GPU's run that this machine can show)?"""
    import contextlib

    from learning.workshops.checking import cases, followons
    from learning.workshops.checking.cases import OPS, suite
    from learning.workshops.checking.hint_rules import diagnose
    from learning.workshops.checking.loader import load_module
    from learning.workshops.notebook.testing import run_cases

    monkeypatch.setattr(cases, "_audit", lambda x: contextlib.nullcontext())
    monkeypatch.setattr(followons, "_audited", lambda *t, **k: contextlib.nullcontext())
    op, hints = EXPECTED[name]
    fn = getattr(load_module(FOLDER / f"{name}.py"), OPS[op].function)
    results = run_cases(fn, op, suite(op, None, "cpu"), seed=5)
    assert [h.id for h in diagnose(results)] == hints, [r.detail for r in results if not r.passed]
