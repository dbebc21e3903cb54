"""Bugs: y's and dy's rows from their strides, their columns as if adjacent, and dx
allocated like y."""

import torch
import triton
import triton.language as tl

from learning.workshops.contracts import device_context, matching_pair, warps


@triton.jit
def softmax_grad(
    d_in_ptr,
    d_out_ptr,
    out_ptr,
    d_in_stride,
    d_out_stride,
    out_stride,
    n_cols,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    mask = offs < n_cols
    d_out = tl.load(d_out_ptr + row * d_out_stride + offs, mask=mask, other=0.0).to(tl.float32)
    out = tl.load(out_ptr + row * out_stride + offs, mask=mask, other=0.0).to(tl.float32)
    d_in = out * (d_out - tl.sum(d_out * out, axis=0))
    tl.store(d_in_ptr + row * d_in_stride + offs, d_in.to(d_in_ptr.dtype.element_ty), mask=mask)


def strided_softmax_backward(y, dy, num_warps=4):
    M, N = matching_pair(y, dy)
    warps(num_warps)
    dx = torch.empty_like(y)
    if M == 0:
        return dx
    with device_context(y):
        softmax_grad[(M,)](
            dx,
            dy,
            y,
            dx.stride(0),
            dy.stride(0),
            y.stride(0),
            N,
            BLOCK_SIZE=triton.next_power_of_2(N),
        )
    return dx
