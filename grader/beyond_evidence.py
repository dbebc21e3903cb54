"""The global loads each planned launch of the layout-aware softmax compiles to, and the file of
them the notebook's beyond section prints (`python -m grader.beyond` writes it)."""

import torch
import triton

from grader.beyond_kernels import (
    row_stats_kernel,
    softmax_chunks_kernel,
    softmax_tile_kernel,
    team_softmax_kernel,
)
from grader.beyond_plan import MOST_TEAM, plan
from learning.workshops.measuring.results import BEYOND_LOADS
from learning.workshops.notebook.evidence import launch_job, load_summaries

EVIDENCE_SHAPES = ((4096, 4096), (65536, 512), (2048, 16384), (16384, 1000))
"""The benchmark's shapes whose loads `evidence` reads, fp32."""


def evidence(shapes=EVIDENCE_SHAPES, num_warps: int = 4) -> list[str]:
    """The global loads each planned launch's kernel asks for, from its PTX compiled ahead
    of time for sm_90 (no GPU needed), one line per shape and layout."""
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


def write_loads() -> None:
    """Write `evidence()` to BEYOND_LOADS under a line naming Triton, and print it."""
    header = f"Triton {triton.__version__}, ahead of time for sm_90, fp32, per thread:"
    BEYOND_LOADS.write_text("\n".join([header, *evidence()]) + "\n")
    print(BEYOND_LOADS.read_text(), end="")
