"""The ownership audit: which program loads and stores where, checked under the interpreter."""

from __future__ import annotations

import contextlib
import time

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter
from triton.runtime.errors import InterpreterError

import grader.reference as reference
from learning.workshops.checking import cases
from learning.workshops.checking.audit import Access, Kind, OwnershipError, Trace, audit
from learning.workshops.checking.audit_rules import _rows_past, contiguous_loads, verify
from learning.workshops.checking.followons import IN_PLACE_FAILURES
from learning.workshops.checking.layouts import LAYOUTS
from learning.workshops.checking.records import AUDIT_FAILURES
from learning.workshops.checking.views import geometry, sentinel_view
from learning.workshops.contracts import interpreter_active
from learning.workshops.notebook.testing import run_cases

pytestmark = pytest.mark.skipif(
    not interpreter_active(), reason="the audit hooks Triton's interpreter (TRITON_INTERPRET=1)"
)


@triton.jit
def copy_kernel(X, Y, SR, SC, YR, YC, N, OFF, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    # Program `row` copies row `row` of X (offset OFF, strides SR, SC) to Y (strides YR, YC).
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    values = tl.load(X + OFF + row * SR + cols * SC, mask=mask)
    if MASKED:
        tl.store(Y + row * YR + cols * YC, values, mask=mask)
    else:
        tl.store(Y + row * YR + cols * YC, values)


def copy(x, y=None, *, output_strides=None, offset=0, masked=True):
    """Launch copy_kernel, with the bugs the tests need as options."""
    rows, cols = x.shape
    y = torch.empty((rows, cols), dtype=x.dtype) if y is None else y
    yr, yc = output_strides or (cols, 1)
    block = triton.next_power_of_2(cols)
    sr, sc = x.stride()
    copy_kernel[(rows,)](x, y, sr, sc, yr, yc, cols, offset, BLOCK=block, MASKED=masked)
    return y


def view(layout: str, rows: int = 5, cols: int = 7, dtype=torch.float32):
    """A `layout` view inside a NaN-filled storage, as the check cases build it."""
    return sentinel_view(
        geometry(layout, rows, cols), dtype, "cpu", torch.Generator().manual_seed(0)
    )


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("rows", "cols"), [(5, 7), (3, 16), (4, 1)])
def test_reference_passes_the_audit(layout, rows, cols):
    """Does the reference softmax write each element once, by its row's program, on every
    layout, reading only the view's elements?"""
    _, x = view(layout, rows, cols)
    with audit([x]) as trace:
        out = reference.strided_softmax(x)
    assert verify(trace, x, out) == []
    assert torch.allclose(out.double(), torch.softmax(x.double(), dim=1), atol=1e-6)


def test_unmasked_store_is_refused_before_memory_is_written():
    """Is a store past the output's end refused, leaving the bytes after the output as
    they were (and would they have changed without the audit)?"""
    _, x = view("contiguous", 5, 7)
    arena = torch.full((5 * 7 + 16,), 7.0)
    with audit([x]) as trace, pytest.raises(InterpreterError) as raised:
        copy(x, arena[:35].view(5, 7), masked=False)
    assert isinstance(raised.value.__cause__, OwnershipError)
    assert torch.equal(arena[35:], torch.full((16,), 7.0))  # past the output: untouched
    # the refused row: only column 0, which program 3's own overrun reached, was written
    assert torch.equal(arena[29:35], torch.full((6,), 7.0))
    [refused, spilled, raced, unwritten] = verify(trace, x, arena[:35].view(5, 7))
    assert (refused.kind, refused.program, refused.column) == ("overrun", (4, 0, 0), 7)
    assert "program 4 stored to column 7 of row 4, past the row's 7 columns" in refused.text
    assert "refused, nothing written" in refused.text
    assert spilled.text.startswith(
        "program 0 stored to column 7 of row 0, past the row's 7 columns (address +0x1c, "
        "which is row 1, column 0) (and 3 more)"
    )
    assert raced.text == (
        "row 1, column 0 (address +0x1c) was written by programs 0 and 1 of one launch (and 2 more)"
    )
    assert unwritten.text == (
        "row 4, column 1 (address +0x74) was never written by any program (and 5 more)"
    )

    copy(x, arena[:35].view(5, 7), masked=False)  # without the audit the store lands
    assert not torch.equal(arena[35:], torch.full((16,), 7.0))


