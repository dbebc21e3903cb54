"""Correct: one program per row, three passes over column tiles (max, sum, write), as
kernels too wide for one block are often written."""

import torch
import triton
import triton.language as tl

from learning.workshops.contracts import device_context, matrix, warps


@triton.jit
def tiled_softmax(X, Y, sr, sc, N, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * sr
    top = tl.full((TILE,), -float("inf"), tl.float32)
    for start in tl.range(0, N, TILE):
        cols = start + tl.arange(0, TILE)
        top = tl.maximum(top, tl.load(x_row + cols * sc, mask=cols < N, other=-float("inf")))
    m = tl.max(top, axis=0)
    total = tl.zeros((TILE,), tl.float32)
    for start in tl.range(0, N, TILE):
        cols = start + tl.arange(0, TILE)
        x = tl.load(x_row + cols * sc, mask=cols < N, other=-float("inf")).to(tl.float32)
        total += tl.exp(x - m)
    s = tl.sum(total, axis=0)
    for start in tl.range(0, N, TILE):
        cols = start + tl.arange(0, TILE)
        x = tl.load(x_row + cols * sc, mask=cols < N, other=-float("inf")).to(tl.float32)
        tl.store(Y + row * N + cols, (tl.exp(x - m) / s).to(Y.dtype.element_ty), mask=cols < N)


def strided_softmax(x, num_warps=4):
    M, N = matrix(x)
    warps(num_warps)
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0:
        return y
    with device_context(x):
        tiled_softmax[(M,)](x, y, *x.stride(), N, TILE=64, num_warps=num_warps)
    return y
