"""The layout-aware softmax (grader/beyond.py): the checker's cases, the tile plan, the wide loop.

In process under the interpreter, where `run_case` runs the ownership audit on every call.
"""

from __future__ import annotations

from functools import partial

import pytest
import torch
import triton

from grader.beyond import softmax_by_plan, strided_softmax
from grader.beyond_plan import (
    COLUMN_MAJOR,
    MOST_TEAM,
    ROW_MAJOR,
    SPLIT_PROGRAMS,
    SPLIT_WARPS,
    Plan,
    plan,
)
from grader.grading.hidden import Draw, hidden_cases
from learning.workshops.checking.cases import Case, CaseResult, suite
from learning.workshops.checking.hint_rules import diagnose
from learning.workshops.checking.launches import count_launches
from learning.workshops.contracts import matrix, warps
from learning.workshops.notebook.testing import run_cases

SEED = 20261130
OP = "strided_softmax"
LOOPING = partial(strided_softmax, max_block_n=16)
"""The kernel with a 16-column tile cap, so that every row wider than 16 takes the loop."""


def team_of_one(x: torch.Tensor, num_warps: int = 4) -> torch.Tensor:
    """The team kernel with one member holding whole rows: the team the interpreter can run
    (it runs one program at a time, and a member waits for its whole team)."""
    m, n = matrix(x)
    warps(num_warps)
    width = triton.next_power_of_2(n)
    rows = min(8, triton.next_power_of_2(max(m, 1)))
    return softmax_by_plan(x, Plan(rows, width, COLUMN_MAJOR, False, 1, width, num_warps, True))


def failures(results: list[CaseResult]) -> list[str]:
    return [r.detail for r in results if not r.passed]


def view(layout: str, rows: int, cols: int, dtype=torch.float32) -> torch.Tensor:
    """A view of logical shape (rows, cols) in `layout`, on the meta device: plan reads only
    its shape, strides and element size."""
    if layout == "contiguous":
        return torch.empty(rows, cols, dtype=dtype, device="meta")
    if layout == "transpose":
        return torch.empty(cols, rows, dtype=dtype, device="meta").t()
    if layout == "slice":
        return torch.empty(rows + 1, 2 * cols + 1, dtype=dtype, device="meta")[1:, 1::2]
    raise ValueError(layout)


# --- The checker's cases -------------------------------------------------------------------


def test_public_cases_pass_with_no_hint():
    """Does the layout-aware kernel pass every public case of strided_softmax, with no hint?"""
    results = run_cases(strided_softmax, OP, suite(OP, None, "cpu"), seed=SEED)
    assert failures(results) == []
    assert diagnose(results) == []


def test_hidden_cases_pass_with_no_hint():
    """Does it pass a grading's hidden cases (every layout, drawn shapes and dtypes)?"""
    cases = hidden_cases(OP, Draw("a secret", "a student"))
    results = run_cases(strided_softmax, OP, cases, seed=SEED)
    assert len(results) == len(cases) > 10
    assert failures(results) == []
    assert diagnose(results) == []


WIDE_CASES = (
    Case("transpose-wide", "transpose", 3, 1000),
    Case("slice-wide", "slice", 9, 100, dtype="float16"),
    Case("neg-inf-wide", "transpose", 9, 70, fill="neg-inf"),
    Case("large-wide", "transposed-slice", 5, 50, fill="large"),
    Case("contiguous-wide", "contiguous", 40, 33, fill="large"),
    Case("bfloat16-broadcast", "row-broadcast", 4, 33, dtype="bfloat16"),
    Case("repeat-wide", "transpose", 33, 40, repeat=True),
)


def test_looping_kernel_passes_audited_cases():
    """With every row wider than its tile, does the online softmax pass the public cases and
    wide ones (-inf, ±1e4, half precision), the audit finding each element written once
    and no load outside the view?"""
    cases = suite(OP, None, "cpu") + list(WIDE_CASES)
    results = run_cases(LOOPING, OP, cases, seed=SEED)
    assert failures(results) == []
    assert diagnose(results) == []


def test_team_kernel_passes_audited_cases():
    """Does the team kernel, as a team of one, pass the public cases and the wide ones, the
    audit finding each element written once and no load outside the view?"""
    results = run_cases(team_of_one, OP, suite(OP, None, "cpu") + list(WIDE_CASES), seed=SEED)
    assert failures(results) == []
    assert diagnose(results) == []


