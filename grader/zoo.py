"""The zoo: the bugs students make, each as a small edit of a correct solution.

Each member names the hint `check --hint` must give for it and the nbgrader cells it must
lose. Edits apply inside one function, so the same table builds a buggy `.py` for the
check command and a buggy notebook submission for the autograder.

Most members edit the reference (`grader/reference.py`, one program per row). Students also
copy public kernels decomposed in other ways, so members may edit one of the correct
shapes in `grader/shapes/` instead (`Bug.base`, listed in `DECOMPOSITIONS`): the same bug must get
the same hint whichever way the rows are split among programs.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

REFERENCE = Path(__file__).with_name("reference.py")
DECOMPOSITIONS_DIR = Path(__file__).with_name("shapes")

DECOMPOSITIONS = {
    "grid_1_m": "grid (1, M), the row on axis 1, as kernels launched over (heads, rows) read it",
    "grid_3d": "a 3-D grid, rows spread over axes 1 and 2, idle programs past the last row",
    "persistent": "fewer programs than rows in a grid-stride loop, as Triton's tutorial runs",
    "multi_row": "several rows per program as one 2-D tile, the last tile masked by rows",
    "column_tiled": "one row per program in column tiles with an online softmax (Liger)",
    "compiled_handle": "warmup() compiles a handle that the launch calls (Triton's tutorial)",
    "autotuned": "@triton.autotune picks rows per program and num_warps for each width",
    "heuristics": "@triton.heuristics computes BLOCK from N, so the launch leaves it out",
}
"""The correct decompositions in `grader/shapes/`, in order, each with why it is there."""


@dataclass(frozen=True)
class Edit:
    """Replace `old` by `new` inside the source of function `function` (exactly once)."""

    function: str
    old: str
    new: str


@dataclass(frozen=True)
class Bug:
    """A buggy implementation: its edits, the hint `check <op> --hint` must give (None when
    the bug is outside what the check runs), and the nbgrader cells it must lose."""

    name: str
    hint: str | None
    why: str
    edits: tuple[Edit, ...]
    loses: frozenset[str]
    op: str = "strided_softmax"
    base: str = "reference"  # the source edited: the reference, or a name in DECOMPOSITIONS
    audited: bool = False
    """Whether its hint takes the ownership audit, which only the interpreter runs: without
    it (on a GPU) the values alone give another hint, so `grader.agreement` leaves it out."""


_LOAD = 'X + row * SR + cols * SC, mask=mask, other=-float("inf")'
_ALLOC = "y = torch.empty((M, N), dtype=x.dtype, device=x.device)"
_KERNEL_CELLS = frozenset({"test_pass2", "hidden_pass2", "test_pass3", "hidden_pass3"})
_WRAPPER_CELLS = frozenset({"test_pass3", "hidden_pass3"})

COPY_FIRST = (
    Edit(
        "strided_softmax",
        "    M, N = matrix(x)\n",
        "    x = x.contiguous()\n    M, N = matrix(x)\n",
    ),
)
"""The copy-first shortcut: right values, and a second pass over memory before the kernel."""

_REFERENCE_BUGS: tuple[Bug, ...] = (
    Bug(
        "address-without-offset",
        None,
        "leaves out the storage offset, so shifted views get wrong addresses",
        (Edit("address_table", "start + row * row_stride", "row * row_stride"),),
        frozenset({"hidden_addresses"}),
    ),
    Bug(
        "copy-ignores-column-stride",
        "column-stride",
        "the pass-1 copy loads X + row*SR + col",
        (Edit("copy_rows_kernel", "X + row * SR + cols * SC", "X + row * SR + cols"),),
        frozenset({"test_pass1", "hidden_pass1"}),
        op="copy_rows",
    ),
    Bug(
        "copy-ignores-both-strides",
        "strides",
        "the pass-1 copy loads X + row*N + col: a transpose's values all land, in other "
        "places, which the stores would be blamed for but for the audit, which sees each "
        "element loaded where a contiguous tensor has it (a GPU's values say output-layout)",
        (Edit("copy_rows_kernel", "X + row * SR + cols * SC", "X + row * N + cols"),),
        frozenset({"test_pass1", "hidden_pass1"}),
        op="copy_rows",
        audited=True,
    ),
    Bug(
        "ignores-column-stride",
        "column-stride",
        "loads X + row*SR + col, as if columns were adjacent",
        (Edit("softmax_kernel", _LOAD, _LOAD.replace("cols * SC", "cols")),),
        _KERNEL_CELLS,
    ),
    Bug(
        "ignores-both-strides",
        "strides",
        "loads X + row*N + col, as public kernels written for contiguous rows do: every view "
        "that is not laid out as a new contiguous tensor is misread, row broadcasts too",
        (Edit("softmax_kernel", _LOAD, _LOAD.replace("row * SR + cols * SC", "row * N + cols")),),
        _KERNEL_CELLS,
    ),
    Bug(
        "row-stride-times-width",
        "row-stride",
        "starts row r at X + r*SR*N, the row stride multiplied by the width: only rows of "
        "stride 0 and views of one column are read right, and contiguous rows run past X",
        (Edit("softmax_kernel", _LOAD, _LOAD.replace("row * SR", "row * SR * N")),),
        _KERNEL_CELLS,
    ),
    Bug(
        "misspelled-tl-function",
        "exception",
        "calls tl.maxx, which Triton does not have: every launch raises the same error",
        (Edit("softmax_kernel", "x - tl.max(x, axis=0)", "x - tl.maxx(x, axis=0)"),),
        _KERNEL_CELLS,
    ),
    Bug(
        "adds-storage-offset",
        "double-offset",
        "adds x.storage_offset() to a pointer that already includes it",
        (
            Edit(
                "softmax_kernel", "def softmax_kernel(X, Y, SR", "def softmax_kernel(X, Y, OFF, SR"
            ),
            Edit("softmax_kernel", _LOAD, _LOAD.replace("X + row", "X + OFF + row")),
            Edit("strided_softmax", "x, y, x.stride(0)", "x, y, x.storage_offset(), x.stride(0)"),
        ),
        _KERNEL_CELLS,
    ),
    Bug(
        "output-like-input",
        "output-layout",
        "allocates the output with torch.empty_like(x), which copies a transpose's strides",
        (Edit("strided_softmax", _ALLOC, "y = torch.empty_like(x)"),),
        _WRAPPER_CELLS,
    ),
    Bug(
        "store-without-mask",
        "store-mask",
        "stores the whole block without a mask, so lanes past column N-1 write the next row "
        "and, in the last row, past the output (the audit refuses that store)",
        (
            Edit(
                "softmax_kernel",
                "y.to(Y.dtype.element_ty), mask=mask)",
                "y.to(Y.dtype.element_ty))",
            ),
        ),
        _KERNEL_CELLS,
    ),
    Bug(
        "output-with-input-strides",
        "output-layout",
        "stores at Y + row*SR + col*SC, the input's strides, so rows land in other programs' "
        "rows or past the output",
        (
            Edit(
                "softmax_kernel", "tl.store(Y + row * N + cols", "tl.store(Y + row * SR + cols * SC"
            ),
        ),
        _KERNEL_CELLS,
    ),
    Bug(
        "pads-with-zero",
        "padding",
        "pads the tail with 0 instead of -inf, so masked lanes count in the sum",
        (Edit("softmax_kernel", _LOAD, _LOAD.replace('-float("inf")', "0.0")),),
        _KERNEL_CELLS,
    ),
    Bug(
        "no-max-subtraction",
        "stability",
        "calls exp on the raw values, which overflows for large rows",
        (Edit("softmax_kernel", "    x = x - tl.max(x, axis=0)\n", ""),),
        frozenset({"test_pass2", "hidden_pass2", "hidden_pass3"}),
    ),
    Bug(
        "block-equals-width",
        "block-size",
        "uses BLOCK = N, which Triton refuses unless N is a power of two",
        (Edit("strided_softmax", "block = triton.next_power_of_2(N)", "block = N"),),
        _WRAPPER_CELLS,
    ),
    Bug(
        "fixed-block",
        "block-size",
        "uses a fixed BLOCK of 128, too small for wide rows",
        (Edit("strided_softmax", "block = triton.next_power_of_2(N)", "block = 128"),),
        frozenset({"hidden_pass3"}),
    ),
    Bug(
        "float32-output",
        "dtype",
        "always allocates a float32 output",
        (Edit("strided_softmax", _ALLOC, _ALLOC.replace("dtype=x.dtype", "dtype=torch.float32")),),
        _WRAPPER_CELLS,
    ),
    Bug(
        "no-validation",
        "validation",
        "skips matrix() and warps(), so bad input is not refused clearly",
        (Edit("strided_softmax", "M, N = matrix(x)\n    warps(num_warps)", "M, N = x.shape"),),
        _WRAPPER_CELLS,
    ),
    Bug(
        "two-programs-per-row",
        "overlap",
        "launches a grid of (M, 2), as a kernel tiled over columns would, but each program "
        "writes its whole row: programs (r, 0) and (r, 1) both write row r, with right values",
        (Edit("strided_softmax", "softmax_kernel[(M,)]", "softmax_kernel[(M, 2)]"),),
        _WRAPPER_CELLS,
    ),
    Bug(
        "launches-for-zero-rows",
        "empty-rows",
        "launches a grid of zero programs instead of returning early",
        (Edit("strided_softmax", "    if M == 0:\n        return y\n", ""),),
        _WRAPPER_CELLS,
    ),
    Bug(
        "torch-softmax",
        "no-kernel",
        "returns torch.softmax instead of launching the kernel",
        (
            Edit(
                "strided_softmax",
                f"    {_ALLOC}\n",
                "    return torch.softmax(x.float(), 1).to(x.dtype)\n",
            ),
        ),
        _WRAPPER_CELLS,
    ),
    Bug(
        "copies-first",
        "copy",
        "calls x.contiguous() before the kernel: right values, a second pass over memory",
        COPY_FIRST,
        _WRAPPER_CELLS,
    ),
    Bug(
        "softmax-beside-kernel",
        "copy",
        "launches the kernel but returns torch.softmax of the input",
        (
            Edit(
                "strided_softmax",
                "num_warps=num_warps)\n    return y",
                "num_warps=num_warps)\n    return torch.softmax(x.float(), 1).to(x.dtype)",
            ),
        ),
        _WRAPPER_CELLS,
    ),
    Bug(
        "normalizes-in-torch",
        "not-from-kernel",
        "the kernel stores exp(x - max) and the wrapper divides by the row sums in torch",
        (
            Edit(
                "softmax_kernel",
                "    y = numerator / tl.sum(numerator, axis=0)\n",
                "    y = numerator\n",
            ),
            Edit(
                "strided_softmax",
                "num_warps=num_warps)\n    return y",
                "num_warps=num_warps)\n    y /= y.float().sum(1, keepdim=True).to(y.dtype)\n"
                "    return y",
            ),
        ),
        _KERNEL_CELLS,
    ),
    Bug(
        "python-helper-in-kernel",
        "held",
        "calls a plain Python helper from the kernel, which only the interpreter runs",
        (
            Edit("softmax_kernel", "    x = x - tl.max(x, axis=0)\n", "    x = x - row_max(x)\n"),
            Edit(
                "strided_softmax",
                "def strided_softmax(x, num_warps=4):",
                "def row_max(v):\n    return tl.max(v, axis=0)\n\n\n"
                "def strided_softmax(x, num_warps=4):",
            ),
        ),
        _KERNEL_CELLS,
    ),
    Bug(
        "caches-by-shape",
        "stale-output",
        "keeps the output of the first call for each shape and returns it again",
        (
            Edit(
                "strided_softmax",
                "def strided_softmax(x, num_warps=4):",
                "def strided_softmax(x, num_warps=4, _cache={}):",
            ),
            Edit(
                "strided_softmax",
                f"    {_ALLOC}\n",
                f"    if (M, N) in _cache:\n        return _cache[(M, N)]\n    {_ALLOC}\n"
                "    _cache[(M, N)] = y\n",
            ),
        ),
        _WRAPPER_CELLS,
    ),
    Bug(
        "writes-in-place",
        "input-written",
        "reuses a contiguous input as the output, overwriting it",
        (Edit("strided_softmax", _ALLOC, f"y = x if x.is_contiguous() else {_ALLOC[4:]}"),),
        _WRAPPER_CELLS,
    ),
    Bug(
        "segfaults",
        "crash",
        "dereferences a null pointer, killing the process",
        (
            Edit(
                "strided_softmax",
                "    with device_context(x):\n",
                "    __import__('ctypes').string_at(0)\n    with device_context(x):\n",
            ),
        ),
        _WRAPPER_CELLS,
    ),
    Bug(
        "never-returns",
        "timeout",
        "loops forever before launching",
        (
            Edit(
                "strided_softmax",
                "    with device_context(x):\n",
                "    while True:\n        pass\n    with device_context(x):\n",
            ),
        ),
        _WRAPPER_CELLS,
    ),
    Bug(
        "not-implemented",
        "unfinished",
        "leaves the wrapper's stub in place",
        (Edit("strided_softmax", "    M, N = matrix(x)\n", "    raise NotImplementedError()\n"),),
        _WRAPPER_CELLS,
    ),
    Bug(
        "segfaults-on-wide-rows",
        "crash",
        "dereferences a null pointer only for rows wider than 200, as the hidden cases have",
        (
            Edit(
                "strided_softmax",
                "    block = triton.next_power_of_2(N)\n",
                "    if N > 200:\n        __import__('ctypes').string_at(0)\n"
                "    block = triton.next_power_of_2(N)\n",
            ),
        ),
        frozenset({"hidden_pass3"}),
    ),
    Bug(
        "hoards-memory-on-wide-rows",
        "memory",
        "allocates without end for rows wider than 200, as the hidden cases have",
        (
            Edit(
                "strided_softmax",
                "    block = triton.next_power_of_2(N)\n",
                "    hoard = []\n"
                "    while N > 200:\n"
                "        hoard.append(torch.empty(2**26, device=x.device))\n"
                "    block = triton.next_power_of_2(N)\n",
            ),
        ),
        frozenset({"hidden_pass3"}),
    ),
)


_STORE = "y.to(Y.dtype.element_ty), mask=mask)"


def _wrapper_bugs(base: str) -> tuple[Bug, ...]:
    """The wrapper's bugs in a shape: every shape's strided_softmax reads the same as the
    reference's up to the launch, so the edits are the reference's."""
    name = base.replace("_", "-")
    return (
        Bug(
            f"{name}-output-like-input",
            "output-layout",
            "allocates the output with torch.empty_like(x), which copies a transpose's strides",
            (Edit("strided_softmax", _ALLOC, "y = torch.empty_like(x)"),),
            _WRAPPER_CELLS,
            base=base,
        ),
        Bug(
            f"{name}-copies-first",
            "copy",
            "calls x.contiguous() before the kernel: right values, a second pass over memory",
            COPY_FIRST,
            _WRAPPER_CELLS,
            base=base,
        ),
        Bug(
            f"{name}-writes-in-place",
            "input-written",
            "reuses a contiguous input as the output, overwriting it",
            (Edit("strided_softmax", _ALLOC, f"y = x if x.is_contiguous() else {_ALLOC[4:]}"),),
            _WRAPPER_CELLS,
            base=base,
        ),
    )


# Each shape passes the storage offset through its launch helper, softmax_into, which both
# launch_softmax and strided_softmax call: the double-offset bug breaks launch_softmax's
# slice case as well (test_pass2), where the reference's loses test_pass2 to a crash.
PERSISTENT_BUGS = (
    Bug(
        "persistent-ignores-column-stride",
        "column-stride",
        "each loop iteration loads X + row*SR + col, as if columns were adjacent",
        (Edit("softmax_kernel", _LOAD, _LOAD.replace("cols * SC", "cols")),),
        _KERNEL_CELLS,
        base="persistent",
    ),
    Bug(
        "persistent-adds-storage-offset",
        "double-offset",
        "adds x.storage_offset() to a pointer that already includes it, on every row it visits",
        (
            Edit(
                "softmax_kernel", "def softmax_kernel(X, Y, M,", "def softmax_kernel(X, Y, OFF, M,"
            ),
            Edit("softmax_kernel", _LOAD, _LOAD.replace("X + row", "X + OFF + row")),
            Edit(
                "softmax_into", "x, y, M, x.stride(0)", "x, y, x.storage_offset(), M, x.stride(0)"
            ),
        ),
        _KERNEL_CELLS,
        base="persistent",
    ),
    Bug(
        "persistent-pads-with-zero",
        "padding",
        "pads each row's tail with 0 instead of -inf, so masked lanes count in the sum",
        (Edit("softmax_kernel", _LOAD, _LOAD.replace('-float("inf")', "0.0")),),
        _KERNEL_CELLS,
        base="persistent",
    ),
    Bug(
        "persistent-no-max-subtraction",
        "stability",
        "calls exp on the raw values of each row it visits, which overflows for large rows",
        (Edit("softmax_kernel", "        x = x - tl.max(x, axis=0)\n", ""),),
        frozenset({"test_pass2", "hidden_pass2", "hidden_pass3"}),
        base="persistent",
    ),
    Bug(
        "persistent-store-without-mask",
        "store-mask",
        "stores each visited row's whole block without a mask, so lanes past column N-1 write "
        "the next row and, in the last row, past the output",
        (Edit("softmax_kernel", _STORE, "y.to(Y.dtype.element_ty))"),),
        _KERNEL_CELLS,
        base="persistent",
    ),
    Bug(
        "persistent-ignores-both-strides",
        "strides",
        "each loop iteration loads X + row*N + col, as kernels written for contiguous rows do",
        (Edit("softmax_kernel", _LOAD, _LOAD.replace("row * SR + cols * SC", "row * N + cols")),),
        _KERNEL_CELLS,
        base="persistent",
    ),
    Bug(
        "persistent-loop-without-step",
        "overlap",
        "loops tl.range(pid, M) without the grid's step, so program p writes rows p to M-1 "
        "and every row after the first is written by several programs (right values)",
        (
            Edit(
                "softmax_kernel",
                "tl.range(tl.program_id(0).to(tl.int64), M, tl.num_programs(0))",
                "tl.range(tl.program_id(0).to(tl.int64), M)",
            ),
        ),
        _KERNEL_CELLS,
        base="persistent",
    ),
    *_wrapper_bugs("persistent"),
)
"""Bugs in the grid-stride loop: program p visits rows p, p + P, ..."""

MULTI_ROW_BUGS = (
    Bug(
        "multi-row-ignores-column-stride",
        "column-stride",
        "addresses the tile as X + row*SR + col, as if columns were adjacent",
        (Edit("softmax_kernel", "cols[None, :] * SC", "cols[None, :]"),),
        _KERNEL_CELLS,
        base="multi_row",
    ),
    Bug(
        "multi-row-adds-storage-offset",
        "double-offset",
        "adds x.storage_offset() to the tile's pointers, which already include it",
        (
            Edit(
                "softmax_kernel", "def softmax_kernel(X, Y, M,", "def softmax_kernel(X, Y, OFF, M,"
            ),
            Edit("softmax_kernel", "x_ptrs = X + rows", "x_ptrs = X + OFF + rows"),
            Edit(
                "softmax_into",
                "        y,\n        M,\n",
                "        y,\n        x.storage_offset(),\n        M,\n",
            ),
        ),
        _KERNEL_CELLS,
        base="multi_row",
    ),
    Bug(
        "multi-row-pads-with-zero",
        "padding",
        "pads the tile's columns past N with 0 instead of -inf, so they count in each row's sum",
        (Edit("softmax_kernel", 'other=-float("inf")', "other=0.0"),),
        _KERNEL_CELLS,
        base="multi_row",
    ),
    Bug(
        "multi-row-no-max-subtraction",
        "stability",
        "calls exp on the raw tile, without subtracting each row's max: large rows overflow",
        (Edit("softmax_kernel", "    x = x - tl.max(x, axis=1)[:, None]\n", ""),),
        frozenset({"test_pass2", "hidden_pass2", "hidden_pass3"}),
        base="multi_row",
    ),
    Bug(
        "multi-row-store-without-column-mask",
        "store-mask",
        "masks the tile's store by rows only, so lanes past column N-1 write the next row and, "
        "in the last row, past the output",
        (Edit("softmax_kernel", _STORE, "y.to(Y.dtype.element_ty), mask=in_rows)"),),
        _KERNEL_CELLS,
        base="multi_row",
    ),
    Bug(
        "multi-row-without-row-mask",
        "row-mask",
        "masks the tile by columns only, as a one-row kernel does: the last tile's rows past "
        "M-1 load past the view and store past the output (the audit refuses the store; a "
        "GPU's guard sees a store past the output, which it calls output-layout)",
        (
            Edit(
                "softmax_kernel",
                "    in_rows = rows[:, None] < M\n    mask = in_rows & (cols[None, :] < N)\n",
                "    mask = cols[None, :] < N\n",
            ),
            Edit(
                "softmax_kernel",
                "    x = tl.where(in_rows, x, 0.0)  # tile rows past M: all -inf would make NaN "
                "(inf - inf)\n",
                "",
            ),
        ),
        _KERNEL_CELLS,
        base="multi_row",
        audited=True,
    ),
    *_wrapper_bugs("multi_row"),
)
"""Bugs in the [BLOCK_M, BLOCK_N] tile: several rows per program."""

_GUARDED_ROW = """    if row < M:
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(X + row * SR + cols * SC, mask=mask, other=-float("inf")).to(tl.float32)
        x = x - tl.max(x, axis=0)
        numerator = tl.exp(x)
        y = numerator / tl.sum(numerator, axis=0)
        tl.store(Y + row * N + cols, y.to(Y.dtype.element_ty), mask=mask)
