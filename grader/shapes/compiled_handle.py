"""Compiled ahead with warmup() and launched through the handle, as Triton's tutorial does."""

import torch
import triton
import triton.language as tl

from learning.workshops.contracts import device_context, matrix, warps


@triton.jit
def softmax_kernel(X, Y, SR, SC, N, BLOCK: tl.constexpr):
    # Program `row` writes the softmax of logical row `row` of X into row `row` of Y.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * SR + cols * SC, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(Y + row * N + cols, y.to(Y.dtype.element_ty), mask=mask)


def softmax_into(x, y, num_warps):
    """Compile softmax_kernel for these arguments, then launch the handle on M programs.

    warmup() compiles (or finds in the cache) the kernel specialised for exactly these
    arguments and returns its handle; the handle takes every argument positionally, the
    constexpr BLOCK included, in the kernel's order.
    """
    M, N = x.shape
    block = triton.next_power_of_2(N)
    handle = softmax_kernel.warmup(
        x, y, x.stride(0), x.stride(1), N, BLOCK=block, num_warps=num_warps, grid=(1,)
    )
    handle._init_handles()
    handle[(M, 1, 1)](x, y, x.stride(0), x.stride(1), N, block)


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
