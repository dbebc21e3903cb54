"""Grid (B, R): the row is program_id(1), as kernels written for a (heads, rows) grid read
it, folded onto axis 0 past 65535 rows."""

import torch
import triton
import triton.language as tl

from learning.workshops.contracts import device_context, matrix, warps

AXIS_1_MAX = 65535
"""The most programs CUDA launches on grid axis 1 (axis 0 allows 2**31 - 1)."""


@triton.jit
def softmax_kernel(X, Y, M, SR, SC, N, AXIS_1: tl.constexpr, BLOCK: tl.constexpr):
    # Program (b, r) writes the softmax of row b*AXIS_1 + r of X into that row of Y; the
    # last band's programs past M-1 skip it.
    row = tl.program_id(0).to(tl.int64) * AXIS_1 + tl.program_id(1)
    if row < M:
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(X + row * SR + cols * SC, mask=mask, other=-float("inf")).to(tl.float32)
        x = x - tl.max(x, axis=0)
        numerator = tl.exp(x)
        y = numerator / tl.sum(numerator, axis=0)
        tl.store(Y + row * N + cols, y.to(Y.dtype.element_ty), mask=mask)


def softmax_into(x, y, num_warps):
    """Write the row softmax of x into the contiguous y with one program per row, on axis 1
    up to 65535 rows, in bands along axis 0 beyond."""
    M, N = x.shape
    grid = (triton.cdiv(M, AXIS_1_MAX), min(M, AXIS_1_MAX))
    block = triton.next_power_of_2(N)
    softmax_kernel[grid](
        x, y, M, x.stride(0), x.stride(1), N, AXIS_1_MAX, BLOCK=block, num_warps=num_warps
    )


def launch_softmax(x, num_warps=4):
    """Launch softmax_kernel on a 2-D view, with no checks: a new contiguous output of x's dtype."""
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    softmax_into(x, y, num_warps)
    return y


def strided_softmax(x, num_warps=4):
    """Row softmax of any 2-D view, as a new contiguous tensor of x's dtype."""
    M, N = matrix(x)
    warps(num_warps)
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0:
        return y
    with device_context(x):
        softmax_into(x, y, num_warps)
    return y
