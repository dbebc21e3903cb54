"""Column tiles with an online softmax for wide rows, as Liger-Kernel's multi-block kernel loops."""

import torch
import triton
import triton.language as tl

from learning.workshops.contracts import device_context, matrix, warps

WIDEST_TILE = 128
"""BLOCK_N at most: rows wider than this loop over several tiles (the public 1000-wide case
takes eight)."""


@triton.jit
def load_tile(x_row, SC, cols, N):
    # Columns `cols` of one input row in fp32; lanes past column N-1 read -inf, which exp zeroes.
    return tl.load(x_row + cols * SC, mask=cols < N, other=-float("inf")).to(tl.float32)


@triton.jit
def softmax_kernel(X, Y, SR, SC, N, BLOCK_N: tl.constexpr):
    # Program `row` reads its row twice, tile by tile: first for the max and the sum of exps,
    # rescaling the sum whenever the running max grows; then to write exp(x - max) / sum.
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * SR
    y_row = Y + row * N
    tile = tl.arange(0, BLOCK_N)
    top = -float("inf")
    total = 0.0
    for start in tl.range(0, N, BLOCK_N):
        x = load_tile(x_row, SC, start + tile, N)
        new_top = tl.maximum(top, tl.max(x, axis=0))
        # While the row has seen only -inf, shift by 0: exp(-inf - -inf) would be NaN.
        shift = tl.where(new_top == -float("inf"), 0.0, new_top)
        total = total * tl.exp(top - shift) + tl.sum(tl.exp(x - shift), axis=0)
        top = new_top
    for start in tl.range(0, N, BLOCK_N):
        cols = start + tile
        x = load_tile(x_row, SC, cols, N)
        y = tl.exp(x - top) / total
        tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=cols < N)


def softmax_into(x, y, num_warps):
    """Write the row softmax of x into the contiguous y, one program per row, tiled columns."""
    M, N = x.shape
    tile = min(triton.next_power_of_2(N), WIDEST_TILE)
    softmax_kernel[(M,)](x, y, x.stride(0), x.stride(1), N, BLOCK_N=tile, num_warps=num_warps)


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
