"""How one case reports a call that raised: the failure kind and the detail students read."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from triton.compiler.errors import CompilationError

from learning.workshops.checking.cases import PUBLIC_CASES, CaseResult, Failure, run_case
from learning.workshops.contracts import interpreter_active

REPO = Path(__file__).resolve().parents[1]
TRANSPOSE = next(c for c in PUBLIC_CASES if c.name == "transpose")
KERNEL = "def k(X, Y, N):\n    y = tl.load(X)\n    tl.store(Y + N * (1 << 40), y)\n"


def raising(exc: BaseException):
    def fn(x, num_warps=4):
        raise exc

    return fn


def compile_error() -> CompilationError:
    """What Triton raises for a kernel it refuses, its cause chained as Triton chains it."""
    node = ast.parse(KERNEL).body[0].body[1]
    try:
        try:
            raise ValueError("incompatible types int32 and int64\n(more detail)")
        except ValueError as cause:
            raise CompilationError(KERNEL, node) from cause
    except CompilationError as exc:
        return exc


def test_a_compile_error_names_the_kernel_line_and_the_cause():
    """Does a CompilationError (whose first line is only "at 3:4:") show the kernel line and
    Triton's reason instead?"""
    result = run_case(raising(compile_error()), "strided_softmax", TRANSPOSE, "cpu", 0)
    assert result.failure == "exception"
    assert result.detail.endswith(
        "raised CompilationError: kernel line 3, `tl.store(Y + N * (1 << 40), y)`: "
        "incompatible types int32 and int64"
    )


@triton.jit
def stub_kernel(X, Y, N, BLOCK: tl.constexpr):
    raise NotImplementedError("softmax_kernel: write this pass")


def stub_launch(x, num_warps=4):
    """A wrapper whose kernel is still the notebook's stub."""
    y = torch.empty_like(x)
    stub_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=8)
    return y


@pytest.mark.skipif(
    not interpreter_active(), reason="Triton's interpreter wraps the error (TRITON_INTERPRET=1)"
)
def test_a_kernel_stub_reads_as_its_own_not_implemented_error():
    """Does a @triton.jit stub's NotImplementedError, which the interpreter wraps in an
    InterpreterError, read as the NotImplementedError itself, as a wrapper's stub does?"""
    result = run_case(stub_launch, "strided_softmax", TRANSPOSE, "cpu", 0)
    assert result.failure == "exception"
    said = result.detail
    assert "raised NotImplementedError: softmax_kernel: write this pass (" in said, said
    assert "InterpreterError" not in result.detail


@pytest.mark.parametrize(
    "exc",
    [
        MemoryError(),
        RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 GB"),
        RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    ],
)
def test_running_out_of_memory_is_its_own_failure(exc):
    """Is host or device memory exhaustion a `memory` failure, not a plain exception?"""
    result = run_case(raising(exc), "strided_softmax", TRANSPOSE, "cpu", 0)
    assert result.failure == "memory"


def test_other_exceptions_stay_exceptions():
    """Is an ordinary error still an `exception`, with its first line and the line of the
    student's code that raised it?"""
    result = run_case(raising(KeyError("BLOCK")), "strided_softmax", TRANSPOSE, "cpu", 0)
    assert result.failure == "exception"
    assert result.detail.endswith("`raise exc`)")
    assert "raised KeyError: 'BLOCK' (test_cases.py line " in result.detail


def test_the_first_check_that_finds_a_failure_gives_the_verdict():
    """With the shape and the dtype both wrong, is the shape (checked first) the verdict?"""

    def wrong(x, num_warps=4):
        return x.new_zeros((x.shape[1], x.shape[0]), dtype=torch.float64)

    result = run_case(wrong, "strided_softmax", TRANSPOSE, "cpu", 0)
    assert result.failure is Failure.SHAPE
    assert result.verdict.text.endswith("output shape (5, 7), expected (7, 5)")
    assert result.detail == f"transpose: {result.verdict.text}"


def test_a_result_crosses_the_childs_pipe_whole():
    """Does a result sent as a child's event come back equal, its failure an enum again?"""
    result = run_case(raising(KeyError("BLOCK")), "strided_softmax", TRANSPOSE, "cpu", 0)
    back = CaseResult.from_event(json.loads(json.dumps(result.to_event())))
    assert back == result and back.failure is Failure.EXCEPTION


def test_checking_a_kernel_never_imports_dynamo():
    """Does a checked call, under the allocation guard and the read recorder, leave
    torch._dynamo unimported? Importing it costs every grading process seconds (3-4 s on the
    H200 machine), and nothing in a check compiles with it."""
    probe = (
        "import sys, torch\n"
        "from grader.reference import strided_softmax\n"
        "from learning.workshops.checking.cases import PUBLIC_CASES, run_case\n"
        "for case in PUBLIC_CASES[:3]:\n"
        "    assert run_case(strided_softmax, 'strided_softmax', case, 'cpu', 0).passed\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]
