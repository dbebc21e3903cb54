"""The reference's bugs: each an edit of `grader/reference.py`, one program per row."""

from __future__ import annotations

from grader.edits import Edit
from grader.zoo.bug import ALLOC, COPY_FIRST, KERNEL_CELLS, LOAD, WRAPPER_CELLS, Bug

REFERENCE_BUGS: tuple[Bug, ...] = (
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
        (Edit("softmax_kernel", LOAD, LOAD.replace("cols * SC", "cols")),),
        KERNEL_CELLS,
    ),
    Bug(
        "ignores-both-strides",
        "strides",
        "loads X + row*N + col, as public kernels written for contiguous rows do: every view "
        "that is not laid out as a new contiguous tensor is misread, row broadcasts too",
        (Edit("softmax_kernel", LOAD, LOAD.replace("row * SR + cols * SC", "row * N + cols")),),
        KERNEL_CELLS,
    ),
    Bug(
        "row-stride-times-width",
        "row-stride",
        "starts row r at X + r*SR*N, the row stride multiplied by the width: only rows of "
        "stride 0 and views of one column are read right, and contiguous rows run past X",
        (Edit("softmax_kernel", LOAD, LOAD.replace("row * SR", "row * SR * N")),),
        KERNEL_CELLS,
    ),
    Bug(
        "misspelled-tl-function",
        "exception",
        "calls tl.maxx, which Triton does not have: every launch raises the same error",
        (Edit("softmax_kernel", "x - tl.max(x, axis=0)", "x - tl.maxx(x, axis=0)"),),
        KERNEL_CELLS,
    ),
    Bug(
        "adds-storage-offset",
        "double-offset",
        "adds x.storage_offset() to a pointer that already includes it",
        (
            Edit(
                "softmax_kernel", "def softmax_kernel(X, Y, SR", "def softmax_kernel(X, Y, OFF, SR"
            ),
            Edit("softmax_kernel", LOAD, LOAD.replace("X + row", "X + OFF + row")),
            Edit("strided_softmax", "x, y, x.stride(0)", "x, y, x.storage_offset(), x.stride(0)"),
        ),
        KERNEL_CELLS,
    ),
    Bug(
        "output-like-input",
        "output-layout",
        "allocates the output with torch.empty_like(x), which copies a transpose's strides",
        (Edit("strided_softmax", ALLOC, "y = torch.empty_like(x)"),),
        WRAPPER_CELLS,
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
        KERNEL_CELLS,
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
        KERNEL_CELLS,
    ),
    Bug(
        "pads-with-zero",
        "padding",
        "pads the tail with 0 instead of -inf, so masked lanes count in the sum",
        (Edit("softmax_kernel", LOAD, LOAD.replace('-float("inf")', "0.0")),),
        KERNEL_CELLS,
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
        WRAPPER_CELLS,
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
        (Edit("strided_softmax", ALLOC, ALLOC.replace("dtype=x.dtype", "dtype=torch.float32")),),
        WRAPPER_CELLS,
    ),
    Bug(
        "no-validation",
        "validation",
        "skips matrix() and warps(), so bad input is not refused clearly",
        (Edit("strided_softmax", "M, N = matrix(x)\n    warps(num_warps)", "M, N = x.shape"),),
        WRAPPER_CELLS,
    ),
    Bug(
        "two-programs-per-row",
        "overlap",
        "launches a grid of (M, 2), as a kernel tiled over columns would, but each program "
        "writes its whole row: programs (r, 0) and (r, 1) both write row r, with right values",
        (Edit("strided_softmax", "softmax_kernel[(M,)]", "softmax_kernel[(M, 2)]"),),
        WRAPPER_CELLS,
    ),
    Bug(
        "launches-for-zero-rows",
        "empty-rows",
        "launches a grid of zero programs instead of returning early",
        (Edit("strided_softmax", "    if M == 0:\n        return y\n", ""),),
        WRAPPER_CELLS,
    ),
    Bug(
        "torch-softmax",
        "no-kernel",
        "returns torch.softmax instead of launching the kernel",
        (
            Edit(
                "strided_softmax",
                f"    {ALLOC}\n",
                "    return torch.softmax(x.float(), 1).to(x.dtype)\n",
            ),
        ),
        WRAPPER_CELLS,
    ),
    Bug(
        "copies-first",
        "copy",
        "calls x.contiguous() before the kernel: right values, a second pass over memory",
        COPY_FIRST,
        WRAPPER_CELLS,
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
        WRAPPER_CELLS,
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
        KERNEL_CELLS,
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
        KERNEL_CELLS,
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
                f"    {ALLOC}\n",
                f"    if (M, N) in _cache:\n        return _cache[(M, N)]\n    {ALLOC}\n"
                "    _cache[(M, N)] = y\n",
            ),
        ),
        WRAPPER_CELLS,
    ),
    Bug(
        "writes-in-place",
        "input-written",
        "reuses a contiguous input as the output, overwriting it",
        (Edit("strided_softmax", ALLOC, f"y = x if x.is_contiguous() else {ALLOC[4:]}"),),
        WRAPPER_CELLS,
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
        WRAPPER_CELLS,
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
        WRAPPER_CELLS,
    ),
    Bug(
        "not-implemented",
        "unfinished",
        "leaves the wrapper's stub in place",
        (Edit("strided_softmax", "    M, N = matrix(x)\n", "    raise NotImplementedError()\n"),),
        WRAPPER_CELLS,
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
"""Bugs written in the reference, one program per row."""
