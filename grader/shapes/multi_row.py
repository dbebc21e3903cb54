"""Several rows per program as one [BLOCK_M, BLOCK_N] tile, as FlagGems and xformers write it."""

import torch
import triton
import triton.language as tl

from learning.workshops.contracts import device_context, matrix, warps

ROWS_PER_PROGRAM = 4
"""BLOCK_M: rows in one program's tile; the last tile is masked where rows run out."""


@triton.jit
def softmax_kernel(X, Y, M, SR, SC, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # Program p writes rows p*BLOCK_M to p*BLOCK_M + BLOCK_M - 1 of Y, one tile row each.
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    in_rows = rows[:, None] < M
    mask = in_rows & (cols[None, :] < N)
    x_ptrs = X + rows[:, None] * SR + cols[None, :] * SC
    x = tl.load(x_ptrs, mask=mask, other=-float("inf")).to(tl.float32)
    x = tl.where(in_rows, x, 0.0)  # tile rows past M: all -inf would make NaN (inf - inf)
    x = x - tl.max(x, axis=1)[:, None]
    numerator = tl.exp(x)
    y = numerator / tl.sum(numerator, axis=1)[:, None]
    tl.store(Y + rows[:, None] * N + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


def softmax_into(x, y, num_warps):
    """Write the row softmax of x into the contiguous y, ROWS_PER_PROGRAM rows per program."""
    M, N = x.shape
    grid = (triton.cdiv(M, ROWS_PER_PROGRAM),)
    softmax_kernel[grid](
        x,
        y,
        M,
        x.stride(0),
        x.stride(1),
        N,
        BLOCK_M=ROWS_PER_PROGRAM,
        BLOCK_N=triton.next_power_of_2(N),
        num_warps=num_warps,
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
