"""The tile plan of the layout-aware softmax (`grader/beyond.py`): which kernel, tile and warps
one launch takes, from the view's shape, strides and element size, and the measured sizes
behind each choice."""

from dataclasses import dataclass

import torch
import triton

from learning.workshops.contracts import interpreter_active

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