def test_store_with_the_input_strides_of_a_transpose_is_left_to_the_values():
    """A transpose's strides store every element once, in the wrong place: no ownership
    fault, so the values (permuted) decide."""
    _, x = view("transpose", 7, 5)  # strides (1, 7)
    with audit([x]) as trace:
        out = copy(x, output_strides=x.stride())
    assert verify(trace, x, out) == []
    assert not torch.equal(out, x)


def test_loads_that_ignore_a_transposes_strides_are_told_from_stores_that_use_them():
    """A copy of a transpose that loads X + row*N + col moves the same values as one that
    stores at Y + row*SR + col*SC: does the audit blame the loads of the first (each element
    loaded where a contiguous tensor has it), and not those of the second, whose programs
    each read a whole row of the view, nor those of a right copy?"""
    _, x = view("transpose", 7, 5)  # strides (1, 7)
    with audit([x]) as trace:
        out = copy(x, output_strides=x.stride())
    assert contiguous_loads(trace, x, out) is None
    with audit([x]) as trace:
        out = copy(x)
    assert contiguous_loads(trace, x, out) is None
    sc = x.stride(1)
    with audit([x]) as trace:
        out = torch.empty(x.shape)
        copy_kernel[(7,)](x, out, 5, 1, 5, 1, 5, 0, BLOCK=8, MASKED=True)  # X + row*N + col
    finding = contiguous_loads(trace, x, out)
    assert finding is not None and not finding.fault
    assert finding.text.startswith("program 0 stored row 0, column 1 after loading storage index")
    assert f"not {sc}, where the view has it" in finding.text


def test_row_broadcast_strides_write_one_row_many_times():
    """With the input's row stride of 0, is row 0 reported as written by every program and
    the other rows as never written?"""
    _, x = view("row-broadcast", 4, 8)
    with audit([x]) as trace:
        out = copy(x, output_strides=x.stride())
    kinds = {f.kind: f for f in verify(trace, x, out)}
    assert set(kinds) == {"duplicate", "unwritten"}
    assert "written by programs 0, 1, 2 and 3 of one launch" in kinds["duplicate"].text
    assert kinds["unwritten"].text.startswith("row 1, column 0 (address +0x20) was never written")


@triton.jit
def tile_copy_kernel(
    X,
    Y,
    SR,
    SC,
    M,
    N,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    AXIS: tl.constexpr,
    MASK_COLS: tl.constexpr,
    PERSISTENT: tl.constexpr,
    MASK_ROWS: tl.constexpr = True,
):
    # BLOCK_M rows per program, rows counted on grid axis AXIS, optionally grid-strided.
    start = tl.program_id(AXIS)
    step = tl.num_programs(AXIS) if PERSISTENT else 1
    end = tl.cdiv(M, BLOCK_M) if PERSISTENT else start + 1
    for block in tl.range(start, end, step):
        rows = block.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
        cols = tl.arange(0, BLOCK_N)[None, :]
        in_rows = rows < M if MASK_ROWS else rows >= 0
        mask = in_rows & (cols < N) if MASK_COLS else in_rows
        values = tl.load(X + rows * SR + cols * SC, mask=in_rows & (cols < N))
        tl.store(Y + rows * N + cols, values, mask=mask)


def tile_copy(x, grid, block_m=2, axis=0, mask_cols=True, persistent=False, mask_rows=True):
    """Launch tile_copy_kernel on any grid."""
    rows, cols = x.shape
    y = torch.empty((rows, cols), dtype=x.dtype)
    block_n = triton.next_power_of_2(cols)
    sr, sc = x.stride()
    tile_copy_kernel[grid](
        x,
        y,
        sr,
        sc,
        rows,
        cols,
        block_m,
        block_n,
        AXIS=axis,
        MASK_COLS=mask_cols,
        PERSISTENT=persistent,
        MASK_ROWS=mask_rows,
    )
    return y


