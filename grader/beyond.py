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

This module launches; the plan is `grader/beyond_plan.py`, the kernels
`grader/beyond_kernels.py`, and the loads the notebook prints `grader/beyond_evidence.py`.
"""

import itertools

import torch
import triton

from grader.beyond_kernels import (
    normalize_kernel,
    row_stats_kernel,
    softmax_chunks_kernel,
    softmax_tile_kernel,
    team_softmax_kernel,
)
from grader.beyond_plan import MAX_BLOCK_N, Plan, plan
from learning.workshops.contracts import device_context, interpreter_active, matrix, warps

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


if __name__ == "__main__":  # writes the file the notebook's beyond section prints
    from grader.beyond_evidence import write_loads

    write_loads()
