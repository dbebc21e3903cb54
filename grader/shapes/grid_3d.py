"""A 3-D grid (1, SLAB, cdiv(M, SLAB)): rows spread over axes 1 and 2, as batched kernels do."""

import torch
import triton
import triton.language as tl

from learning.workshops.contracts import device_context, matrix, warps

ROWS_PER_SLAB = 4
"""Rows on grid axis 1; axis 2 counts slabs. Small, so that even 5 rows need two slabs."""


@triton.jit
def softmax_kernel(X, Y, M, SR, SC, N, SLAB, BLOCK: tl.constexpr):
    # Program (0, i, j) writes row j*SLAB + i of Y; the last slab's programs past M-1 skip it.
    row = tl.program_id(2).to(tl.int64) * SLAB + tl.program_id(1)
    if row < M:
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(X + row * SR + cols * SC, mask=mask, other=-float("inf")).to(tl.float32)
        x = x - tl.max(x, axis=0)
        numerator = tl.exp(x)
        y = numerator / tl.sum(numerator, axis=0)
        tl.store(Y + row * N + cols, y.to(Y.dtype.element_ty), mask=mask)


def softmax_into(x, y, num_warps):
    """Write the row softmax of x into the contiguous y, rows spread over grid axes 1 and 2.

    CUDA allows at most 65535 programs on axes 1 and 2, so the slab grows for huge M.
    """
    M, N = x.shape
    slab = max(ROWS_PER_SLAB, triton.cdiv(M, 65535))
    grid = (1, slab, triton.cdiv(M, slab))
    block = triton.next_power_of_2(N)
    softmax_kernel[grid](
        x, y, M, x.stride(0), x.stride(1), N, slab, BLOCK=block, num_warps=num_warps
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
