"""A zoo member: the record, the source it edits (the reference or a shape), and the edit
fragments and cell sets the bug tables share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grader.edits import Edit

GRADER = Path(__file__).parents[1]
REFERENCE = GRADER / "reference.py"
DECOMPOSITIONS_DIR = GRADER / "shapes"

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


LOAD = 'X + row * SR + cols * SC, mask=mask, other=-float("inf")'
ALLOC = "y = torch.empty((M, N), dtype=x.dtype, device=x.device)"
KERNEL_CELLS = frozenset({"test_pass2", "hidden_pass2", "test_pass3", "hidden_pass3"})
WRAPPER_CELLS = frozenset({"test_pass3", "hidden_pass3"})
"""What the bug tables share: the reference's load and allocation, which many bugs edit, and
the cells a kernel's bug and a wrapper's bug lose."""

COPY_FIRST = (
    Edit(
        "strided_softmax",
        "    M, N = matrix(x)\n",
        "    x = x.contiguous()\n    M, N = matrix(x)\n",
    ),
)
"""The copy-first shortcut: right values, and a second pass over memory before the kernel."""


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
