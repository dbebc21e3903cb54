"""The interpreter runs the launch styles of public Triton code as a GPU would."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from learning.workshops.contracts import interpreter_active
from learning.workshops.notebook import interpreter

pytestmark = pytest.mark.skipif(
    not interpreter_active(), reason="these shims exist only in Triton's interpreter"
)


@triton.jit
def strided_rows_kernel(Y, M, N: tl.constexpr):
    # A persistent loop whose induction variable is cast, as compiled code may do.
    for row in tl.range(tl.program_id(0), M, tl.num_programs(0)):
        tl.store(Y + row.to(tl.int64) * N + tl.arange(0, N), row.to(tl.float32))


def test_range_yields_tensors_as_compiled_code_sees_them():
    """Does `row.to(tl.int64)` work on a `tl.range` induction variable, as on a GPU?"""
    y = torch.empty(5, 4)
    strided_rows_kernel[(2,)](y, 5, 4)
    assert torch.equal(y, torch.arange(5.0)[:, None].expand(5, 4))


def test_a_warmed_up_handle_launches_with_or_without_its_constexprs():
    """Is the handle from `warmup` launched with every argument, or without the
    constexprs it was warmed up with?"""
    y = torch.empty(3, 4)
    handle = strided_rows_kernel.warmup(y, 3, 4, grid=(1,), num_warps=2)
    handle._init_handles()
    handle[(3, 1, 1)](y, 3, 4)
    assert torch.equal(y, torch.arange(3.0)[:, None].expand(3, 4))
    y.zero_()
    handle[(1,)](y, 3)
    assert torch.equal(y, torch.arange(3.0)[:, None].expand(3, 4))
    assert handle.metadata.num_warps == 2


def test_gpu_only_handle_attributes_say_why_they_are_missing():
    """Is reading `n_regs` from an interpreted handle an AttributeError that says why?"""
    handle = strided_rows_kernel.warmup(torch.empty(1, 4), 1, 4, grid=(1,))
    with pytest.raises(AttributeError, match="nothing is compiled.*if x.is_cuda"):
        getattr(handle, "n_regs")  # noqa: B009


@triton.autotune(
    configs=[triton.Config({"BLOCK": 4}, num_warps=1), triton.Config({"BLOCK": 8})], key=["N"]
)
@triton.jit
def tuned_kernel(Y, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    tl.store(Y + cols, tl.full((BLOCK,), BLOCK, tl.float32), mask=cols < N)


def test_autotune_runs_the_first_config_and_says_so():
    """Does an autotuned kernel run (its first config) instead of asking for a driver, and
    is that noted once?"""
    y = torch.zeros(3)
    tuned_kernel[(1,)](y, 3)
    tuned_kernel[(1,)](y, 3)
    assert torch.equal(y, torch.full((3,), 4.0))
    notes = [n for n in interpreter.NOTES if n.startswith("tuned_kernel")]
    assert len(notes) == 1 and "first of 2" in notes[0]


@triton.jit
def axis_1_kernel(Y):
    tl.store(Y + tl.program_id(1), 1.0)


def test_grids_over_cudas_limits_are_refused_as_on_a_gpu():
    """Is a grid with more than 65535 programs on axis 1 refused before any program runs,
    naming the limit and the fix, and a grid on axis 1 at all noted once?"""
    y = torch.zeros(65536)
    axis_1_kernel[(1, 9)](y)
    axis_1_kernel[(1, 9)](y)
    assert y.sum() == 9
    notes = [n for n in interpreter.NOTES if "grid axis 1" in n]
    assert len(notes) == 1 and "more than 65535 rows" in notes[0]
    with pytest.raises(
        RuntimeError, match=r"invalid argument: .* 65536 programs on axis 1.*axis 0"
    ):
        axis_1_kernel[(1, 65536)](y)
    assert y.sum() == 9
