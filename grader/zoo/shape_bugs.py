"""The shapes' bugs: each an edit of a correct decomposition in `grader/shapes/`, so the same
bug must get the same hint whichever way the rows are split among programs."""

from __future__ import annotations

from grader.edits import Edit
from grader.zoo.bug import ALLOC, COPY_FIRST, KERNEL_CELLS, LOAD, WRAPPER_CELLS, Bug

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
            (Edit("strided_softmax", ALLOC, "y = torch.empty_like(x)"),),
            WRAPPER_CELLS,
            base=base,
        ),
        Bug(
            f"{name}-copies-first",
            "copy",
            "calls x.contiguous() before the kernel: right values, a second pass over memory",
            COPY_FIRST,
            WRAPPER_CELLS,
            base=base,
        ),
        Bug(
            f"{name}-writes-in-place",
            "input-written",
            "reuses a contiguous input as the output, overwriting it",
            (Edit("strided_softmax", ALLOC, f"y = x if x.is_contiguous() else {ALLOC[4:]}"),),
            WRAPPER_CELLS,
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
        (Edit("softmax_kernel", LOAD, LOAD.replace("cols * SC", "cols")),),
        KERNEL_CELLS,
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
            Edit("softmax_kernel", LOAD, LOAD.replace("X + row", "X + OFF + row")),
            Edit(
                "softmax_into", "x, y, M, x.stride(0)", "x, y, x.storage_offset(), M, x.stride(0)"
            ),
        ),
        KERNEL_CELLS,
        base="persistent",
    ),
    Bug(
        "persistent-pads-with-zero",
        "padding",
        "pads each row's tail with 0 instead of -inf, so masked lanes count in the sum",
        (Edit("softmax_kernel", LOAD, LOAD.replace('-float("inf")', "0.0")),),
        KERNEL_CELLS,
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
        KERNEL_CELLS,
        base="persistent",
    ),
    Bug(
        "persistent-ignores-both-strides",
        "strides",
        "each loop iteration loads X + row*N + col, as kernels written for contiguous rows do",
        (Edit("softmax_kernel", LOAD, LOAD.replace("row * SR + cols * SC", "row * N + cols")),),
        KERNEL_CELLS,
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
        KERNEL_CELLS,
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
        KERNEL_CELLS,
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
        KERNEL_CELLS,
        base="multi_row",
    ),
    Bug(
        "multi-row-pads-with-zero",
        "padding",
        "pads the tile's columns past N with 0 instead of -inf, so they count in each row's sum",
        (Edit("softmax_kernel", 'other=-float("inf")', "other=0.0"),),
        KERNEL_CELLS,
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
        KERNEL_CELLS,
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
        KERNEL_CELLS,
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
        KERNEL_CELLS,
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
        KERNEL_CELLS,
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
        KERNEL_CELLS,
        base="column_tiled",
    ),
    Bug(
        "column-tiled-pads-with-zero",
        "padding",
        "pads the last tile with 0 instead of -inf, so its masked lanes count in the running sum",
        (Edit("load_tile", 'other=-float("inf")', "other=0.0"),),
        KERNEL_CELLS,
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
        KERNEL_CELLS,
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
