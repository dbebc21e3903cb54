"""Tests for the argument contracts every kernel wrapper checks before it launches."""

from __future__ import annotations

import contextlib
import os

import pytest
import torch

from learning.workshops import contracts
from learning.workshops.contracts import (
    MAX_WIDTH,
    device_context,
    matrix,
    select_mode,
    warps,
)

needs_no_gpu = pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the interpreter mode, chosen only without CUDA"
)


# --- matrix ---------------------------------------------------------------------------


def test_matrix_returns_rows_and_columns():
    """Does matrix() return (M, N) for a 2-D float tensor?"""
    assert matrix(torch.zeros(3, 5)) == (3, 5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_matrix_accepts_each_float_dtype(dtype):
    """Are fp16, bf16 and fp32 all accepted?"""
    assert matrix(torch.zeros(2, 4, dtype=dtype)) == (2, 4)


def test_matrix_accepts_zero_rows():
    """Is a matrix with no rows accepted, so the wrapper can return the empty output?"""
    assert matrix(torch.zeros(0, 7)) == (0, 7)


def test_matrix_refuses_a_list_with_its_type():
    """Is a plain list refused with a TypeError that names its type and the fix?"""
    with pytest.raises(TypeError) as info:
        matrix([[1.0, 2.0]])
    assert str(info.value) == (
        "x must be a torch.Tensor, got list; build it with torch.tensor(...)."
    )


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_matrix_refuses_integer_dtype_naming_it(dtype):
    """Is an integer tensor refused with a TypeError that names its dtype?"""
    with pytest.raises(TypeError) as info:
        matrix(torch.zeros(2, 3, dtype=dtype))
    assert str(info.value) == (
        f"x has dtype {dtype}; use torch.float16, torch.bfloat16 or torch.float32 "
        "(for example x.float())."
    )


def test_matrix_refuses_1d_naming_the_shape():
    """Is a vector refused with a ValueError that gives its rank and shape?"""
    with pytest.raises(ValueError) as info:
        matrix(torch.zeros(5))
    assert str(info.value) == (
        "x must be 2-D (rows, columns), got 1-D with shape (5,); "
        "reshape or index it to a matrix first."
    )


def test_matrix_refuses_3d_naming_the_shape():
    """Is a 3-D tensor refused with a ValueError that gives its rank and shape?"""
    with pytest.raises(ValueError) as info:
        matrix(torch.zeros(2, 3, 4))
    assert str(info.value) == (
        "x must be 2-D (rows, columns), got 3-D with shape (2, 3, 4); "
        "reshape or index it to a matrix first."
    )


def test_matrix_refuses_zero_columns():
    """Is a matrix with no columns refused, since a row softmax needs one?"""
    with pytest.raises(ValueError) as info:
        matrix(torch.zeros(3, 0))
    assert str(info.value) == "x has shape (3, 0): a row softmax needs at least one column."


def test_matrix_accepts_the_widest_row():
    """Is a row of exactly MAX_WIDTH columns still accepted?"""
    x = torch.zeros(1, 1).expand(2, MAX_WIDTH)
    assert matrix(x) == (2, MAX_WIDTH)


def test_matrix_refuses_rows_too_wide_for_one_program():
    """Is a row one column wider than MAX_WIDTH refused with the width and the limit?"""
    x = torch.zeros(1, 1).expand(2, MAX_WIDTH + 1)
    with pytest.raises(ValueError) as info:
        matrix(x)
    assert str(info.value) == (
        f"x has {MAX_WIDTH + 1} columns; one program holds a whole row, so at most "
        f"{MAX_WIDTH} fit. Split the rows or use a looped kernel."
    )


def test_matrix_accepts_stride_zero_views():
    """Is a broadcast view (stride 0) accepted, since the kernel only reads it?"""
    x = torch.arange(4.0).view(1, 4).expand(6, 4)
    assert x.stride() == (0, 1)
    assert matrix(x) == (6, 4)


def test_matrix_accepts_transposed_views():
    """Is a transpose (column stride other than one) accepted?"""
    x = torch.arange(12.0).view(3, 4).t()
    assert x.stride() == (1, 4)
    assert matrix(x) == (4, 3)


@needs_no_gpu
def test_matrix_accepts_cpu_tensors_under_the_interpreter():
    """Is a CPU tensor accepted while Triton runs in its interpreter?"""
    assert os.environ["TRITON_INTERPRET"] == "1"
    assert matrix(torch.zeros(2, 3)) == (2, 3)


def test_matrix_refuses_cpu_tensors_when_compiling_for_the_gpu(monkeypatch):
    """Without the interpreter, is a CPU tensor refused with the way to move it (x.cuda())?"""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError) as info:
        matrix(torch.zeros(2, 3))
    assert str(info.value) == (
        "x is on the CPU but Triton compiles for the GPU; move it with x.cuda(), "
        "or run with TRITON_INTERPRET=1 (select_mode() does this without a GPU)."
    )