@pytest.mark.parametrize(
    ("grid", "axis", "persistent"),
    [((3,), 0, False), ((1, 3), 1, False), ((1, 1, 3), 2, False), ((2,), 0, True)],
    ids=["rows-on-axis-0", "rows-on-axis-1", "rows-on-axis-2", "persistent"],
)
def test_any_decomposition_that_writes_each_element_once_passes(grid, axis, persistent):
    """Two rows per program, on any grid axis, or two programs striding over the row
    blocks: each element written once by one program is all ownership asks."""
    _, x = view("transposed-slice", 5, 6)
    with audit([x]) as trace:
        out = tile_copy(x, grid, axis=axis, persistent=persistent)
    assert verify(trace, x, out) == []
    assert torch.equal(out, x)


def test_a_second_launch_may_rewrite_what_the_first_wrote():
    """Launches run one after another: writing an element in two launches is no race."""
    _, x = view("slice", 4, 7)
    with audit([x]) as trace:
        out = copy(x)
        copy(x, out)
    assert verify(trace, x, out) == []


def test_a_race_names_the_programs_by_their_full_grid_id():
    """Two programs of a 2-D grid that write the same rows are named as (x, y) ids."""
    _, x = view("contiguous", 4, 8)
    with audit([x]) as trace:
        out = tile_copy(x, (2, 2), block_m=2, axis=0)  # axis 1 repeats every row block
    [race] = verify(trace, x, out)
    assert race.kind == "duplicate"
    assert race.text.startswith(
        "row 0, column 0 (address +0x0) was written by programs (0, 0) and (0, 1) of one launch"
    )


def test_a_tile_without_its_column_mask_is_an_overrun():
    """Rows of a 2-D tile that run past column N-1 are told apart from other races."""
    _, x = view("contiguous", 4, 5)
    with audit([x]) as trace, pytest.raises(InterpreterError):
        tile_copy(x, (2,), block_m=2, mask_cols=False)
    [refused, *_] = verify(trace, x, torch.empty(4, 5))
    assert refused.kind == "overrun"
    assert refused.text.startswith("program 1 stored to column 5 of row 3, past the row's 5")


@pytest.mark.parametrize("cols", [5, 1])
def test_a_tile_without_its_row_mask_stores_rows_past_the_last(cols):
    """A tile of two rows on five rows masked by columns only: its last program's second
    row is row 5, past the output. Is that told from a row run on past its end, also
    where one column makes both read alike (a line of one lane)?"""
    _, x = view("contiguous", 5, cols)
    with audit([x]) as trace, pytest.raises(InterpreterError):
        tile_copy(x, (3,), block_m=2, mask_rows=False)
    [refused, *_] = verify(trace, x, torch.empty(5, cols))
    assert refused.kind == "row-overrun"
    assert refused.text.startswith(
        "program 2 stored to row 5, column 0, past the output's last row (row 4): element "
        f"{5 * cols} of Y"
    )
    assert refused.count == cols


def test_a_load_of_a_row_past_the_last_is_a_row_overrun():
    """A refused load whose lanes outside every tensor are a whole row past the view's
    last (offset + r*SR + c*SC, r >= M): reported as a row overrun, by the view's strides."""
    x = torch.zeros(5, 7)
    trace = Trace([x])
    trace.launches, trace.ranks = [[]], [1]
    r, c = np.meshgrid(np.arange(4, 6), np.arange(8), indexing="ij")
    lanes = np.flatnonzero(c < 7)
    addresses = x.data_ptr() + 4 * (r * 7 + c).ravel()[lanes]
    load = Access(0, (2, 0, 0), False, lanes, addresses.astype(np.int64), 4, (2, 8))
    finding = _rows_past(trace, load, x)
    assert finding is not None and finding.kind == "row-overrun"
    assert finding.text.startswith(
        "program 2 loaded row 5, column 0, past the view's last row (row 4)"
    )
    assert finding.count == 7
    across = Access(0, (2, 0, 0), False, lanes, addresses.astype(np.int64) + 4 * 3, 4, (2, 8))
    assert _rows_past(trace, across, x) is None  # row 4 run on past its end: not whole rows