@pytest.mark.parametrize("shape", [(16, 64), (13, 50)], ids=["blocks-tile-the-view", "ragged"])
def test_team_kernel_with_and_without_masks(shape):
    """Does the team kernel match torch where its blocks tile the view exactly (no masks: 16
    rows in blocks of 8, 64 columns) and where they do not (13 x 50), with a row of -inf
    (NaN, as torch gives), a row -inf but for one column, and values near ±1e4?"""
    m, n = shape
    x = torch.randn(n, m, generator=torch.Generator().manual_seed(SEED)).t()
    x[1] = float("-inf")
    x[2, 1:] = float("-inf")
    x[3] = x[3].sign() * 1e4 + x[3]
    out = team_of_one(x)
    torch.testing.assert_close(out, torch.softmax(x.double(), 1).float(), equal_nan=True)
    assert out[1].isnan().all() and out[2, 0] == 1


def test_a_team_is_refused_in_the_interpreter():
    """Is a team of several programs refused in the interpreter, which would wait forever,
    with what to do instead?"""
    tiles = Plan(4, 16, COLUMN_MAJOR, False, 2, 16, 4, team=True)
    with pytest.raises(ValueError, match="interpreter runs one program at a time.*teams=1"):
        softmax_by_plan(torch.randn(30, 3).t(), tiles)


# --- The tile plan -------------------------------------------------------------------------


def test_contiguous_rows_get_row_major_tiles_of_few_rows():
    """Do contiguous rows get whole-row tiles along the columns, one row once rows are wide?"""
    assert plan(view("contiguous", 4096, 4096)) == Plan(1, 4096, ROW_MAJOR, loop=False)
    assert plan(view("contiguous", 65536, 512)) == Plan(1, 512, ROW_MAJOR, loop=False)
    assert plan(view("contiguous", 65536, 64)) == Plan(8, 64, ROW_MAJOR, loop=False)


def test_transposed_view_gets_many_rows_per_tile():
    """Does a transposed view get one tile of 4 to 32 fp32 rows, so lanes run down columns?"""
    assert plan(view("transpose", 4096, 100)) == Plan(32, 128, COLUMN_MAJOR, loop=False)
    assert plan(view("transpose", 65536, 512), num_warps=8) == Plan(
        32, 512, COLUMN_MAJOR, loop=False, num_warps=8
    )
    assert plan(view("transpose", 16384, 1000)) == Plan(16, 1024, COLUMN_MAJOR, loop=False)
    assert plan(view("transpose", 8192, 2048)) == Plan(8, 2048, COLUMN_MAJOR, loop=False)
    # where no team can run (the interpreter), a tile of 16 bytes of each column
    assert plan(view("transpose", 4096, 4096)) == Plan(4, 4096, COLUMN_MAJOR, loop=False)


def test_wide_transposed_rows_take_a_team_on_a_gpu():
    """On a GPU, is a transposed row whose tile would hold less than a sector of each column
    read once by a team of programs holding a 128-byte line of each column (32 fp32 rows) of
    256 columns, 64 bytes (16 rows) of wider spans where a row needs them, up to MOST_TEAM
    members, and a wider row split into the pair?"""
    assert plan(view("transpose", 4096, 4096), teams=MOST_TEAM) == Plan(
        32, 256, COLUMN_MAJOR, False, splits=16, span=256, num_warps=4, team=True
    )
    assert plan(view("transpose", 2048, 16384), teams=MOST_TEAM) == Plan(
        16, 512, COLUMN_MAJOR, False, splits=32, span=512, num_warps=4, team=True
    )
    assert plan(view("transpose", 1024, 32768), teams=MOST_TEAM) == Plan(
        16, 1024, COLUMN_MAJOR, False, splits=32, span=1024, num_warps=8, team=True
    )
    half = plan(view("transpose", 2048, 8192, torch.float16), teams=MOST_TEAM)
    assert (half.rows, half.span, half.splits, half.team) == (32, 256, 32, True)
    assert plan(view("transpose", 3, 5000), teams=MOST_TEAM) == Plan(
        4, 2048, COLUMN_MAJOR, False, splits=3, span=2048, num_warps=4, team=True
    )
    assert plan(view("transpose", 8192, 2048), teams=MOST_TEAM).team is False
    assert plan(view("transpose", 64, 1024 * MOST_TEAM), teams=MOST_TEAM).team
    widest = plan(view("transpose", 64, 1024 * MOST_TEAM + 1), teams=MOST_TEAM)
    assert not widest.team and widest.loop and widest.splits > 1


def test_a_team_is_never_larger_than_the_programs_that_run_at_once():
    """Does a GPU with fewer SMs than a team would need get the split pair, and a row that a
    smaller team covers that team? (Members wait for each other: they must all be running.)"""
    wide = view("transpose", 2048, 16384)
    assert not plan(wide, teams=8).team
    assert (plan(wide, teams=16).splits, plan(wide, teams=16).span) == (16, 1024)
    assert plan(view("transpose", 2048, 8192), teams=MOST_TEAM).splits == 32
    assert plan(view("transpose", 2048, 8192), teams=16) == Plan(
        16, 512, COLUMN_MAJOR, False, splits=16, span=512, num_warps=4, team=True
    )
    assert plan(wide).team is False  # the interpreter's limit: 1


