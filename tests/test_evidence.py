"""Tests for the generated-code evidence: ahead-of-time PTX for sm_90, on the CPU."""

from __future__ import annotations

import os

import pytest
import torch
import triton
import triton.language as tl

from learning.workshops.contracts import select_mode

select_mode(verbose=False)

from grader.reference import softmax_kernel, strided_softmax  # noqa: E402
from learning.workshops.notebook.evidence import (  # noqa: E402
    MEANING,
    EvidenceError,
    LoadSummary,
    compare_specializations,
    compile_ptx,
    describe,
    load_summary,
)

# BLOCK = 1024 over 4 warps of 32 threads: each thread holds 1024 / 128 = 8 elements.
ELEMENTS_PER_THREAD = 8


@pytest.fixture(scope="module")
def fp32():
    return compare_specializations(softmax_kernel, block=1024, dtype="fp32", num_warps=4)


@pytest.fixture(scope="module")
def fp16():
    return compare_specializations(softmax_kernel, block=1024, dtype="fp16", num_warps=4)


# --- compiling the reference kernel -------------------------------------------------------


def test_compile_ptx_targets_sm90_without_a_gpu():
    """Does the reference kernel compile to PTX for sm_90 on a machine with no GPU?"""
    ptx = compile_ptx(softmax_kernel, block=1024, col_stride_one=False)
    assert ".target sm_90" in ptx
    assert ".entry softmax_kernel(" in ptx


def test_unit_stride_fp32_gets_128_bit_loads(fp32):
    """With SC == 1, are fp32 columns loaded four at a time (ld.global.v4.b32)?"""
    # Observed with Triton 3.6 and 3.9: the 8 elements of a thread come in 2 x 128-bit loads,
    # because SC is the constant 1 (adjacent columns) and X, SR are 16-byte divisible.
    assert fp32["unit_stride"].loads_by_width == {128: 2}
    assert fp32["unit_stride"].load_bits == ELEMENTS_PER_THREAD * 32


def test_strided_fp32_gets_only_32_bit_loads(fp32):
    """With SC at run time, is every fp32 column a separate 32-bit load?"""
    assert fp32["strided"].loads_by_width == {32: ELEMENTS_PER_THREAD}


def test_output_is_stored_wide_in_both(fp32):
    """Is Y, always contiguous, stored with 128-bit stores in both specializations?"""
    assert fp32["unit_stride"].stores_by_width == {128: 2}
    assert fp32["strided"].stores_by_width == {128: 2}


def test_fp16_loads(fp16):
    """For fp16, is it one 128-bit load (8 halves) against eight 16-bit loads?"""
    assert fp16["unit_stride"].loads_by_width == {128: 1}
    assert fp16["strided"].loads_by_width == {16: ELEMENTS_PER_THREAD}


def test_jit_function_is_accepted():
    """Is a real JITFunction compiled the same as the interpreter's object?"""
    jit = triton.runtime.jit.JITFunction(softmax_kernel.fn)
    ptx = compile_ptx(jit, block=1024, col_stride_one=True)
    assert load_summary(ptx).loads_by_width == {128: 2}


def test_interpreter_mode_is_untouched():
    """After compiling, is TRITON_INTERPRET unchanged and does the interpreter still run?"""
    before = os.environ.get("TRITON_INTERPRET"), triton.knobs.runtime.interpret
    compile_ptx(softmax_kernel, block=16, col_stride_one=True)
    assert (os.environ.get("TRITON_INTERPRET"), triton.knobs.runtime.interpret) == before
    if not torch.cuda.is_available():
        x = torch.randn(3, 10)
        torch.testing.assert_close(strided_softmax(x), torch.softmax(x, dim=1))


@triton.jit
def load_at(X, SC, cols, N):
    return tl.load(X + cols * SC, mask=cols < N, other=-float("inf"))


@triton.jit
def row_max(X, SC, cols, N):
    return tl.max(load_at(X, SC, cols, N), axis=0)


@triton.jit
def row_exp(X, SC, cols, N, top):
    return tl.exp(load_at(X, SC, cols, N) - top)