def test_load_outside_the_footprint_is_reported():
    """Does adding the storage offset twice show as a load outside the view's footprint?"""
    _, x = view("slice", 5, 7)  # strides (15, 2), storage offset 16
    with audit([x]) as trace:
        out = copy(x, offset=x.storage_offset())
    [load] = verify(trace, x, out)
    assert load.kind == "footprint"
    assert load.text.startswith("program 0 loaded storage index 32, outside the view's footprint")


def test_load_outside_every_tensor_is_refused():
    """Is a load far outside every tensor the kernel was given refused, not performed?"""
    _, x = view("contiguous", 2, 4)
    with audit([x]) as trace, pytest.raises(InterpreterError):
        copy(x, offset=1 << 30)
    assert trace.refusal.kind == "stray-load"
    assert "outside every tensor the kernel was given; refused" in trace.refusal.text


def test_store_into_the_input_is_refused():
    """Is a kernel that writes its result over its input stopped with the input intact?"""
    storage, x = view("contiguous", 3, 4)
    before = storage.clone()
    with audit([x]) as trace, pytest.raises(InterpreterError):
        copy(x, x)
    assert torch.equal(storage.isnan(), before.isnan())
    assert torch.equal(storage.nan_to_num(), before.nan_to_num())
    [finding] = verify(trace, x)
    assert finding.kind == "input-store"
    assert finding.text.startswith("program 0 stored to storage index 0 of the input")


def test_hooks_are_restored_after_an_exception():
    """After the block raises, are the interpreter's own load, store and launch back?"""
    builder = interpreter.interpreter_builder
    run = interpreter.InterpretedFunction.run
    _, x = view("contiguous", 2, 4)
    with pytest.raises(RuntimeError, match="the student's code failed"), audit([x]):
        with audit([x]):  # nested audits restore in order too
            copy(x)
        raise RuntimeError("the student's code failed")
    assert "create_masked_load" not in vars(builder)
    assert "create_masked_store" not in vars(builder)
    assert interpreter.InterpretedFunction.run is run
    with audit([x]) as trace:
        copy(x)
    assert len(trace.accesses) == 4  # one load and one store per program, no more


def _suite_seconds(monkeypatch, audited: bool) -> float:
    if not audited:
        monkeypatch.setattr(cases, "_audit", lambda x: contextlib.nullcontext())
    start = time.perf_counter()
    chosen = cases.suite("strided_softmax", device="cpu")
    results = run_cases(reference.strided_softmax, "strided_softmax", chosen, seed=3)
    seconds = time.perf_counter() - start
    monkeypatch.undo()
    assert all(r.passed for r in results), [r.detail for r in results if not r.passed]
    return seconds


def test_audit_adds_little_time(monkeypatch):
    """Does the audit keep the public suite's time within a small factor of running it
    without the audit?"""
    _suite_seconds(monkeypatch, audited=True)  # warm up: the interpreter rewrites kernels once
    plain = min(_suite_seconds(monkeypatch, audited=False) for _ in range(2))
    audited = min(_suite_seconds(monkeypatch, audited=True) for _ in range(2))
    assert audited < 1.5 * plain + 0.5, f"audited {audited:.2f} s, plain {plain:.2f} s"


def test_every_finding_kind_is_a_failure_somewhere():
    """Does every kind of audit finding lead to a failure, the out-of-place checks' or the
    in-place exercise's, and does each map name only kinds the audit has (or the allocation
    guard's `ownership`)?"""
    assert {kind for kind in Kind if kind not in AUDIT_FAILURES} <= set(IN_PLACE_FAILURES)
    assert set(AUDIT_FAILURES) - set(Kind) == {"ownership"}
    assert set(IN_PLACE_FAILURES) <= set(Kind)