"""
GRID_3D_BUGS = (
    Bug(
        "grid-3d-without-row-guard",
        "row-mask",
        "drops the `if row < M` guard: the last slab's programs past row M-1 load past the "
        "view and store a row past the output (the audit refuses the store; a GPU's guard "
        "sees a store past the output, which it calls output-layout)",
        (
            Edit(
                "softmax_kernel",
                _GUARDED_ROW,
                "".join(line.removeprefix("    ") + "\n" for line in _GUARDED_ROW.splitlines()[1:]),
            ),
        ),
        _KERNEL_CELLS,
        base="grid_3d",
        audited=True,
    ),
)
"""Bugs in the 3-D grid: programs past the last row must do nothing."""

_TOTAL = "total = total * tl.exp(top - shift) + tl.sum(tl.exp(x - shift), axis=0)"
COLUMN_TILED_BUGS = (
    Bug(
        "column-tiled-ignores-column-stride",
        "column-stride",
        "loads each tile at x_row + col, as if columns were adjacent",
        (Edit("load_tile", "x_row + cols * SC", "x_row + cols"),),
        _KERNEL_CELLS,
        base="column_tiled",
    ),
    Bug(
        "column-tiled-adds-storage-offset",
        "double-offset",
        "adds x.storage_offset() to the row's start, which already includes it",
        (
            Edit(
                "softmax_kernel", "def softmax_kernel(X, Y, SR", "def softmax_kernel(X, Y, OFF, SR"
            ),
            Edit("softmax_kernel", "x_row = X + row * SR", "x_row = X + OFF + row * SR"),
            Edit("softmax_into", "x, y, x.stride(0)", "x, y, x.storage_offset(), x.stride(0)"),
        ),
        _KERNEL_CELLS,
        base="column_tiled",
    ),
    Bug(
        "column-tiled-pads-with-zero",
        "padding",
        "pads the last tile with 0 instead of -inf, so its masked lanes count in the running sum",
        (Edit("load_tile", 'other=-float("inf")', "other=0.0"),),
        _KERNEL_CELLS,
        base="column_tiled",
    ),
    Bug(
        "column-tiled-no-max-in-exponent",
        "stability",
        "keeps the running max but sums and writes exp(x) without it, which overflows for "
        "large rows",
        (
            Edit("softmax_kernel", _TOTAL, "total = total + tl.sum(tl.exp(x), axis=0)"),
            Edit("softmax_kernel", "y = tl.exp(x - top) / total", "y = tl.exp(x) / total"),
        ),
        frozenset({"test_pass2", "hidden_pass2", "hidden_pass3"}),
        base="column_tiled",
    ),
    Bug(
        "column-tiled-store-without-mask",
        "store-mask",
        "stores every tile whole, so the last tile's lanes past column N-1 write the next row "
        "and, in the last row, past the output",
        (
            Edit(
                "softmax_kernel",
                "y.to(Y.dtype.element_ty), mask=cols < N)",
                "y.to(Y.dtype.element_ty))",
            ),
        ),
        _KERNEL_CELLS,
        base="column_tiled",
    ),
    Bug(
        "column-tiled-no-neg-inf-guard",
        "running-max",
        "rescales the running sum by exp(top - new_top) even while both are -inf, so a row "
        "whose first tile is all -inf turns NaN (public online softmaxes guard against it)",
        (
            Edit(
                "softmax_kernel",
                'shift = tl.where(new_top == -float("inf"), 0.0, new_top)',
                "shift = new_top",
            ),
        ),
        frozenset({"hidden_pass2", "hidden_pass3"}),
        base="column_tiled",
    ),
    *_wrapper_bugs("column_tiled"),
)
"""Bugs in the column-tiled online softmax: one row per program, several tiles per row."""

SHAPE_BUGS: tuple[Bug, ...] = PERSISTENT_BUGS + MULTI_ROW_BUGS + GRID_3D_BUGS + COLUMN_TILED_BUGS
"""Bugs written in the shapes of `grader/shapes/` rather than in the reference."""

_IN_PLACE_CELLS = frozenset({"test_inplace", "hidden_inplace"})
_BACKWARD_CELLS = frozenset({"test_backward", "hidden_backward"})
_IN_PLACE_STORE = "tl.store(ptrs, y.to(X.dtype.element_ty), mask=mask)"
FOLLOW_ON_BUGS = (
    Bug(
        "inplace-accepts-aliasing",
        "aliasing",
        "checks x with matrix(x), which lets a broadcast through, so rows sharing addresses "
        "are written several times over",
        (Edit("strided_softmax_", "M, N = writable_matrix(x)", "M, N = matrix(x)"),),
        _IN_PLACE_CELLS,
        op="strided_softmax_",
    ),
    Bug(
        "inplace-stores-as-if-contiguous",
        "write-outside-view",
        "stores the result at X + row*N + col, where a contiguous output would be, instead of "
        "back through the view's strides",
        (Edit("softmax_inplace_kernel", "tl.store(ptrs, y", "tl.store(X + row * N + cols, y"),),
        _IN_PLACE_CELLS,
        op="strided_softmax_",
    ),
    Bug(
        "inplace-column-tiles",
        "read-after-write",
        "splits each row's columns over programs that each read the whole row, so a later "
        "program reads columns an earlier one already overwrote",
        (
            Edit(
                "softmax_inplace_kernel",
                "N, BLOCK: tl.constexpr):",
                "N, BLOCK: tl.constexpr, TILE: tl.constexpr):",
            ),
            Edit(
                "softmax_inplace_kernel",
                _IN_PLACE_STORE,
                _IN_PLACE_STORE.replace(
                    "mask=mask", "mask=mask & (cols // TILE == tl.program_id(1))"
                ),
            ),
            Edit(
                "strided_softmax_",
                "softmax_inplace_kernel[(M,)](x, *x.stride(), N, BLOCK=block,",
                "softmax_inplace_kernel[(M, triton.cdiv(N, 4))](x, *x.stride(), N, BLOCK=block, "
                "TILE=4,",
            ),
        ),
        _IN_PLACE_CELLS,
        op="strided_softmax_",
    ),
    Bug(
        "inplace-not-attempted",
        "not-attempted",
        "leaves the optional in-place exercise as its stub: not attempted, which costs "
        "nothing and earns no extra credit",
        (
            Edit(
                "strided_softmax_",
                "    M, N = writable_matrix(x)\n",
                '    raise NotImplementedError("not written yet: your code goes here")\n'
                "    M, N = writable_matrix(x)\n",
            ),
        ),
        _IN_PLACE_CELLS,
        op="strided_softmax_",
    ),
    Bug(
        "inplace-returns-nothing",
        "not-in-place",
        "softmaxes x in place but forgets to return it, so the caller gets None",
        (Edit("strided_softmax_", "num_warps=num_warps)\n    return x", "num_warps=num_warps)"),),
        _IN_PLACE_CELLS,
        op="strided_softmax_",
    ),
    Bug(
        "backward-reads-dy-with-y-strides",
        "backward-strides",
        "passes y's strides for dy too, so dy is read right only where both views share strides",
        (Edit("strided_softmax_backward", "*dy.stride())", "*y.stride())"),),
        _BACKWARD_CELLS,
        op="strided_softmax_backward",
    ),
    Bug(
        "backward-reads-contiguous-rows",
        "strides",
        "loads y and dy at row*N + col, as public backward kernels written for contiguous "
        "gradients do: every pair with a view that is not contiguous is misread",
        (
            Edit("softmax_backward_kernel", "Y + row * SRY + cols * SCY", "Y + row * N + cols"),
            Edit("softmax_backward_kernel", "DY + row * SRD + cols * SCD", "DY + row * N + cols"),
        ),
        _BACKWARD_CELLS,
        op="strided_softmax_backward",
    ),
    Bug(
        "backward-ignores-column-strides",
        "column-stride",
        "loads y and dy at row*SR + col, each row from its own stride but its columns as if "
        "adjacent, as the tutorial's forward kernel does",
        (
            Edit("softmax_backward_kernel", "row * SRY + cols * SCY", "row * SRY + cols"),
            Edit("softmax_backward_kernel", "row * SRD + cols * SCD", "row * SRD + cols"),
        ),
        _BACKWARD_CELLS,
        op="strided_softmax_backward",
    ),
    Bug(
        "backward-without-row-sum",
        "row-sum",
        "returns y * dy, leaving out the row sum that couples a softmax row's gradients",
        (Edit("softmax_backward_kernel", "dx = y * (dy - tl.sum(dy * y, axis=0))", "dx = y * dy"),),
        _BACKWARD_CELLS,
        op="strided_softmax_backward",
    ),
)
"""Bugs of the two optional exercises (`strided_softmax_`, `strided_softmax_backward`)."""

BUGS: tuple[Bug, ...] = _REFERENCE_BUGS + SHAPE_BUGS + FOLLOW_ON_BUGS
"""Every bug: the reference's, then the shapes'."""


def function_span(source: str, function: str) -> tuple[int, int]:
    """Character offsets of `function`'s definition (decorators included) in `source`."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return starts[first - 1], starts[node.end_lineno]
    raise KeyError(f"no function {function!r} in the source")


