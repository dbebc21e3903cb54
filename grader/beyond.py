"""Beyond the workshop: a layout-aware row softmax that tiles by the view's strides (issue 15).

The reference (`grader/reference.py`) runs one program per row and loads
`X + row*SR + cols*SC`. On a transposed view SC is M, so the lanes of a program stride across
the storage and each fp32 load uses 4 bytes of a 32-byte sector: on an H200 it reaches about
25% of the copy roof. Here a program holds a tile of ROWS x BLOCK_N elements, and the launch
picks the tile from the strides (`plan`):

- rows contiguous (stride(1) == 1), or any other strides (column stride 2, stride 0): tiles of
  whole rows along the columns, as few rows as give every thread one 16-byte load, up to
  WHOLE_ROW columns (more warps for the widest, at most 64 values a thread); wider rows loop
  over column chunks with an online softmax (`softmax_chunks_kernel`);
- transposed-like (stride(0) == 1, stride(1) != 1) and narrow enough that a tile of 16 bytes
  of each column holds whole rows: one tile of TRANSPOSED_TILE elements, 16 to 128 bytes of
  each column, so the lanes run down the columns;
- transposed-like and wider: the row is split across programs (`plan.splits`). A first
  kernel reduces each program's 128-byte-tall block of its column span to a running max and
  sum; a second combines a row's partial sums and writes exp(x - max) / sum, reading the
  block again. Split rows keep SPLIT_PROGRAMS programs in flight even when a view has few
  rows (2048 rows in blocks of 32 are only 64 programs), and the second kernel runs its
  programs and chunks in reverse, so that it starts on the blocks the first read last,
  still in L2 (58.5% of the roof against 57.3% in the forward order, 2048x16384; 57.9%
  against 56.4%, 4096x4096). Split launches take SPLIT_WARPS whatever the caller asks: at
  8 warps they measured 50%.

The kernel text is the same in both orientations. Triton specializes a stride of 1 to a
constant, learns from it which axis of the pointer tile is contiguous, and orders each load's
lanes along that axis; what the launch must get right is that a program holds enough rows for
that axis to have length.

A row read twice (the chunk loop, the split pair) moves 3 x M x N x size bytes for
2 x M x N x size logical ones: when the second read comes from DRAM the kernel can reach at
most 2/3 of the roof, and only what the L2 (about 50 MB on an H200) still holds beats that.
The sizes are those that were fastest in sweeps on an H200 (fp32, L2 flushed, against a
device copy): 32 x 512 tiles at 92% of the roof for a 65536x512 transpose, 16 x 1024 at 78%
for 16384x1000, 4 x 4096 at 62-63% for 4096x4096 (split rows: 58%), split rows at 59% for a
2048x16384 transpose (the chunk loop: 43%; single tiles of 2 x 16384: 58%), whole
16384-column rows at 95-99% for contiguous rows.
"""

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from learning.workshops.measuring.results import BEYOND_LOADS
from learning.workshops.notebook.contracts import device_context, matrix, select_mode, warps

select_mode(verbose=False)

ELEMENTS_PER_THREAD = 32
"""Values of a row-major chunk per thread when rows loop: 32 x 32 x num_warps elements."""
MOST_PER_THREAD = 64
"""The most values of a whole-row tile per thread: wider tiles get more warps."""
VECTOR_BYTES = 16
"""The widest load a thread makes: row-major tiles take enough rows to give each thread one."""
RUN_BYTES = (16, 128)
"""Contiguous bytes a transposed view's tile takes from each column: half a 32-byte sector at
least (4 x 4096 fp32 was fastest for a 4096x4096 transpose), one 128-byte line at most."""
TRANSPOSED_TILE = 16384
"""Elements of a transposed view's single tile (32 x 512 fp32 was fastest at 4 warps)."""
TILE_PER_THREAD = 128
"""The most values of a transposed view's tile per thread: fewer warps get more."""
WHOLE_ROW = 16384
"""The widest row-major tile; wider rows loop over column chunks."""
MAX_BLOCK_N = WHOLE_ROW
SPLIT_BLOCK_N = 128
"""Columns of each chunk of a split row (32 fp32 rows x 128 columns: 32 values a thread)."""
SPLIT_WARPS = 4
"""Warps of each split program (32 x 128 fp32: 32 values a thread)."""
SPLIT_PROGRAMS = 4096
"""Programs a split launch aims for: many per SM, whatever the number of rows."""
ROW_MAJOR, COLUMN_MAJOR = "columns", "rows"
"""The axis neighbouring lanes follow: along a row (contiguous rows) or down a column."""


