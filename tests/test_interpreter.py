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


exp = tl.exp  # module-level aliases of tl builtins, as public kernels keep them
from triton.language import load as tl_load  # noqa: E402


@triton.jit
def aliased_kernel(X, Y, N: tl.constexpr):
    cols = tl.arange(0, N)
    tl.store(Y + cols, exp(tl_load(X + cols)))


def test_a_module_level_alias_of_a_tl_function_runs_as_on_a_gpu():
    """Does a kernel that calls `exp = tl.exp` and `tl_load` (imported from
    triton.language) run, instead of "Did you forget to add @triton.jit?", with the module's
    names put back after the launch?"""
    x, y = torch.randn(8), torch.empty(8)
    aliased_kernel[(1,)](x, y, 8)
    torch.testing.assert_close(y, x.exp())
    assert tl.core.is_builtin(globals()["exp"]) and tl.core.is_builtin(globals()["tl_load"])


@triton.jit
def bf16_backward_kernel(Y, DY, DX, N, BLOCK: tl.constexpr):
    # The backward in the inputs' own dtype, no float32 cast, as public kernels write it.
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    y = tl.load(Y + cols, mask=mask, other=0.0)
    dy = tl.load(DY + cols, mask=mask, other=0.0)
    dx = y * (dy - tl.sum(y * dy, axis=0))
    tl.store(DX + cols, dx, mask=mask)


def test_bfloat16_arithmetic_runs_on_values_not_bit_patterns():
    """Does bfloat16 arithmetic (products, a row sum, a difference) compute on the values,
    as a GPU does, instead of on the 16-bit patterns that hold them?"""
    gen = torch.Generator().manual_seed(0)
    y = torch.rand(13, generator=gen).to(torch.bfloat16)
    dy = torch.randn(13, generator=gen).to(torch.bfloat16)
    dx = torch.empty_like(y)
    bf16_backward_kernel[(1,)](y, dy, dx, 13, BLOCK=16)
    expected = y.double() * (dy.double() - (y.double() * dy.double()).sum())
    torch.testing.assert_close(dx.double(), expected, rtol=1.6e-2, atol=1.6e-2)


@triton.jit
def bf16_row_kernel(X, OUT, N: tl.constexpr):
    cols = tl.arange(0, N)
    x = tl.load(X + cols)
    tl.store(OUT + 0, tl.max(x, axis=0))
    tl.store(OUT + 1, tl.min(x, axis=0))
    tl.store(OUT + 2, tl.sum(tl.where(x < 0, x, 0.0), axis=0))
    tl.store(OUT + 3, tl.argmax(x, axis=0).to(tl.bfloat16))
    tl.store(OUT + 4, (tl.arange(0, N) * 3).to(tl.bfloat16).to(tl.float16).to(tl.bfloat16).sum())


def test_bfloat16_reductions_compare_and_cast_values():
    """Do tl.max, tl.min, tl.argmax and a masked sum of negative bfloat16 values, and casts
    between bfloat16 and integers or float16, give a GPU's results?"""
    x = torch.tensor([-3.0, 1.5, -0.25, 2.0, -7.5, 0.5, 1.0, -1.0], dtype=torch.bfloat16)
    out = torch.empty(5, dtype=torch.bfloat16)
    bf16_row_kernel[(1,)](x, out, 8)
    assert out.tolist() == [2.0, -7.5, -11.75, 3.0, 84.0]


def test_rounding_to_bfloat16_matches_torch():
    """Does float32 -> bfloat16 round as torch does (nearest, ties to even, inf and NaN
    kept), and bfloat16 -> float32 widen exactly?"""
    gen = torch.Generator().manual_seed(1)
    values = torch.cat(
        [
            torch.randn(4096, generator=gen)
            * 10.0 ** torch.randint(-30, 30, (4096,), generator=gen),
            torch.tensor([0.0, -0.0, float("inf"), -float("inf"), 3.4e38, 1.00390625, 1.01171875]),
        ]
    )
    bits = interpreter.bf16_bits(values.numpy())
    assert (bits == values.to(torch.bfloat16).view(torch.int16).numpy().view("uint16")).all()
    nan = interpreter.bf16_bits(torch.tensor([float("nan")]).numpy())
    assert torch.from_numpy(interpreter.bf16_values(nan)).isnan().all()
    back = interpreter.bf16_values(bits)
    assert (back == values.to(torch.bfloat16).float().numpy()).all()
