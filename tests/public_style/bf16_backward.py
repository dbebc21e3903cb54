"""Correct: the backward computed in the inputs' own dtype, no float32 cast, as public
backward kernels often are (bfloat16 arithmetic included)."""

import torch
import triton
import triton.language as tl

from learning.workshops.contracts import device_context, matching_pair, warps


@triton.jit
def softmax_bwd(DX, DY, Y, sry, scy, srd, scd, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    y = tl.load(Y + row * sry + offs * scy, mask=mask, other=0.0)
    dy = tl.load(DY + row * srd + offs * scd, mask=mask, other=0.0)
    dot = tl.sum(y * dy, axis=0)
    tl.store(DX + row * n_cols + offs, y * (dy - dot), mask=mask)


def strided_softmax_backward(y, dy, num_warps=4):
    M, N = matching_pair(y, dy)
    warps(num_warps)
    dx = torch.empty((M, N), dtype=y.dtype, device=y.device)
    if M == 0:
        return dx
    with device_context(y):
        softmax_bwd[(M,)](dx, dy, y, *y.stride(), *dy.stride(), N, BLOCK=triton.next_power_of_2(N))
    return dx