def test_matrix_refuses_cpu_tensors_when_interpreter_is_off(monkeypatch):
    """Does matrix() ask interpreter_active() (not a cached flag) whether CPU tensors are ok?"""
    monkeypatch.setattr(contracts, "interpreter_active", lambda: False)
    with pytest.raises(ValueError, match=r"x\.cuda\(\)"):
        matrix(torch.zeros(2, 3))


# --- warps ----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32])
def test_warps_accepts_powers_of_two_up_to_32(n):
    """Is every power of two from 1 to 32 accepted and returned?"""
    assert warps(n) == n


@pytest.mark.parametrize("n", [0, 3, 6, 64, -4])
def test_warps_refuses_other_values_naming_them(n):
    """Is a value that is not a power of two in [1, 32] refused with that value?"""
    with pytest.raises(ValueError) as info:
        warps(n)
    assert str(info.value) == (
        f"num_warps must be a power of two from 1 to 32, got {n}; try 4 or 8."
    )


def test_warps_refuses_bool():
    """Is True refused as a num_warps, although bool is an int subclass?"""
    with pytest.raises(TypeError) as info:
        warps(True)
    assert str(info.value) == "num_warps must be an int, got bool True."


def test_warps_refuses_float():
    """Is 4.0 refused with a TypeError rather than taken as 4?"""
    with pytest.raises(TypeError) as info:
        warps(4.0)
    assert str(info.value) == "num_warps must be an int, got float 4.0."


# --- device_context -------------------------------------------------------------------


def test_device_context_is_a_no_op_on_cpu():
    """On the CPU, is the launch context a nullcontext (nothing to switch)?"""
    assert isinstance(device_context(torch.zeros(2, 2)), contextlib.nullcontext)


# --- select_mode ----------------------------------------------------------------------


@needs_no_gpu
def test_select_mode_chooses_the_interpreter_without_a_gpu():
    """Without CUDA, is the mode "interpreter"?"""
    assert select_mode(verbose=False) == "interpreter"


@needs_no_gpu
def test_select_mode_prints_the_mode_sentence(capsys):
    """Does select_mode() print the sentence that says where kernels run?"""
    select_mode()
    assert capsys.readouterr().out == (
        "Triton mode: interpreter (TRITON_INTERPRET=1). Kernels run on CPU tensors; "
        "results are real, timings are not.\n"
    )


def test_select_mode_is_silent_when_not_verbose(capsys):
    """Does select_mode(verbose=False) print nothing?"""
    select_mode(verbose=False)
    assert capsys.readouterr().out == ""


def test_select_mode_keeps_an_interpreter_already_chosen(monkeypatch):
    """When TRITON_INTERPRET is already "1", is it kept and the interpreter reported?"""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert select_mode(verbose=False) == "interpreter"
    assert os.environ["TRITON_INTERPRET"] == "1"


@needs_no_gpu
def test_select_mode_turns_the_interpreter_on_without_a_gpu(monkeypatch):
    """With TRITON_INTERPRET unset and no CUDA, does select_mode() set it to "1"?"""
    monkeypatch.delenv("TRITON_INTERPRET")
    select_mode(verbose=False)
    assert os.environ["TRITON_INTERPRET"] == "1"
