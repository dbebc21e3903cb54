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
- transposed-like (stride(0) == 1, stride(1) != 1) and narrow enough that a tile of a 32-byte
  sector of each column holds whole rows: one tile of TRANSPOSED_TILE elements, 32 to 128
  bytes of each column, so the lanes run down the columns;
- transposed-like and wider, on a GPU: a team (`team_softmax_kernel`). A block of 32 fp32 rows
  (a 128-byte line of each column; 16 rows, 64 bytes, where a row needs wider members) is held
  in registers by up to MOST_TEAM neighbouring programs, 256 to 1024 columns each; each
  publishes its partial max and sum, waits for the rest of its team, and writes its columns.
  The block is read once. A member publishes a value and its launch's epoch in one 64-bit word,
  and waits until every word of its team carries this launch's epoch: one round trip through
  the L2, where a counter of arrivals took two (the count, then the sums) and 4-10 points. A
  team's members wait for each other, so they must all be running. A team is named by program
  ids, and NVIDIA GPUs start the programs of a 1-D grid in the order of their ids, so every
  team but the last started is whole, and that one finishes as long as the GPU holds a team's
  programs at once: a team is never larger than the GPU's SMs, each of which can hold one
  member (`team_limit`; 132 on an H200). CUB's decoupled look-back relies on the same order,
  which its maintainers call not strictly safe in the CUDA programming model but true of the
  hardware (NVIDIA/cub#245). `plan(x, teams=1)` gives the split pair, which waits for nothing,
  and so does a stream capturing a CUDA graph (a replay would repeat the captured epoch);
- transposed-like, wider still or in the interpreter (one program at a time, so no program
  may wait for another): a 16-byte-tall tile of whole rows if one fits, else the split pair.
  A first kernel reduces each program's 128-byte-tall block of its column span to a running
  max and sum; a second combines a row's partial sums and writes exp(x - max) / sum, reading
  the block again, in reverse order, so that it starts on the blocks the first read last,
  still in L2 (1-2 points).
  Split launches take SPLIT_WARPS whatever the caller asks: at 8 warps they measured 50%.

The kernel text is the same in both orientations. Triton specializes a stride of 1 to a
constant, learns from it which axis of the pointer tile is contiguous, and orders each load's
lanes along that axis; what the launch must get right is that a program holds enough rows for
that axis to have length.

A row read twice (the chunk loop, the split pair) moves 3 x M x N x size bytes for
2 x M x N x size logical ones: when the second read comes from DRAM the kernel can reach at
most 2/3 of the roof, and only what the L2 (about 50 MB on an H200) still holds beats that.
The sizes are those that were fastest in sweeps on an H200 (fp32, L2 flushed, against a
device copy in the same run; 2026-12-04 and -05): 32 x 512 tiles at 92% of the roof for a
65536x512 transpose, 16 x 1024 at 78-80% for 16384x1000, 8 x 2048 at 74% for 8192x2048,
teams of 32 x 256 at 75% for a 4096x4096 transpose (16 x 512: 73%; the 4 x 4096 tile: 62%;
the split pair: 61-63%) and of 16 x 512 at 68-69% for 2048x16384 (the split pair: 59%),
16 x 1024 at 63% for 1024x32768 (the split pair: 59%), whole 16384-column rows at 95-99% for
contiguous rows. Where a team's time goes, from variants of its kernel timed in one run
(4096x4096 and 2048x16384 transposed, the same blocks): a copy of each block 97% and 80-93%,
a softmax of each block's own columns 94% and 80-91%, the exchange of words without the wait
(wrong values) 84% and 74-77%, the whole team 74-75% and 67-69%. Persistent teams that load
their next block while they wait (into registers, or by TMA into shared memory with Triton's
pipelining) measured 51-70%: a second block halves the programs an SM holds.
"""

import itertools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from learning.workshops.contracts import (
    device_context,
    interpreter_active,
    matrix,
    select_mode,
    warps,
)
from learning.workshops.measuring.results import BEYOND_LOADS

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
SECTOR_BYTES = 32
"""A transposed view's single tile shorter than one sector of each column (4 x 4096 fp32) takes
a team instead, if one fits: 8 x 2048 took 74% either way, 4 x 4096 62% against a team's 72%."""
TEAM_RUN_BYTES = (64, 128)
"""Bytes of each column a team's block holds: a 128-byte line (32 fp32 rows) while a member of
TEAM_TILE elements is at least as wide as a row's share of the team, else 64 bytes (16 rows)."""
TEAM_TILE = 8192
"""Elements a team member holds at least: 32 x 256 fp32 for a 4096x4096 transpose (74-75% in
two sweeps, 16 x 512 73-74%), 16 x 512 for 2048x16384. Wider rows get wider members."""
MOST_TEAM_TILE = 16384
"""Elements a team member holds at most (16 x 1024 fp32): wider rows take the split pair."""
TEAM_PER_THREAD = 64
"""Values of a member's tile per thread: the warps follow the tile (4 for 16 x 512)."""
MOST_TEAM = 32
"""The most programs of a team; wider rows take the split pair. A team waits for all its
members, so a GPU must hold that many programs at once: one per SM is 132 on an H200."""
ROW_MAJOR, COLUMN_MAJOR = "columns", "rows"
"""The axis neighbouring lanes follow: along a row (contiguous rows) or down a column."""


@dataclass(frozen=True)
class Plan:
    """How one launch tiles the view: `rows` per program, `block_n` columns per tile, the axis
    neighbouring lanes follow, whether a row takes several tiles (`loop`), the programs a row
    is split across (`splits`, each `span` columns), the warps a program gets, and whether
    the splits are a `team` (one launch, each row read once) rather than the split pair."""

    rows: int
    block_n: int
    lanes_along: str
    loop: bool
    splits: int = 1
    span: int = 0
    num_warps: int = 4
    team: bool = False

    def tiles_exactly(self, m: int, n: int) -> bool:
        """Whether an m x n view is a whole number of `rows` x `span` blocks (no masks)."""
        return m % self.rows == 0 and n % self.span == 0


def plan(
    x: torch.Tensor,
    num_warps: int = 4,
    max_block_n: int = MAX_BLOCK_N,
    teams: int | None = None,
) -> Plan:
    """The tile for the 2-D view `x`, from its shape, strides and element size; `max_block_n`
    caps a tile's width (tests force the loops with a small one). `teams`: the most programs
    that may wait for each other, by default `team_limit(x.device)`."""
    if teams is None:
        teams = team_limit(x.device)
    if max_block_n < 1 or max_block_n & (max_block_n - 1):
        raise ValueError(f"max_block_n must be a power of two, got {max_block_n}; try 4096.")
    m, n = x.shape
    width = triton.next_power_of_2(n)
    all_rows = triton.next_power_of_2(max(m, 1))
    if x.stride(0) == 1 and x.stride(1) != 1:
        return _column_major(m, n, x.element_size(), all_rows, num_warps, max_block_n, teams)
    threads = 32 * num_warps
    block_n = width if width <= max_block_n else min(max_block_n, ELEMENTS_PER_THREAD * threads)
    rows = min(max(1, VECTOR_BYTES // x.element_size() * threads // block_n), all_rows)
    if block_n < n:
        return Plan(rows, block_n, ROW_MAJOR, True, num_warps=num_warps)
    needed = rows * block_n // MOST_PER_THREAD // 32
    return Plan(rows, block_n, ROW_MAJOR, False, num_warps=min(32, max(num_warps, needed)))


def team_limit(device: torch.device) -> int:
    """The most programs of a team on `device`: MOST_TEAM, but no more than a CUDA device's
    SMs (each holds one member at least, so a whole team runs at once), and 1 in the
    interpreter, which runs one program at a time, and while the stream captures a CUDA graph
    (a replay would reuse the captured epoch, and members would take stale words as fresh)."""
    if interpreter_active():
        return 1
    if device.type == "cuda":
        with torch.cuda.device(device):
            if torch.cuda.is_current_stream_capturing():
                return 1
        return min(MOST_TEAM, torch.cuda.get_device_properties(device).multi_processor_count)
    return MOST_TEAM


def _column_major(m, n, size, all_rows, num_warps, max_block_n, teams) -> Plan:
    """A transposed-like view's plan: one tile of whole rows when a sector of each column fits
    (or 16 bytes of it, if no team fits), else rows split across programs in blocks of
    TEAM_RUN_BYTES of each column: a team when at most `teams` (and MOST_TEAM) members of at
    most MOST_TEAM_TILE elements cover a row (the tallest block whose member of TEAM_TILE
    elements does), else the split pair in 128-byte-tall blocks."""
    fewest, most = (max(1, run // size) for run in RUN_BYTES)
    width = triton.next_power_of_2(n)
    single = None
    if width <= max_block_n and fewest * width <= TRANSPOSED_TILE:
        rows = min(max(fewest, min(most, TRANSPOSED_TILE // width)), all_rows)
        needed = rows * width // TILE_PER_THREAD // 32
        single = Plan(rows, width, COLUMN_MAJOR, False, num_warps=min(32, max(num_warps, needed)))
        if rows * size >= min(SECTOR_BYTES, all_rows * size):
            return single
    shortest, tallest = (run // size for run in TEAM_RUN_BYTES)
    largest = max(1, min(teams, MOST_TEAM))
    widest = triton.next_power_of_2(triton.cdiv(n, largest))
    span = min(max(TEAM_TILE // min(tallest, all_rows), widest), max_block_n, width)
    rows = min(max(shortest, min(tallest, TEAM_TILE // span)), all_rows)
    members = triton.cdiv(n, span)
    if 1 < members <= largest and rows * span <= MOST_TEAM_TILE:
        member_warps = max(1, rows * span // TEAM_PER_THREAD // 32)
        return Plan(rows, span, COLUMN_MAJOR, False, members, span, member_warps, True)
    if single is not None:
        return single
    rows = min(most, all_rows)
    block_n = min(SPLIT_BLOCK_N, max_block_n, width)
    chunks = triton.cdiv(n, block_n)
    wanted = triton.cdiv(SPLIT_PROGRAMS, triton.cdiv(m, rows))
    span = triton.cdiv(chunks, min(max(wanted, 1), chunks, 65535)) * block_n
    splits = triton.cdiv(n, span)
    needed = rows * block_n // ELEMENTS_PER_THREAD // 32
    return Plan(rows, block_n, COLUMN_MAJOR, True, splits, span, max(SPLIT_WARPS, needed))


@triton.jit
def load_tile(X, rows, cols, M, N, SR, SC, EVEN: tl.constexpr = False):
    # Tile rows past M read 0, not -inf, so the padding never computes -inf - -inf (NaN).
    # EVEN: the caller knows every row and column lies in the view, so nothing is masked.
    in_rows = rows[:, None] < M
    mask = in_rows & (cols[None, :] < N)
    x_ptrs = X + rows[:, None] * SR + cols.to(tl.int64)[None, :] * SC  # SC*N can pass 2**31
    if EVEN:
        return tl.load(x_ptrs).to(tl.float32), mask
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
def combine(TOP, TOTAL, rows, M, PARTS, PARTS_P2: tl.constexpr):
    # Each row's max and sum from the PARTS partial ones at TOP[j, rows] and TOTAL[j, rows],
    # read from L2 (.cg): they were written by other programs, and an L1 line may be stale.
    parts = tl.arange(0, PARTS_P2)
    at = parts[:, None] * M + rows[None, :]
    held = (parts[:, None] < PARTS) & (rows[None, :] < M)
    tops = tl.load(TOP + at, mask=held, other=-float("inf"), cache_modifier=".cg")
    top = tl.max(tops, axis=0)
    totals = tl.load(TOTAL + at, mask=held, other=0.0, cache_modifier=".cg")
    return top, tl.sum(totals * tl.exp(tops - safe_shift(top)[None, :]), 0)


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
    top, total = combine(TOP, TOTAL, rows, M, SPLITS, SPLITS_P2)
    chunk = tl.arange(0, BLOCK_N)
    last = part * SPAN + SPAN - BLOCK_N
    for back in tl.range(0, SPAN, BLOCK_N):
        cols = last - back + chunk
        x, mask = load_tile(X, rows, cols, M, N, SR, SC)
        y = tl.exp(x - top[:, None]) / total[:, None]
        tl.store(Y + rows[:, None] * N + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def stamped(value, STAMP):
    # A 64-bit word: this launch's epoch in the high half, the fp32 bits of `value` below.
    return STAMP | value.to(tl.uint32, bitcast=True).to(tl.int64)


@triton.jit
def unstamped(word):
    # The fp32 value a stamped word carries.
    return word.to(tl.int32).to(tl.float32, bitcast=True)


@triton.jit
def exp_below(x, shift):
    # exp(x - shift) for x <= shift, as exp2 on (x - shift) * log2(e): PTX's ex2 with subnormal
    # results flushed to zero (below 2**-126, 0 to any tolerance), where tl.exp also handles
    # them: 12% fewer instructions in the team kernel, the same rounding of the argument.
    return tl.math.exp2((x - shift) * 1.4426950408889634)


@triton.jit(do_not_specialize=["EPOCH"])  # one compile for every epoch
def team_softmax_kernel(
    X,
    Y,
    WORDS,
    M,
    N,
    SR,
    SC,
    TEAM,
    EPOCH,
    ROWS: tl.constexpr,
    SPAN: tl.constexpr,
    TEAM_P2: tl.constexpr,
    EVEN: tl.constexpr,
):
    # A block of ROWS rows is read once, by a team of TEAM neighbouring programs that each hold
    # SPAN columns of it in registers. Each publishes its rows' partial max and sum as words
    # stamped with this launch's EPOCH (WORDS[0, member, rows], WORDS[1, member, rows]),
    # reads its whole team's words until every stamp is EPOCH, and combines them. A word is
    # written by one atomic 64-bit exchange and read by volatile loads, so a reader that sees
    # the stamp sees the value beside it: no counter, no fence, nothing to reset. EVEN: the
    # blocks tile the view exactly (M % ROWS == N % SPAN == 0), so no load or store is masked.
    block = tl.program_id(0) // TEAM
    member = tl.program_id(0) % TEAM
    rows = block.to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = member * SPAN + tl.arange(0, SPAN)
    x, mask = load_tile(X, rows, cols, M, N, SR, SC, EVEN)
    mine = tl.max(x, axis=1)
    numerator = exp_below(x, safe_shift(mine)[:, None])  # kept: rescaled below
    total = tl.sum(numerator, axis=1)
    STAMP = EPOCH.to(tl.int64) << 32
    sums = WORDS + TEAM * M  # WORDS[1]
    at = member * M + rows
    tl.atomic_xchg(WORDS + at, stamped(mine, STAMP), mask=rows < M, sem="relaxed")
    tl.atomic_xchg(sums + at, stamped(total, STAMP), mask=rows < M, sem="relaxed")
    parts = tl.arange(0, TEAM_P2)
    team = parts[:, None] * M + rows[None, :]
    held = (parts[:, None] < TEAM) & (rows[None, :] < M)
    tops = tl.load(WORDS + team, mask=held, other=STAMP, volatile=True)
    totals = tl.load(sums + team, mask=held, other=STAMP, volatile=True)
    while tl.min(((tops >> 32) == EPOCH) & ((totals >> 32) == EPOCH)) == 0:
        tops = tl.load(WORDS + team, mask=held, other=STAMP, volatile=True)
        totals = tl.load(sums + team, mask=held, other=STAMP, volatile=True)
    tops = tl.where(held, unstamped(tops), -float("inf"))
    top = tl.max(tops, axis=0)
    total = tl.sum(unstamped(totals) * tl.exp(tops - safe_shift(top)[None, :]), 0)
    scale = tl.exp(mine - safe_shift(top)) / tl.where(rows < M, total, 1.0)  # 0 if mine is -inf
    y = (numerator * scale[:, None]).to(Y.dtype.element_ty)
    y_ptrs = Y + rows[:, None] * N + cols[None, :]
    if EVEN:
        tl.store(y_ptrs, y)
    else:
        tl.store(y_ptrs, y, mask=mask)


_WORDS: dict[tuple, torch.Tensor] = {}
"""Team words, one buffer per device and stream, kept between launches."""
_EPOCHS = itertools.count(1)
"""Launch epochs: each team launch stamps its words with the next."""


def team_words(device: torch.device, count: int) -> tuple[torch.Tensor, int]:
    """At least `count` int64 team words on `device`'s current stream, kept between launches
    (a fresh allocation took 3.6 us of a 110 us launch), and this launch's epoch, 1 to 2**31 -
    1: a word left by an earlier launch, or a fresh buffer's 0, never carries it."""
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (device, stream)
    words = _WORDS.get(key)
    if words is None or words.numel() < count:
        words = _WORDS[key] = torch.zeros(count, dtype=torch.int64, device=device)
    return words, next(_EPOCHS) % (2**31 - 1) + 1


def strided_softmax(x, num_warps=4, *, max_block_n=MAX_BLOCK_N):
    """Row softmax of any 2-D view, as a new contiguous tensor of x's dtype, tiled by `plan`."""
    matrix(x)
    warps(num_warps)
    return softmax_by_plan(x, plan(x, num_warps, max_block_n))


def softmax_by_plan(x: torch.Tensor, tiles: Plan) -> torch.Tensor:
    """Row softmax of the 2-D view `x` launched as `tiles` says (tests pick their own plans)."""
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0:
        return y
    if tiles.team and tiles.splits > 1 and interpreter_active():
        raise ValueError(
            f"a team of {tiles.splits} programs waits for all its members, and the interpreter "
            "runs one program at a time, so it would wait forever; plan with teams=1."
        )
    shape = dict(ROWS=tiles.rows, BLOCK_N=tiles.block_n, num_warps=tiles.num_warps)
    row_blocks = triton.cdiv(M, tiles.rows)  # grid axis 0: axes 1 and 2 stop at 65535 programs
    strides = (M, N, x.stride(0), x.stride(1))
    splits_p2 = triton.next_power_of_2(tiles.splits)
    with device_context(x):
        if tiles.team:
            words, epoch = team_words(x.device, 2 * tiles.splits * M)
            team_softmax_kernel[(row_blocks * tiles.splits,)](
                x,
                y,
                words,
                *strides,
                tiles.splits,
                epoch,
                ROWS=tiles.rows,
                SPAN=tiles.span,
                TEAM_P2=splits_p2,
                EVEN=tiles.tiles_exactly(M, N),
                num_warps=tiles.num_warps,
            )
        elif tiles.splits > 1:
            top = torch.empty((tiles.splits, M), dtype=torch.float32, device=x.device)
            total = torch.empty_like(top)
            grid = (row_blocks, tiles.splits)
            row_stats_kernel[grid](x, top, total, *strides, tiles.span, **shape)
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
            tiles = plan(x, num_warps, teams=MOST_TEAM)
            ints = [m, n, x.stride(0), x.stride(1)]
            words = 0
            if tiles.team:
                kernel, pointers, words = team_softmax_kernel, 3, 1
                ints = [*ints, tiles.splits, 3]  # 3: an epoch, neither 1 nor a multiple of 16
                even = int(tiles.tiles_exactly(m, n))
                constexprs = [tiles.rows, tiles.span, triton.next_power_of_2(tiles.splits), even]
            elif tiles.splits > 1:
                kernel, pointers, ints = row_stats_kernel, 3, [*ints, tiles.span]
                constexprs = [tiles.rows, tiles.block_n]
            else:
                kernel, pointers = softmax_chunks_kernel if tiles.loop else softmax_tile_kernel, 2
                constexprs = [tiles.rows, tiles.block_n]
            job = launch_job("fp32", pointers, ints, constexprs, tiles.num_warps, 90, words)
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
