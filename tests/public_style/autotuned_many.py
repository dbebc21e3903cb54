"""Correct: rows per program and warps autotuned over 120 configs keyed on the width."""

import torch
import triton
import triton.language as tl

from learning.workshops.contracts import device_context, matrix, warps

CONFIGS = [
    triton.Config({"ROWS": rows}, num_warps=w, num_stages=stages)
    for rows in (1, 2, 4, 8, 16)
    for w in (1, 2, 4, 8, 16, 32)
    for stages in (1, 2, 3, 4)
]


@triton.autotune(configs=CONFIGS, key=["n_cols"])
@triton.jit
def softmax_rows(X, Y, n_rows, stride_r, stride_c, n_cols, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offs = rows[:, None].to(tl.int64) * stride_r + cols[None, :] * stride_c
    x = tl.load(X + offs, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=1)[:, None]
    num = tl.exp(x)
    out = num / tl.sum(num, axis=1)[:, None]
    dest = rows[:, None].to(tl.int64) * n_cols + cols[None, :]
    tl.store(Y + dest, out.to(Y.dtype.element_ty), mask=mask)


def strided_softmax(x, num_warps=4):
    M, N = matrix(x)
    warps(num_warps)
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0:
        return y
    grid = lambda meta: (triton.cdiv(M, meta["ROWS"]),)  # noqa: E731
    with device_context(x):
        softmax_rows[grid](x, y, M, *x.stride(), N, BLOCK=triton.next_power_of_2(N))
    return y
