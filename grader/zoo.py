"""The zoo: the bugs students make, each as a small edit of the reference solution.

Each member names the hint `check --hint` must give for it and the nbgrader cells it must
lose. Edits apply inside one function, so the same table builds a buggy `.py` for the
check command and a buggy notebook submission for the autograder.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

REFERENCE = Path(__file__).with_name("reference.py")


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

BUGS: tuple[Bug, ...] = (
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
        "ignores-column-stride",
        "column-stride",
        "loads X + row*SR + col, as if columns were adjacent",
        (Edit("softmax_kernel", _LOAD, _LOAD.replace("cols * SC", "cols")),),
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
        frozenset({"test_pass2", "hidden_pass2", "hidden_pass3"}),
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
        frozenset({"hidden_pass2", "hidden_pass3"}),
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
        frozenset({"hidden_pass3"}),
    ),
    Bug(
        "no-validation",
        "validation",
        "skips matrix() and warps(), so bad input is not refused clearly",
        (Edit("strided_softmax", "M, N = matrix(x)\n    warps(num_warps)", "M, N = x.shape"),),
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


def write_bug(bug: Bug, folder: Path) -> Path:
    """Write `bug`'s implementation as `<folder>/<name>.py` and return the path."""
    path = folder / f"{bug.name.replace('-', '_')}.py"
    path.write_text(apply(REFERENCE.read_text(), bug.edits))
    return path