@triton.jit
def shared_helper_kernel(X, Y, SR, SC, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    numerator = row_exp(X + row * SR, SC, cols, N, row_max(X + row * SR, SC, cols, N))
    tl.store(Y + row * N + cols, numerator / tl.sum(numerator, axis=0), mask=cols < N)


def test_a_helper_two_helpers_call_is_shipped_to_both():
    """Does a kernel whose two helpers both call a third compile (the third was once shipped
    only to the first helper that named it, and the second failed with a NameError)?"""
    summary = load_summary(compile_ptx(shared_helper_kernel, block=1024, col_stride_one=True))
    assert summary.loads_by_width


# --- errors --------------------------------------------------------------------------------


@triton.jit
def three_argument_kernel(X, Y, N):
    pass


@triton.jit
def uncompilable_kernel(X, Y, SR, SC, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, N)
    tl.store(Y + cols, tl.load(X + cols * SC))


@triton.jit
def stub_kernel(X, Y, SR, SC, N, BLOCK: tl.constexpr):
    # YOUR CODE HERE
    raise NotImplementedError("not written yet: your code goes here")


def test_a_stub_is_not_written_yet():
    """Is the release's untouched kernel (its stub raises) said to be not written yet,
    rather than a compiler error about a Raise node?"""
    with pytest.raises(EvidenceError) as info:
        compile_ptx(stub_kernel, block=1024, col_stride_one=True)
    assert str(info.value) == (
        "stub_kernel is not written yet: its body still raises NotImplementedError. "
        "Finish it and run its tests first, then run this cell again."
    )


def test_wrong_signature_is_refused():
    """Does a kernel without the course's six arguments raise EvidenceError on one line?"""
    with pytest.raises(EvidenceError) as info:
        compile_ptx(three_argument_kernel, block=1024, col_stride_one=True)
    message = str(info.value)
    assert message == (
        "three_argument_kernel(X, Y, N) does not take the course arguments "
        "(X, Y, SR, SC, N, BLOCK: tl.constexpr); fix its def line and run the cell again."
    )


def test_compile_error_is_one_line():
    """Does a kernel Triton cannot compile raise EvidenceError with its cause on one line?"""
    with pytest.raises(EvidenceError) as info:
        compile_ptx(uncompilable_kernel, block=1024, col_stride_one=False)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("Triton could not compile uncompilable_kernel for sm_90: ")
    assert "constexpr" in message


def test_non_kernel_is_refused():
    """Is an object that is not a Triton kernel refused with the next step?"""
    with pytest.raises(EvidenceError, match="pass the @triton.jit function itself"):
        compile_ptx(42, block=1024, col_stride_one=True)


def test_block_must_be_a_power_of_two():
    """Is a block that tl.arange cannot take refused before compiling?"""
    with pytest.raises(ValueError, match="next_power_of_2"):
        compile_ptx(softmax_kernel, block=1000, col_stride_one=True)


# --- reading PTX ---------------------------------------------------------------------------


def test_predicated_vector_load():
    """Is a predicated ld.global.v4.b32 one 128-bit load?"""
    ptx = "@%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];"
    assert load_summary(ptx).loads_by_width == {128: 1}


def test_widths_of_each_form():
    """Are scalar, v2, b16, b64, f32, .nc and negated-predicate loads sized right?"""
    ptx = "\n".join(
        [
            "\tld.global.b32 %r1, [%rd1];",
            "\tld.global.v2.b32 {%r2, %r3}, [%rd2];",
            "\t@!%p2 ld.global.b16 { %rs1 }, [ %rd3 + 0 ];",
            "\tld.global.nc.v2.f32 {%f1, %f2}, [%rd4];",
            "\tld.global.L1::evict_last.b64 %rd5, [%rd6];",
            "\tld.global.v4.b16 {%rs2, %rs3, %rs4, %rs5}, [%rd7];",
        ]
    )
    summary = load_summary(ptx)
    assert summary.loads_by_width == {64: 4, 32: 1, 16: 1}
    assert summary.widest_load_bits == 64
    assert summary.load_count == 6
    assert summary.stores_by_width == {}


def test_stores_params_and_comments():
    """Are st.global counted as stores, and ld.param, ld.shared and comments ignored?"""
    ptx = "\n".join(
        [
            "\tld.param.u64 %rd1, [softmax_kernel_param_0];",
            "\tld.shared.v4.b32 {%r1, %r2, %r3, %r4}, [%r5];",
            "\t// ld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd1];",
            "\t@%p1 st.global.v4.b32 [ %rd3 + 0 ], { %r10, %r11, %r12, %r13 };",
            "\tst.global.b16 [%rd4], %rs1;",
        ]
    )
    summary = load_summary(ptx)
    assert summary.loads_by_width == {}
    assert summary.widest_load_bits == 0
    assert summary.stores_by_width == {128: 1, 16: 1}


# --- what the student reads ----------------------------------------------------------------


def test_describe_text():
    """Does describe() give one line per specialization, then what it means?"""
    summaries = {
        "unit_stride": LoadSummary({128: 2}, {128: 2}, "fp32"),
        "strided": LoadSummary({32: 8}, {128: 2}, "fp32"),
    }
    assert describe(summaries).splitlines() == [
        "SC == 1 (unit column stride): 2 loads of 128 bits (4 fp32 each); "
        "2 stores of 128 bits (4 fp32 each).",
        "SC at run time (strided): 8 loads of 32 bits (1 fp32 each); "
        "2 stores of 128 bits (4 fp32 each).",
        MEANING,
    ]