def test_wide_transposed_rows_are_split_across_programs():
    """Is a transposed row too wide for 16 bytes of each column split into spans of 128-column
    chunks, in 32-row blocks, about SPLIT_PROGRAMS programs in all, where programs cannot
    wait for each other (the interpreter)?"""
    tiles = plan(view("transpose", 2048, 16384))
    assert tiles == Plan(32, 128, COLUMN_MAJOR, True, splits=64, span=256)
    assert triton.cdiv(2048, tiles.rows) * tiles.splits == SPLIT_PROGRAMS
    assert plan(view("transpose", 2048, 16384), num_warps=8).num_warps == SPLIT_WARPS
    assert plan(view("transpose", 3, 1000), max_block_n=16) == Plan(
        4, 16, COLUMN_MAJOR, True, splits=63, span=16
    )


def test_half_precision_transpose_takes_twice_the_rows():
    """Are the column runs counted in bytes: 32 to 64 rows of a float16 transpose?"""
    assert plan(view("transpose", 4096, 50, torch.float16)).rows == 64
    assert plan(view("transpose", 4096, 8192, torch.float16)).rows == 64


def test_few_rows_cap_the_tile_height():
    """Does a view with few rows get a tile no taller than its rows, rounded to a power of 2?"""
    assert plan(view("transpose", 3, 1000)) == Plan(4, 1024, COLUMN_MAJOR, loop=False)
    assert plan(view("contiguous", 5, 7)) == Plan(8, 8, ROW_MAJOR, loop=False)


def test_sliced_view_gets_row_major_tiles():
    """Does a view with column stride 2 take the row-major tiles, sound for any strides?"""
    assert plan(view("slice", 64, 300)).lanes_along == ROW_MAJOR
    assert plan(torch.empty(1, 300, device="meta").expand(64, 300)).lanes_along == ROW_MAJOR


def test_very_wide_rows_loop_over_column_chunks():
    """Does a contiguous row up to 16384 columns take one tile, with the warps that keep it
    at 64 values a thread, and a wider one loop over chunks?"""
    assert plan(view("contiguous", 2048, 16384)) == Plan(1, 16384, ROW_MAJOR, False, num_warps=8)
    assert plan(view("contiguous", 2048, 65536)) == Plan(1, 4096, ROW_MAJOR, loop=True)
    assert plan(view("contiguous", 4, 100), max_block_n=16) == Plan(4, 16, ROW_MAJOR, loop=True)


@pytest.mark.parametrize("num_warps", [1, 4, 8, 32])
@pytest.mark.parametrize("layout", ["contiguous", "transpose", "slice"])
def test_tiles_stay_within_the_register_budget(layout, num_warps):
    """Does every tile hold at most 128 values per thread (32 when it loops), in powers of
    two, with at least the warps asked for (split rows: SPLIT_WARPS, whatever is asked)?"""
    for rows, cols in ((1, 1), (7, 5), (3, 1000), (4096, 4096), (65536, 512), (2048, 65536)):
        tiles = plan(view(layout, rows, cols), num_warps)
        per_thread = 32 if tiles.loop else 128
        assert tiles.rows * tiles.block_n <= per_thread * 32 * tiles.num_warps
        assert tiles.num_warps >= (SPLIT_WARPS if tiles.splits > 1 else num_warps)
        team = plan(view(layout, rows, cols), num_warps, teams=MOST_TEAM)
        assert team.rows * team.block_n <= 128 * 32 * team.num_warps
        assert triton.next_power_of_2(tiles.rows) == tiles.rows
        assert triton.next_power_of_2(tiles.block_n) == tiles.block_n
        assert tiles.loop == (tiles.block_n < cols)


def test_tile_cap_must_be_a_power_of_two():
    """Is a tile cap that is not a power of two refused with the value and a suggestion?"""
    with pytest.raises(ValueError, match="max_block_n must be a power of two, got 100; try 4096"):
        plan(view("contiguous", 4, 4), max_block_n=100)


# --- The launch and the wide loop ---------------------------------------------------------


