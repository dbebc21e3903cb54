"""The reference solution: the workshop's exercises, as the source notebook solves them.

`address_table` answers the address exercise; pass 1 copies rows through both input
strides; pass 2 adds the stable softmax; pass 3 is the wrapper. `copy_rows` and
`launch_softmax` are the launchers the notebook provides. The two optional exercises
follow: softmax in place over a view (`strided_softmax_`) and the backward pass
(`strided_softmax_backward`, and `StridedSoftmax`, the differentiable op built from both
passes). Each function here is the text
of one solution cell (a test keeps them equal), and the zoo (`grader.zoo`) derives each
buggy implementation from this file by small edits.
"""

import torch
import triton
import triton.language as tl

from learning.workshops.contracts import (
    device_context,
    matching_pair,
    matrix,
    select_mode,
    warps,
    writable_matrix,
)

select_mode(verbose=False)


def address_table(view):
    """Every logical element of a 2-D view as (row, col, storage index)."""
    rows, cols = view.shape
    row_stride, col_stride = view.stride()
    start = view.storage_offset()
    return [
        (row, col, start + row * row_stride + col * col_stride)
        for row in range(rows)
        for col in range(cols)
    ]


@triton.jit
def copy_rows_kernel(X, Y, SR, SC, N, BLOCK: tl.constexpr):
    # Program `row` copies logical row `row` of X (strides SR, SC) into row `row` of Y.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    values = tl.load(X + row * SR + cols * SC, mask=mask)
    tl.store(Y + row * N + cols, values, mask=mask)


def copy_rows(x, num_warps=4):
    """Copy any 2-D view into a new contiguous tensor with copy_rows_kernel."""
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    block = triton.next_power_of_2(N)
    copy_rows_kernel[(M,)](x, y, x.stride(0), x.stride(1), N, BLOCK=block, num_warps=num_warps)
    return y


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


def launch_softmax(x, num_warps=4):
    """Launch softmax_kernel on a 2-D view, with no checks: pass 3 adds them."""
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    block = triton.next_power_of_2(N)
    softmax_kernel[(M,)](x, y, x.stride(0), x.stride(1), N, BLOCK=block, num_warps=num_warps)
    return y


def strided_softmax(x, num_warps=4):
    """Row softmax of any 2-D view, as a new contiguous tensor of x's dtype."""
    M, N = matrix(x)
    warps(num_warps)
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0:
        return y
    block = triton.next_power_of_2(N)
    with device_context(x):
        softmax_kernel[(M,)](x, y, x.stride(0), x.stride(1), N, BLOCK=block, num_warps=num_warps)
    return y


def worksheet(results):
    """The copy's cost for 4096x4096, cold L2, 4 warps, from a benchmark results file."""
    shape, mode, num_warps = "4096x4096", "cold", 4
    direct = results.find("direct", shape, "transpose", mode, num_warps).median_ms
    copy = results.find("copy", shape, "transpose", mode, num_warps).median_ms
    kernel_alone = results.find("direct", shape, "contiguous", mode, num_warps).median_ms
    return {
        "direct_ms": direct,
        "copy_ms": copy,
        "copy_share": (copy - kernel_alone) / copy,
        "faster": "direct" if direct < copy else "copy",
    }


@triton.jit
def softmax_inplace_kernel(X, SR, SC, N, BLOCK: tl.constexpr):
    # Program `row` reads logical row `row` of X whole, then overwrites it with its softmax.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    ptrs = X + row * SR + cols * SC
    x = tl.load(ptrs, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(ptrs, y.to(X.dtype.element_ty), mask=mask)


def strided_softmax_(x, num_warps=4):
    """Row softmax of a 2-D view in place, through its own strides; returns x."""
    M, N = writable_matrix(x)
    warps(num_warps)
    if M == 0:
        return x
    block = triton.next_power_of_2(N)
    with device_context(x):
        softmax_inplace_kernel[(M,)](x, *x.stride(), N, BLOCK=block, num_warps=num_warps)
    return x


@triton.jit
def softmax_backward_kernel(Y, DY, DX, SRY, SCY, SRD, SCD, N, BLOCK: tl.constexpr):
    # Program `row` writes dx = y * (dy - sum(dy * y)) for logical row `row` into DX.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    y = tl.load(Y + row * SRY + cols * SCY, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(DY + row * SRD + cols * SCD, mask=mask, other=0.0).to(tl.float32)
    dx = y * (dy - tl.sum(dy * y, axis=0))
    tl.store(DX + row * N + cols, dx.to(DX.dtype.element_ty), mask=mask)


def strided_softmax_backward(y, dy, num_warps=4):
    """The gradient of a row softmax from its output y and output gradient dy, any views
    each, as a new contiguous tensor of y's dtype."""
    M, N = matching_pair(y, dy)
    warps(num_warps)
    dx = torch.empty((M, N), dtype=y.dtype, device=y.device)
    if M == 0:
        return dx
    block = triton.next_power_of_2(N)
    strides = (*y.stride(), *dy.stride())
    with device_context(y):
        softmax_backward_kernel[(M,)](y, dy, dx, *strides, N, BLOCK=block, num_warps=num_warps)
    return dx


class StridedSoftmax(torch.autograd.Function):
    """strided_softmax as a differentiable op: StridedSoftmax.apply(x)."""

    @staticmethod
    def forward(ctx, x):
        y = strided_softmax(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return strided_softmax_backward(y, dy)
