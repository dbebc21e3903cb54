"""Tests for counting the Triton kernel launches made inside a block."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.jit import KernelInterface

from learning.workshops.checking.launches import Launch, count_launches
from learning.workshops.contracts import default_device


@triton.jit
def fill_kernel(Y, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    tl.store(Y + cols, tl.full((BLOCK,), 7.0, tl.float32), mask=cols < N)


def fill(n: int, grid=(1,)) -> torch.Tensor:
    y = torch.zeros(n, device=default_device())
    fill_kernel[grid](y, n, BLOCK=triton.next_power_of_2(n))
    return y


def test_one_launch_is_counted_with_its_grid():
    """Is one kernel[grid](...) call recorded once, with the kernel's name and grid?"""
    with count_launches() as log:
        y = fill(3)
    assert y.tolist() == [7.0, 7.0, 7.0]
    assert len(log) == 1
    assert log.launches == [Launch("fill_kernel", (1,))]


def test_each_launch_is_counted():
    """Are two launches in one block counted as two?"""
    with count_launches() as log:
        fill(3)
        fill(4, grid=(2,))
    assert [launch.grid for launch in log.launches] == [(1,), (2,)]


def test_a_callable_grid_is_recorded_as_callable():
    """Is a grid given as a function (meta -> tuple) recorded as ("callable",)?"""
    with count_launches() as log:
        fill(3, grid=lambda meta: (1,))
    assert log.launches == [Launch("fill_kernel", ("callable",))]


def test_nothing_launched_counts_zero():
    """When the block launches no kernel (torch only), is the count 0?"""
    with count_launches() as log:
        torch.softmax(torch.ones(2, 3), dim=1)
    assert len(log) == 0


def test_indexing_without_calling_is_not_a_launch():
    """Is `kernel[grid]` without the call (no kernel runs) left uncounted?"""
    with count_launches() as log:
        fill_kernel[(1,)]
    assert len(log) == 0


def test_getitem_is_restored_afterwards():
    """After the block, is KernelInterface.__getitem__ the original again?"""
    original = KernelInterface.__getitem__
    with count_launches():
        assert KernelInterface.__getitem__ is not original
    assert KernelInterface.__getitem__ is original


def test_getitem_is_restored_when_the_block_raises():
    """When the block raises, is __getitem__ restored and the error passed on?"""
    original = KernelInterface.__getitem__
    with pytest.raises(RuntimeError, match="student bug"), count_launches():
        fill(2)
        raise RuntimeError("student bug")
    assert KernelInterface.__getitem__ is original


def test_launches_after_the_block_are_not_counted():
    """Is a launch made after the block closed left out of its log?"""
    with count_launches() as log:
        fill(2)
    fill(2)
    assert len(log) == 1


@triton.jit
def copy_kernel(X, Y, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    tl.store(Y + cols, tl.load(X + cols, mask=cols < N), mask=cols < N)


def kernel_copy(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    copy_kernel[(1,)](x, y, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return y


def view() -> torch.Tensor:
    return torch.arange(12.0, device=default_device()).view(3, 4).t()


READS = {
    "x.contiguous() on a transpose": (lambda x: x.contiguous(), "aten.clone (a copy"),
    "x.clone()": (lambda x: x.clone(), "aten.clone"),
    "x.to(float16)": (lambda x: x.to(torch.float16), "aten._to_copy"),
    "y.copy_(x)": (lambda x: torch.empty(4, 3, device=x.device).copy_(x), "aten.copy_"),
    "torch.softmax(x)": (lambda x: torch.softmax(x, 1), "aten._softmax (torch.softmax)"),
    "x.sum()": (lambda x: x.sum(), "aten.sum (torch compute on the input)"),
    "a slice, then .item()": (lambda x: x[0, 0].item(), "aten._local_scalar_dense"),
}


@pytest.mark.parametrize("name", READS)
def test_torch_reading_the_input_is_recorded(name):
    """Is each way of reading the watched input with torch recorded, named as students
    would write it?"""
    action, expected = READS[name]
    x = view()
    with count_launches(watch=x) as log:
        action(x)
    assert log.torch_reads and log.torch_reads[0].startswith(expected)


NOT_READS = {
    "metadata": lambda x: (x.shape, x.stride(), x.storage_offset(), x.dtype, x.is_contiguous()),
    "views": lambda x: (x.t(), x[1:, ::2], x[:1].expand(4, 3), x.detach()),
    "allocations": lambda x: (torch.empty_like(x), x.new_empty(5), torch.empty(4, 3)),
    "x.contiguous() on a contiguous input": lambda x: x.t().t().contiguous(),
    "torch on another tensor": lambda x: torch.softmax(torch.ones(2, 3), 1),
    "the kernel's own loads": kernel_copy,
}


@pytest.mark.parametrize("name", NOT_READS)
def test_what_reads_nothing_is_not_recorded(name):
    """Are metadata, views, allocations, no-op .contiguous() calls, other tensors and the
    kernel launch itself left out?"""
    x = view().t() if name == "x.contiguous() on a contiguous input" else view()
    with count_launches(watch=x) as log:
        NOT_READS[name](x)
    assert log.torch_reads == []


def test_reads_are_watched_only_while_the_block_runs():
    """Is a read after the block closed left out, and nothing watched without `watch`?"""
    x = view()
    with count_launches() as unwatched:
        x.contiguous()
    with count_launches(watch=x) as watched:
        pass
    x.contiguous()
    assert unwatched.torch_reads == [] and watched.torch_reads == []


@triton.autotune(
    configs=[triton.Config({"BLOCK": 32}, num_warps=2), triton.Config({"BLOCK": 64}, num_warps=4)],
    key=["N"],
)
@triton.jit
def tuned_fill_kernel(Y, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    tl.store(Y + cols, tl.full((BLOCK,), 7.0, tl.float32), mask=cols < N)


@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["N"])})
@triton.jit
def heuristic_fill_kernel(Y, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    tl.store(Y + cols, tl.full((BLOCK,), 7.0, tl.float32), mask=cols < N)


def launch_through_a_handle(y: torch.Tensor) -> None:
    """The fused-softmax tutorial's launch: warm up into a handle, then launch the handle."""
    n = y.numel()
    handle = fill_kernel.warmup(y, n, BLOCK=triton.next_power_of_2(n), grid=(1,))
    handle._init_handles()
    handle[(1, 1, 1)](y, n, triton.next_power_of_2(n))


LAUNCHERS = {
    "autotune": lambda y: tuned_fill_kernel[(1,)](y, y.numel()),
    "heuristics": lambda y: heuristic_fill_kernel[(1,)](y, y.numel()),
    "compiled handle": launch_through_a_handle,
}


@pytest.mark.parametrize("name", LAUNCHERS)
def test_every_launch_style_is_counted_once(name):
    """Are autotuned, heuristic and pre-compiled launches each seen as one launch that ran
    (the autotuner's choice of config in the interpreter included)?"""
    y = torch.zeros(20, device=default_device())
    LAUNCHERS[name](y)  # an autotuner times its configs on a GPU on its first call
    y.zero_()
    with count_launches(watch=y) as log:
        LAUNCHERS[name](y)
    assert len(log) == 1
    assert torch.equal(y, torch.full((20,), 7.0, device=y.device))
