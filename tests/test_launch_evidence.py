"""Tests for section 7's evidence cell: the loads of the kernels a softmax really launches.

The cell must work for every kernel the checks accept (any arguments, any grid) and, being
ungraded, never stop Run All. Compiling for sm_90 needs no GPU, so all but the last test run
on the CPU, the launches recorded under Triton's interpreter.
"""

from __future__ import annotations

import contextlib
import importlib
import io

import nbformat
import pytest
import torch
import triton
import triton.language as tl

from learning.workshops.contracts import select_mode

select_mode(verbose=False)

from grader import course  # noqa: E402
from learning.workshops.contracts import default_device  # noqa: E402
from learning.workshops.notebook.launch_evidence import (  # noqa: E402
    VIEWS,
    launched_loads,
    loads_report,
)

SHAPES = sorted(
    p.stem for p in (course.REPO / "grader" / "shapes").glob("*.py") if p.stem[0] != "_"
)
"""Every correct decomposition in grader/shapes/."""
DEVICE = default_device()
"""The CPU under the interpreter; a GPU where there is one."""


def softmax_of(module: str):
    return importlib.import_module(module).strided_softmax


def one_sentence(text: str) -> bool:
    return "\n" not in text and text.endswith(".") and "Traceback" not in text


@pytest.mark.parametrize("shape", SHAPES)
def test_every_decomposition_gets_its_loads(shape):
    """Does each correct decomposition's strided_softmax, whatever its kernel's arguments and
    grid, get a load count for each view instead of an error?"""
    loads = launched_loads(softmax_of(f"grader.shapes.{shape}"), DEVICE)
    assert list(loads) == list(VIEWS)
    for kernels in loads.values():
        assert kernels, "no kernel recorded"
        for _, summary in kernels:
            assert summary.load_count > 0 and summary.stores_by_width


@pytest.mark.parametrize("module", ["grader.reference", "grader.shapes.persistent"])
def test_contiguous_rows_load_wide_and_a_transpose_narrow(module):
    """For one row per program, and for a persistent loop over rows (once refused with 'fix
    its def line'), are contiguous rows read 128 bits at a time and a transpose 32?"""
    loads = launched_loads(softmax_of(module), DEVICE)
    (_, contiguous), (_, transposed) = loads["contiguous"][0], loads["transpose"][0]
    # BLOCK 1024 over 4 warps: 8 fp32 a thread, in 2 vector loads or 8 scalar ones.
    assert contiguous.loads_by_width == {128: 2}
    assert transposed.loads_by_width == {32: 8}


def test_the_notebook_cell_prints_a_persistent_kernels_loads():
    """Run as the notebook runs it, does section 7's evidence cell print the loads of a
    persistent kernel's launches, one line per view, and raise nothing?"""
    notebook = nbformat.read(course.REPO / "source" / course.ASSIGNMENT / course.NOTEBOOK, 4)
    (cell,) = [c for c in notebook.cells if "loads_report(" in c.source]
    namespace = {"strided_softmax": softmax_of("grader.shapes.persistent")}
    namespace["DEVICE"] = default_device()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(cell.source, namespace)
    lines = printed.getvalue().splitlines()
    assert [line.split(",")[0] for line in lines[:2]] == list(VIEWS.values())
    assert "128 bits" in lines[0] and "32 bits" in lines[1]


def stub(x, num_warps=4):
    raise NotImplementedError("not written yet: your code goes here")


def refuses(x, num_warps=4):
    raise ValueError("expected a 2-D tensor\nwith more lines after")


def torch_only(x, num_warps=4):
    return torch.softmax(x, dim=1)


def twice(values):
    return values + values


@triton.jit
def plain_helper_kernel(X, Y, SR, SC, N, BLOCK: tl.constexpr):
    # twice is not @triton.jit: the interpreter runs it as Python, the compiler cannot.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    tl.store(Y + row * N + cols, twice(tl.load(X + row * SR + cols * SC)))


def uncompilable(x, num_warps=4):
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    M, N = x.shape
    plain_helper_kernel[(M,)](x, y, x.stride(0), x.stride(1), N, BLOCK=N)
    return y


@pytest.mark.parametrize(
    ("softmax", "said"),
    [
        (stub, "stub is not written yet: its loads are read once it runs."),
        (refuses, "refuses raised ValueError: expected a 2-D tensor on a 64x1024 fp32 view;"),
        (torch_only, "torch_only launched no Triton kernel on contiguous 64x1024 rows"),
        pytest.param(
            uncompilable,
            "Triton could not compile plain_helper_kernel for sm_90",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter runs it"),
        ),
    ],
    ids=["stub", "raises", "no-launch", "compile-error"],
)
def test_what_stops_the_evidence_is_one_sentence(softmax, said):
    """Is a stub, an error, a softmax that launches nothing, or a kernel the compiler refuses
    told in one sentence that says what to do, returned rather than raised?"""
    text = loads_report(softmax, DEVICE)
    assert said in text
    assert one_sentence(text), text


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_launches_on_a_gpu_are_recorded_too():
    """On a GPU, where launches go through JITFunction.run (and a handle's warmup), does every
    decomposition get its loads?"""
    for shape in SHAPES:
        loads = launched_loads(softmax_of(f"grader.shapes.{shape}"), "cuda")
        assert all(kernels for kernels in loads.values()), shape


def test_shapes_are_found():
    """Does the parametrization see the decompositions (a renamed folder would test none)?"""
    assert {"persistent", "multi_row", "compiled_handle"} <= set(SHAPES)