def apply(source: str, edits: tuple[Edit, ...], skip_absent: bool = False) -> str:
    """`source` with every edit applied; each `old` must occur once in its function.

    With `skip_absent`, edits to functions `source` does not define are left out (a
    notebook cell holds one function of the reference, not all of them).
    """
    for edit in edits:
        try:
            begin, end = function_span(source, edit.function)
        except KeyError:
            if skip_absent:
                continue
            raise
        body = source[begin:end]
        count = body.count(edit.old)
        if count != 1:
            raise ValueError(f"edit {edit.old!r} matches {count} times in {edit.function}")
        source = source[:begin] + body.replace(edit.old, edit.new) + source[end:]
    return source


def base_path(base: str) -> Path:
    """The file a bug's edits apply to: the reference, or `grader/shapes/<base>.py`."""
    if base == "reference":
        return REFERENCE
    if base not in DECOMPOSITIONS:
        raise KeyError(f"no base {base!r}; use 'reference' or one of {', '.join(DECOMPOSITIONS)}")
    return DECOMPOSITIONS_DIR / f"{base}.py"


def base_source(base: str) -> str:
    """The source text a bug's edits apply to (see `base_path`)."""
    return base_path(base).read_text()


def write_bug(bug: Bug, folder: Path) -> Path:
    """Write `bug`'s implementation as `<folder>/<name>.py` and return the path."""
    path = folder / f"{bug.name.replace('-', '_')}.py"
    path.write_text(apply(base_source(bug.base), bug.edits))
    return path