@pytest.mark.parametrize("layout", ["contiguous", "transpose"])
def test_one_launch_of_cdiv_programs_on_axis_zero(layout):
    """Is there one launch, with cdiv(M, rows) programs on grid axis 0 only, and when rows
    are split, a launch of the stats and one of the normalisation over the same grid?"""
    x = torch.randn(70, 20) if layout == "contiguous" else torch.randn(20, 70).t()
    with count_launches() as log:
        strided_softmax(x)
    assert [launch.grid for launch in log.launches] == [(triton.cdiv(70, plan(x).rows),)]
    assert log.launches[0].kernel == "softmax_tile_kernel"
    with count_launches() as log:
        LOOPING(x)
    if layout == "contiguous":
        assert [launch.kernel for launch in log.launches] == ["softmax_chunks_kernel"]
    else:
        tiles = plan(x, max_block_n=16)
        grid = (triton.cdiv(70, tiles.rows), tiles.splits)
        assert [(launch.kernel, launch.grid) for launch in log.launches] == [
            ("row_stats_kernel", grid),
            ("normalize_kernel", grid),
        ]


def extreme_rows(rows: int, cols: int) -> torch.Tensor:
    """Rows of ±1e4 with -inf entries: a first chunk all -inf, a last chunk all -inf, a row
    all -inf (NaN, as torch gives), and rows whose max lies in a late chunk."""
    g = torch.Generator().manual_seed(SEED)
    x = torch.randn(rows, cols, generator=g, dtype=torch.float64)
    x = x.sign() * (1e4 + 1e3 * x.abs())
    x[::3] = torch.randn(len(x[::3]), cols, generator=g, dtype=torch.float64)
    x[1, :40] = float("-inf")
    x[2, -40:] = float("-inf")
    x[4] = float("-inf")
    x[5, ::7] = float("-inf")
    x[6, -1] = 3e4
    return x


@pytest.mark.filterwarnings("ignore:invalid value encountered in subtract:RuntimeWarning")
@pytest.mark.parametrize("layout", ["contiguous", "transpose"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_wide_loop_matches_torch_in_float64(layout, dtype):
    """Across 16-column chunks, are ±1e4 values, chunks of -inf and an all -inf row softmaxed
    as torch.softmax does in float64? (The all -inf row's NaN is numpy's -inf - -inf.)"""
    ref_input = extreme_rows(37, 150).to(dtype)
    x = ref_input if layout == "contiguous" else ref_input.t().contiguous().t()
    assert plan(x, max_block_n=16).loop
    out = LOOPING(x)
    expected = torch.softmax(ref_input.double(), dim=1)
    assert out.dtype == dtype and out.is_contiguous()
    assert out[4].isnan().all() and expected[4].isnan().all()
    atol = 1e-6 if dtype == torch.float32 else 1e-3
    torch.testing.assert_close(out.double(), expected, rtol=0, atol=atol, equal_nan=True)


def test_the_recorded_loads_are_what_the_compiler_gives():
    """Are the loads the notebook's beyond section prints (beyond_loads.txt) what compiling
    the planned launches for sm_90 gives now: 128-bit loads for the team's tiles and for
    whole 16384-column rows?"""
    from grader.beyond_evidence import evidence
    from learning.workshops.measuring.results import BEYOND_LOADS

    lines = evidence(shapes=((2048, 16384),))
    assert len(lines) == 2 and set(lines) <= set(BEYOND_LOADS.read_text().splitlines())
    team = "team_softmax_kernel 16 x 512, 4 warps: loads 16 of 128 bits"
    assert any(team in line for line in lines)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_every_plan_computes_wide_views_on_the_gpu():
    """On a GPU, do the team (a transposed row of 5000 to 32768 columns), the split pair
    (wider) and the single tiles match torch in float64, with -inf and ±1e4 rows, rows whose
    first 1024 columns are -inf and the rest near -1000, all -inf rows (NaN), twice over
    (a team's words from one launch never pass for the next's)?"""
    from learning.workshops.notebook.testing import expect_cases

    expect_cases(strided_softmax, OP)
    hidden = run_cases(strided_softmax, OP, hidden_cases(OP, Draw("a secret", "a student")))
    assert failures(hidden) == []
    g = torch.Generator(device="cuda").manual_seed(SEED)
    shapes = ((2048, 16384), (37, 5000), (1000, 32768), (64, 40000), (4096, 4096), (65536, 512))
    for rows, cols in shapes:
        for dtype in (torch.float32, torch.float16):
            base = torch.randn(cols, rows, generator=g, device="cuda", dtype=torch.float64)
            base[:40, 1] = float("-inf")
            base[:, 2] = base[:, 2].sign() * 1e4
            base[:1024, 3] = float("-inf")  # whole members see only -inf, the rest sit low:
            base[1024:, 3] -= 1000  # their kept exponentials must scale by 0, not overflow
            base[:, 4] = float("-inf")  # NaN, as torch gives
            x = base.to(dtype).t()
            expected = torch.softmax(x.double(), dim=1)
            atol = 1e-6 if dtype == torch.float32 else 1e-3
            for _ in range(2):
                out = strided_softmax(x)
                torch.testing.assert_close(
                    out.double(), expected, rtol=0, atol=atol, equal_nan=True
                )
                assert out[4].isnan().all()
