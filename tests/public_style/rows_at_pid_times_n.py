"""Bug: rows at pid * n_cols, the row's end as the mask's bound (both strides ignored)."""

import torch
import triton
import triton.language as tl

from learning.workshops.contracts import device_context, matrix, warps


@triton.jit
def softmax_fwd_kernel(x_ptr, out_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    row_offsets = pid * n_cols + tl.arange(0, BLOCK_SIZE)
    mask = row_offsets < (pid + 1) * n_cols
    x = tl.load(x_ptr + row_offsets, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    x = tl.exp(x)
    x /= tl.sum(x, axis=0)
    tl.store(out_ptr + row_offsets, x.to(out_ptr.dtype.element_ty), mask=mask)


def strided_softmax(x, num_warps=4):
    M, N = matrix(x)
    warps(num_warps)
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0:
        return y
    with device_context(x):
        softmax_fwd_kernel[(M,)](x, y, N, BLOCK_SIZE=triton.next_power_of_2(N))
    return y
