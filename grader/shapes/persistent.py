"""A persistent grid-stride loop over rows, as Triton's fused-softmax tutorial launches it."""

import torch
import triton
import triton.language as tl

from learning.workshops.contracts import device_context, matrix, warps

PROGRAMS_WITHOUT_GPU = 3
"""Programs started under the interpreter: fewer than most inputs' rows, so each one loops."""


@triton.jit
def softmax_kernel(X, Y, M, SR, SC, N, BLOCK: tl.constexpr):
    # Program p of P writes rows p, p + P, p + 2P, ... of Y (an int64 row, from an int64 start).
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    for row in tl.range(tl.program_id(0).to(tl.int64), M, tl.num_programs(0)):
        x = tl.load(X + row * SR + cols * SC, mask=mask, other=-float("inf")).to(tl.float32)
        x = x - tl.max(x, axis=0)
        numerator = tl.exp(x)
        y = numerator / tl.sum(numerator, axis=0)
        tl.store(Y + row * N + cols, y.to(Y.dtype.element_ty), mask=mask)


def programs(x, rows):
    """How many programs to start: one per SM of x's GPU (a few without one), at most rows."""
    if x.is_cuda:
        count = torch.cuda.get_device_properties(x.device).multi_processor_count
    else:
        count = PROGRAMS_WITHOUT_GPU
    return min(count, rows)


def softmax_into(x, y, num_warps):
    """Write the row softmax of x into the contiguous y with a persistent grid of programs."""
    M, N = x.shape
    block = triton.next_power_of_2(N)
    grid = (programs(x, M),)
    softmax_kernel[grid](x, y, M, x.stride(0), x.stride(1), N, BLOCK=block, num_warps=num_warps)


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
