"""Beyond the workshop: a layout-aware row softmax that tiles by the view's strides (issue 15).

The reference (`grader/reference.py`) runs one program per row and loads
`X + row*SR + cols*SC`. On a transposed view SC is M, so the lanes of a program stride across
the storage and each fp32 load uses 4 bytes of a 32-byte sector: on an H200 it reaches about
25% of the copy roof. Here a program holds a tile of ROWS x BLOCK_N elements, and the launch
picks the tile from the strides (`plan`):

- rows contiguous (stride(1) == 1): row-major tiles of whole rows, as few rows as give every
  thread one 16-byte load (one row from 512 fp32 columns up at 4 warps);
- transposed-like (stride(0) == 1, stride(1) != 1): 16 to 32 fp32 rows (32 to 64 half rows),
  so each column of the tile is 64 to 128 contiguous bytes, two sectors to a whole line; as
  many as still let a whole row fit in the tile, else 16;
- anything else (column stride 2, stride 0, offsets): the row-major tiles, correct for any
  strides.

The kernel text is the same in both orientations. Triton specializes a stride of 1 to a
constant, learns from it which axis of the pointer tile is contiguous, and orders each load's
lanes along that axis; what the launch must get right is that a program holds enough rows for
that axis to have length. The prototype that did so reached 55-88% of the roof. Compiled for
sm_90 ahead of time (Triton 3.9, no GPU), both orientations load with `ld.global.v4.b32`.

A tile holds ELEMENTS_PER_THREAD = 32 values per thread (4096 elements at 4 warps). Compiled
for sm_90 by ptxas, the tiles `plan` picks for the benchmark's shapes take 31-80 registers a
thread, none spilled; 8192-element tiles at 4 warps took 96-204, one with a stack spill.

Rows wider than a tile loop over column chunks with an online softmax. Pass 1 keeps a running
max m and sum s per row, s = s * exp(m_old - m_new) + sum(exp(x - m_new)); pass 2 reads the row
again and writes exp(x - m) / s. That moves 3 x M x N x size bytes for 2 x M x N x size
logical ones, so when the rows the resident programs hold exceed L2 (about 50 MB on an H200;
16 rows of a 4096-wide fp32 view are 256 KiB a program, times several programs on each of 132
SMs) the second read comes from DRAM and the kernel can reach at most 2/3 of the roof. When
they fit (65536x512 at 4 warps: 32 KiB a program) the second read should hit L2: the H200 run
will say. Fewer rows make a smaller working set, so a looping transposed view gets 16, not 32.
"""

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from learning.workshops.notebook.contracts import device_context, matrix, select_mode, warps

select_mode(verbose=False)

ELEMENTS_PER_THREAD = 32
"""Values of one tile per thread: a tile holds at most 32 x 32 x num_warps elements."""
VECTOR_BYTES = 16
"""The widest load a thread makes: row-major tiles take enough rows to give each thread one."""
RUN_BYTES = (64, 128)
"""Contiguous bytes a transposed view's tile takes from each column: two 32-byte sectors at
least, one 128-byte line at most."""
MAX_BLOCK_N = 4096
"""The widest tile; wider rows loop over column chunks."""
ROW_MAJOR, COLUMN_MAJOR = "columns", "rows"
"""The axis neighbouring lanes follow: along a row (contiguous rows) or down a column."""


@dataclass(frozen=True)
class Plan:
    """How one launch tiles the view: `rows` per program, `block_n` columns per tile, the axis
    neighbouring lanes follow, and whether a row takes several tiles (the online softmax)."""

    rows: int
    block_n: int
    lanes_along: str
    loop: bool