@dataclass(frozen=True)
class Plan:
    """How one launch tiles the view: `rows` per program, `block_n` columns per tile, the axis
    neighbouring lanes follow, whether a row takes several tiles (`loop`), the programs a row
    is split across (`splits`, each `span` columns) and the warps a program gets."""

    rows: int
    block_n: int
    lanes_along: str
    loop: bool
    splits: int = 1
    span: int = 0
    num_warps: int = 4


def plan(x: torch.Tensor, num_warps: int = 4, max_block_n: int = MAX_BLOCK_N) -> Plan:
    """The tile for the 2-D view `x`, from its shape, strides and element size; `max_block_n`
    caps a tile's width (tests force the loops with a small one)."""
    if max_block_n < 1 or max_block_n & (max_block_n - 1):
        raise ValueError(f"max_block_n must be a power of two, got {max_block_n}; try 4096.")
    m, n = x.shape
    width = triton.next_power_of_2(n)
    all_rows = triton.next_power_of_2(max(m, 1))
    if x.stride(0) == 1 and x.stride(1) != 1:
        return _column_major(m, n, x.element_size(), all_rows, num_warps, max_block_n)
    threads = 32 * num_warps
    block_n = width if width <= max_block_n else min(max_block_n, ELEMENTS_PER_THREAD * threads)
    rows = min(max(1, VECTOR_BYTES // x.element_size() * threads // block_n), all_rows)
    if block_n < n:
        return Plan(rows, block_n, ROW_MAJOR, True, num_warps=num_warps)
    needed = rows * block_n // MOST_PER_THREAD // 32
    return Plan(rows, block_n, ROW_MAJOR, False, num_warps=min(32, max(num_warps, needed)))


def _column_major(m, n, size, all_rows, num_warps, max_block_n) -> Plan:
    """A transposed-like view's plan: one tile of whole rows when 16 bytes of each column
    fit, else rows split across programs in 128-byte-tall blocks."""
    fewest, most = (max(1, run // size) for run in RUN_BYTES)
    width = triton.next_power_of_2(n)
    if width <= max_block_n and fewest * width <= TRANSPOSED_TILE:
        rows = min(max(fewest, min(most, TRANSPOSED_TILE // width)), all_rows)
        needed = rows * width // TILE_PER_THREAD // 32
        return Plan(rows, width, COLUMN_MAJOR, False, num_warps=min(32, max(num_warps, needed)))
    rows = min(most, all_rows)
    block_n = min(SPLIT_BLOCK_N, max_block_n, width)
    chunks = triton.cdiv(n, block_n)
    wanted = triton.cdiv(SPLIT_PROGRAMS, triton.cdiv(m, rows))
    span = triton.cdiv(chunks, min(max(wanted, 1), chunks, 65535)) * block_n
    splits = triton.cdiv(n, span)
    needed = rows * block_n // ELEMENTS_PER_THREAD // 32
    return Plan(rows, block_n, COLUMN_MAJOR, True, splits, span, max(SPLIT_WARPS, needed))


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
        top, total = online_step(top, total, x)
    for start in tl.range(0, N, BLOCK_N):
        cols = start + chunk
        x, mask = load_tile(X, rows, cols, M, N, SR, SC)
        y = tl.exp(x - top[:, None]) / total[:, None]
        tl.store(Y + rows[:, None] * N + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def safe_shift(top):
    # What to subtract before exp: the running max, or 0 while a row has seen only -inf
    # (exp(-inf - -inf) would be NaN).
    return tl.where(top == -float("inf"), 0.0, top)


@triton.jit
def online_step(top, total, x):
    # Fold a tile into each row's running max and sum.
    new_top = tl.maximum(top, tl.max(x, axis=1))
    shift = safe_shift(new_top)
    return new_top, total * tl.exp(top - shift) + tl.sum(tl.exp(x - shift[:, None]), axis=1)


@triton.jit
def row_stats_kernel(X, TOP, TOTAL, M, N, SR, SC, SPAN, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    # Program (i, j) reduces rows i*ROWS .. i*ROWS + ROWS - 1 over columns j*SPAN .. (j+1)*SPAN
    # - 1 to a running max and sum, stored at TOP[j, rows] and TOTAL[j, rows].
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    first = tl.program_id(1) * SPAN
    chunk = tl.arange(0, BLOCK_N)
    top = tl.full([ROWS], -float("inf"), tl.float32)
    total = tl.zeros([ROWS], tl.float32)
    for start in tl.range(first, first + SPAN, BLOCK_N):
        x, _ = load_tile(X, rows, start + chunk, M, N, SR, SC)
        top, total = online_step(top, total, x)
    at = tl.program_id(1) * M + rows
    tl.store(TOP + at, top, mask=rows < M)
    tl.store(TOTAL + at, total, mask=rows < M)


@triton.jit
def normalize_kernel(
    X,
    Y,
    TOP,
    TOTAL,
    M,
    N,
    SR,
    SC,
    SPAN,
    SPLITS,
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SPLITS_P2: tl.constexpr,
):
    # Programs and chunks in the reverse of row_stats_kernel's order, so the first tiles read
    # are those it read last. Each combines its rows' partial sums, then writes its span.
    block = tl.num_programs(0) - 1 - tl.program_id(0)
    part = tl.num_programs(1) - 1 - tl.program_id(1)
    rows = block.to(tl.int64) * ROWS + tl.arange(0, ROWS)
    splits = tl.arange(0, SPLITS_P2)
    at = splits[:, None] * M + rows[None, :]
    held = (splits[:, None] < SPLITS) & (rows[None, :] < M)
    tops = tl.load(TOP + at, mask=held, other=-float("inf"))
    top = tl.max(tops, axis=0)
    shift = safe_shift(top)
    total = tl.sum(tl.load(TOTAL + at, mask=held, other=0.0) * tl.exp(tops - shift[None, :]), 0)
    chunk = tl.arange(0, BLOCK_N)
    last = part * SPAN + SPAN - BLOCK_N
    for back in tl.range(0, SPAN, BLOCK_N):
        cols = last - back + chunk
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
    shape = dict(ROWS=tiles.rows, BLOCK_N=tiles.block_n, num_warps=tiles.num_warps)
    row_blocks = triton.cdiv(M, tiles.rows)  # grid axis 0: axes 1 and 2 stop at 65535 programs
    strides = (M, N, x.stride(0), x.stride(1))
    with device_context(x):
        if tiles.splits > 1:
            top = torch.empty((tiles.splits, M), dtype=torch.float32, device=x.device)
            total = torch.empty_like(top)
            grid = (row_blocks, tiles.splits)
            row_stats_kernel[grid](x, top, total, *strides, tiles.span, **shape)
            splits_p2 = triton.next_power_of_2(tiles.splits)
            normalize_kernel[grid](
                x, y, top, total, *strides, tiles.span, tiles.splits, SPLITS_P2=splits_p2, **shape
            )
        else:
            kernel = softmax_chunks_kernel if tiles.loop else softmax_tile_kernel
            kernel[(row_blocks,)](x, y, *strides, **shape)
    return y


EVIDENCE_SHAPES = ((4096, 4096), (65536, 512), (2048, 16384), (16384, 1000))
"""The benchmark's shapes whose loads `evidence` reads, fp32."""


def evidence(shapes=EVIDENCE_SHAPES, num_warps: int = 4) -> list[str]:
    """The global loads each planned launch's kernel asks for, from its PTX compiled ahead
    of time for sm_90 (no GPU needed), one line per shape and layout."""
    from learning.workshops.notebook.evidence import launch_job, load_summaries

    launches = []
    for m, n in shapes:
        for layout, x in (
            ("transposed", torch.empty(n, m, device="meta").t()),
            ("contiguous", torch.empty(m, n, device="meta")),
        ):
            tiles = plan(x, num_warps)
            ints = [m, n, x.stride(0), x.stride(1)]
            if tiles.splits > 1:
                kernel, pointers, ints = row_stats_kernel, 3, [*ints, tiles.span]
            else:
                kernel, pointers = softmax_chunks_kernel if tiles.loop else softmax_tile_kernel, 2
            job = launch_job(
                "fp32", pointers, ints, [tiles.rows, tiles.block_n], tiles.num_warps, 90
            )
            launches.append((f"{m}x{n} {layout}", tiles, kernel, job))
    lines = []
    for kernel in dict.fromkeys(k for *_, k, _ in launches):
        mine = [launch for launch in launches if launch[2] is kernel]
        summaries = load_summaries(kernel, [job for *_, job in mine], "fp32")
        for (name, tiles, _, _), summary in zip(mine, summaries, strict=True):
            loads = " + ".join(
                f"{count} of {width} bits" for width, count in summary.loads_by_width.items()
            )
            lines.append(
                f"{name:<22} {kernel.fn.__name__} {tiles.rows} x {tiles.block_n}, "
                f"{tiles.num_warps} warps: loads {loads}"
            )
    return lines


if __name__ == "__main__":  # writes the file the notebook's beyond section prints
    header = f"Triton {triton.__version__}, ahead of time for sm_90, fp32, per thread:"
    BEYOND_LOADS.write_text("\n".join([header, *evidence()]) + "\n")
    print(BEYOND_LOADS.read_text(), end="")
