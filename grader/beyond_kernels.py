"""The Triton kernels of the layout-aware softmax (`grader/beyond.py`): a tile of whole rows,
the chunk loop, the split pair and the team, and the helpers they share."""

import triton
import triton.language as tl

from learning.workshops.contracts import select_mode

select_mode(verbose=False)  # before any kernel is defined: the interpreter without CUDA


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