def plan(x: torch.Tensor, num_warps: int = 4, max_block_n: int = MAX_BLOCK_N) -> Plan:
    """The tile for the 2-D view `x`, from its shape, strides and element size."""
    if max_block_n < 1 or max_block_n & (max_block_n - 1):
        raise ValueError(f"max_block_n must be a power of two, got {max_block_n}; try 4096.")
    m, n = x.shape
    threads = 32 * num_warps
    budget = ELEMENTS_PER_THREAD * threads
    width = min(triton.next_power_of_2(n), max_block_n)
    all_rows = triton.next_power_of_2(max(m, 1))
    if x.stride(0) == 1 and x.stride(1) != 1:
        fewest, most = (max(1, size // x.element_size()) for size in RUN_BYTES)
        rows = min(max(fewest, min(most, budget // width)), all_rows)
        block_n = min(width, max(1, budget // rows))
        lanes_along = COLUMN_MAJOR
    else:
        block_n = min(width, budget)
        vector = max(1, VECTOR_BYTES // x.element_size())
        rows = min(max(1, vector * threads // block_n), all_rows)
        lanes_along = ROW_MAJOR
    return Plan(rows, block_n, lanes_along, loop=block_n < n)


@triton.jit
def load_tile(X, rows, cols, M, N, SR, SC):
    # Tile rows past M read 0, not -inf, so the padding never computes -inf - -inf (NaN).
    in_rows = rows[:, None] < M
    mask = in_rows & (cols[None, :] < N)
    x_ptrs = X + rows[:, None] * SR + cols.to(tl.int64)[None, :] * SC  # SC*N can pass 2**31
    x = tl.load(x_ptrs, mask=mask, other=-float("inf")).to(tl.float32)
    return tl.where(in_rows, x, 0.0), mask


@triton.jit
def softmax_tile_kernel(X, Y, M, N, SR, SC, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    # Program p writes rows p*ROWS .. p*ROWS + ROWS - 1, each row whole in one tile row.
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    x, mask = load_tile(X, rows, cols, M, N, SR, SC)
    numerator = tl.exp(x - tl.max(x, axis=1)[:, None])
    y = numerator / tl.sum(numerator, axis=1)[:, None]
    tl.store(Y + rows[:, None] * N + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def softmax_chunks_kernel(X, Y, M, N, SR, SC, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    # Program p reads its rows twice, chunk by chunk: for the running max and sum, then to
    # write exp(x - max) / sum.
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    chunk = tl.arange(0, BLOCK_N)
    top = tl.full([ROWS], -float("inf"), tl.float32)
    total = tl.zeros([ROWS], tl.float32)
    for start in tl.range(0, N, BLOCK_N):
        x, _ = load_tile(X, rows, start + chunk, M, N, SR, SC)
        new_top = tl.maximum(top, tl.max(x, axis=1))
        # While a row has seen only -inf, shift by 0: exp(-inf - -inf) would be NaN.
        shift = tl.where(new_top == -float("inf"), 0.0, new_top)
        total = total * tl.exp(top - shift) + tl.sum(tl.exp(x - shift[:, None]), axis=1)
        top = new_top
    for start in tl.range(0, N, BLOCK_N):
        cols = start + chunk
        x, mask = load_tile(X, rows, cols, M, N, SR, SC)
        y = tl.exp(x - top[:, None]) / total[:, None]
        tl.store(Y + rows[:, None] * N + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


def strided_softmax(x, num_warps=4, *, max_block_n=MAX_BLOCK_N):
    """Row softmax of any 2-D view, as a new contiguous tensor of x's dtype, tiled by `plan`."""
    M, N = matrix(x)
    warps(num_warps)
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0:
        return y
    tiles = plan(x, num_warps, max_block_n)
    kernel = softmax_chunks_kernel if tiles.loop else softmax_tile_kernel
    grid = (triton.cdiv(M, tiles.rows),)  # axis 0: axes 1 and 2 stop at 65535 programs
    with device_context(x):
        kernel[grid](
            x,
            y,
            M,
            N,
            x.stride(0),
            x.stride(1),
            ROWS=tiles.rows,
            BLOCK_N=tiles.block_n,
            num_warps=num_warps,
        )
    return y
