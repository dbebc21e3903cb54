"""Bugs: y and dy read as one contiguous tile of rows, and dx allocated like dy."""

import torch
import triton
import triton.language as tl

from learning.workshops.contracts import device_context, matching_pair, warps


@triton.jit
def _load_pair(y_ptr, dy_ptr, indices_b, B, H, BLOCK_SIZE_H: tl.constexpr):
    indices_h = tl.arange(0, BLOCK_SIZE_H)
    indices = indices_b[:, None] * H + indices_h[None, :]
    mask = (indices_b[:, None] < B) & (indices_h[None, :] < H)
    y = tl.load(y_ptr + indices, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + indices, mask=mask, other=0.0).to(tl.float32)
    return y, dy, indices, mask


@triton.jit
def softmax_backward_kernel(
    y_ptr, dy_ptr, dx_ptr, B, H, BLOCK_SIZE_B: tl.constexpr, BLOCK_SIZE_H: tl.constexpr
):
    indices_b = tl.program_id(0) * BLOCK_SIZE_B + tl.arange(0, BLOCK_SIZE_B)
    y, dy, indices, mask = _load_pair(y_ptr, dy_ptr, indices_b, B, H, BLOCK_SIZE_H)
    dx = y * (dy - tl.sum(y * dy, axis=1, keep_dims=True))
    tl.store(dx_ptr + indices, dx.to(dx_ptr.dtype.element_ty), mask=mask)


def strided_softmax_backward(y, dy, num_warps=4):
    M, N = matching_pair(y, dy)
    warps(num_warps)
    dx = torch.empty_like(dy)
    if M == 0:
        return dx
    with device_context(y):
        softmax_backward_kernel[(triton.cdiv(M, 2),)](
            y, dy, dx, M, N, BLOCK_SIZE_B=2, BLOCK_SIZE_H=triton.next_power_of_2(N)
        )
    return dx
