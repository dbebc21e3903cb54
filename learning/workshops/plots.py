"""Plots of one benchmark run: the num_warps comparison, the layout comparison, the backward.

`plot_warps` shows, per shape and layout, the median time of 4 against 8 warps for the
direct and copy-first variants, with min-max whiskers. `plot_layouts` shows, per shape and
mode, the effective bandwidth (logical bytes) of each way to compute the softmax of a
transposed view, with the plain device copy as the roof; a run with `--variants` adds the
layout-aware kernel to both. `plot_backward` shows, for a run of
the backward (`--op strided_softmax_backward`), the bandwidth of every variant per shape,
layout and mode. Figures are built without pyplot, so they draw on a headless machine.
Each figure here lays out its panels, their scale, the legend and the title; `plot_panels`
draws a panel's bars.

    python -m learning.workshops.plots results/local/i1.json --out results/local/plots
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from learning.workshops.measuring.results import (
    BACKWARD,
    FORWARD,
    LAYOUTS,
    Results,
    ResultsError,
    load,
)
from learning.workshops.plot_panels import (
    BACKWARD_VARIANTS,
    MODES,
    ROOF,
    VARIANT_NAMES,
    WARP_GROUPS,
    WHISKER,
    backward_bars,
    best_row,
    draw_backward_panel,
    draw_layout_panel,
    draw_warps_panel,
    drew_off_scale,
    gbps_span,
    layout_bars,
    off_scale_handle,
    on_layout_plot,
    roof_row,
    scale_top,
    warp_groups,
)

MODE_NAMES = {"cold": "cold (L2 flushed)", "warm": "warm (back to back)"}
WARP_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#9d755d")
"""One colour per num_warps value, in increasing order of num_warps."""
DPI = 130
COLUMN_INCHES = 12.5
"""The widest a figure is drawn: the notebook's column (1280 px) at 100 dpi, where a figure
wider than it is shrunk, and its tick labels with it."""
BENCHMARK_COMMAND = "`python -m learning.workshops.benchmark --op {op} --output FILE`"


def plot_warps(results: Results) -> Figure:
    """Median ms of each num_warps, per shape, layout, variant and mode, with min-max whiskers."""
    _require_rows(results, FORWARD)
    rows = [r for r in results.rows if (r.variant, r.layout) in WARP_GROUPS and r.num_warps]
    if not rows:
        return _message_figure(
            results,
            "No direct or copy-first rows in this file, so there are no num_warps to compare.",
        )
    shapes = _ordered(r.shape for r in rows)
    layouts = [lay for lay in ("transpose", "contiguous") if any(r.layout == lay for r in rows)]
    warps = sorted({r.num_warps for r in rows})
    colours = {w: WARP_COLOURS[i % len(WARP_COLOURS)] for i, w in enumerate(warps)}
    ratios = [max(1, len(warp_groups(rows, lay))) for lay in layouts]

    width = min(COLUMN_INCHES, 2.5 + 1.6 * sum(ratios))
    fig = Figure(figsize=(width, 3.4 * len(shapes) + 1.2), layout="constrained")
    grid = fig.add_gridspec(len(shapes), len(layouts), width_ratios=ratios)
    for i, shape in enumerate(shapes):
        for j, layout in enumerate(layouts):
            ax = fig.add_subplot(grid[i, j])
            ax.set_label(f"warps {shape} {layout}")
            draw_warps_panel(ax, rows, shape, layout, warps, colours)
            ax.set_title(f"{shape}, {layout} view", loc="left", fontsize=11)
            ax.set_ylabel("median time (ms)")
    handles = [Patch(color=colours[w], label=f"num_warps={w}") for w in warps]
    handles.append(Line2D([], [], color=WHISKER, marker="_", markersize=10, label="min to max"))
    if drew_off_scale(fig):
        handles.append(off_scale_handle("slowest call off the scale"))
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
    _suptitle(fig, f"Time per call by num_warps: {_whose(results)} (lower is better)")
    return fig


def plot_layouts(results: Results) -> Figure:
    """Effective GB/s (logical bytes) of each variant, per shape and mode, under the roof."""
    _require_rows(results, FORWARD)
    shapes = _ordered(r.shape for r in results.rows)
    modes = [m for m in MODES if any(r.mode == m for r in results.rows)]
    # 1.4 inches a bar keeps two-line labels apart; modes side by side while they fit the
    # notebook's column (four bars), else one under the other (six, with --variants and
    # --torch-compile), so the labels keep their size
    panel = max(5.8, 1.4 * len(layout_bars(results)) + 0.3)
    across = len(modes) if panel * len(modes) <= COLUMN_INCHES else 1
    down = len(shapes) * (len(modes) // across)
    fig = Figure(figsize=(panel * across, (4.6 if across > 1 else 4.0) * down + 1.2))
    fig.set_layout_engine("constrained")
    grid = fig.subplots(down, across, squeeze=False)
    axes = [[grid.flat[i * len(modes) + j] for j in range(len(modes))] for i in range(len(shapes))]
    for i, shape in enumerate(shapes):
        # One scale per shape, so cold and warm compare at a glance.
        top = 1.15 * max(
            (
                max(r.gbps_logical, r.gbps_traffic)
                for r in results.rows
                if r.shape == shape and on_layout_plot(r)
            ),
            default=1.0,
        )
        for j, mode in enumerate(modes):
            ax = axes[i][j]
            ax.set_label(f"layouts {shape} {mode}")
            draw_layout_panel(ax, results, shape, mode, top)
            ax.set_title(f"{shape}, {MODE_NAMES[mode]}", loc="left", fontsize=11)
            if ax.get_subplotspec().is_first_col():
                ax.set_ylabel("effective bandwidth (GB/s)\nlogical bytes: 2 x M x N x size")
    handles = []
    if any(r.variant == "copy" for r in results.rows):
        handles.append(
            Patch(
                facecolor="white",
                edgecolor="#555555",
                hatch="///",
                label="contiguous() first: real traffic (the copy reads and writes x once more)",
            )
        )
    if any(r.variant == "roof" for r in results.rows):
        handles.append(Line2D([], [], color=ROOF, linestyle="--", label="roof: plain device copy"))
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False)
    _suptitle(
        fig,
        f"Softmax bandwidth by layout: {_whose(results)} (higher is better; best num_warps shown)",
    )
    return fig


def plot_backward(results: Results) -> Figure:
    """Effective GB/s (logical bytes: read y and dy, write dx) of each backward variant and
    num_warps, per shape, mode and layout, with fastest-to-slowest whiskers, under the roof."""
    _require_rows(results, BACKWARD)
    rows = [r for r in results.rows if r.variant in BACKWARD_VARIANTS]
    shapes = _ordered(r.shape for r in results.rows)
    modes = [m for m in MODES if any(r.mode == m for r in results.rows)]
    most_bars = max(len(backward_bars(rows, s, m)) for s in shapes for m in modes)
    width = min(COLUMN_INCHES, max(8.0, (0.66 * most_bars + 1.4) * len(modes)))
    fig = Figure(figsize=(width, 4.2 * len(shapes) + 1.4))
    fig.set_layout_engine("constrained")
    axes = fig.subplots(len(shapes), len(modes), squeeze=False)
    for i, shape in enumerate(shapes):
        roofs = {m: roof_row(results, shape, m) for m in modes}
        here = [r for r in rows if r.shape == shape]  # one scale per shape: cold beside warm
        top = scale_top(
            [r.gbps_logical for r in here],
            [gbps_span(r)[1] for r in here],
            [roof.gbps_logical for roof in roofs.values() if roof is not None],
        )
        for j, mode in enumerate(modes):
            ax = axes[i][j]
            ax.set_label(f"backward {shape} {mode}")
            title = f"{shape}, {MODE_NAMES[mode]}"
            roof = roofs[mode]
            if roof is not None:
                line = ax.axhline(roof.gbps_logical, color=ROOF, linestyle="--", linewidth=1.2)
                line.set_gid(f"roof:{shape}:{mode}")
                title += f"; roof {roof.gbps_logical:,.0f} GB/s"
            draw_backward_panel(ax, rows, shape, mode, top)
            ax.set_ylim(0, top)
            ax.set_title(title, loc="left", fontsize=11)
            if j == 0:
                ax.set_ylabel("effective bandwidth (GB/s)\nlogical bytes: 3 x M x N x size")
    present = {r.variant for r in rows}
    handles = [
        Patch(color=colour, label=f"{VARIANT_NAMES.get(v, v)}: {text}")
        for v, (text, colour) in BACKWARD_VARIANTS.items()
        if v in present
    ]
    handles.append(
        Line2D([], [], color=WHISKER, marker="_", markersize=10, label="fastest to slowest call")
    )
    if drew_off_scale(fig):
        handles.append(off_scale_handle("fastest call off the scale"))
    if any(r.variant == "roof" for r in results.rows):
        handles.append(Line2D([], [], color=ROOF, linestyle="--", label="roof: plain device copy"))
    fig.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False)
    _suptitle(fig, f"Softmax backward bandwidth: {_whose(results)} (higher is better)")
    return fig


PLOTS = {
    FORWARD: (("warps.png", plot_warps), ("layouts.png", plot_layouts)),
    BACKWARD: (("backward.png", plot_backward),),
}
"""The plots of each op's results, by file name."""


def roof_table(results: Results, mode: str = "cold") -> str:
    """Each variant's share of the roof for every shape and layout of a forward run, its best
    num_warps: the table the notebook's beyond section reads."""
    variants = [v for v in _ordered(r.variant for r in results.rows) if v != "roof"]
    lines = [f"{results.device}, {results.dtype}, {mode}: % of the roof (a plain device copy)"]
    lines.append(f"{'shape':<12}{'layout':<12}" + "".join(f"{v:>15}" for v in variants))
    for shape in _ordered(r.shape for r in results.rows):
        roof = roof_row(results, shape, mode)
        for layout in LAYOUTS:
            cells = []
            for variant in variants:
                row = best_row(results, shape, layout, mode, variant)
                share = (
                    ""
                    if row is None or roof is None
                    else f"{row.gbps_logical / roof.gbps_logical:.0%}"
                )
                cells.append(f"{share:>15}")
            lines.append(f"{shape:<12}{layout:<12}" + "".join(cells))
    return "\n".join(lines)


def save_plots(results: Results, folder: Path | str) -> list[Path]:
    """Write the plots of the run's op into `folder` (`warps.png` and `layouts.png` for the
    softmax, `backward.png` for its backward); return their paths."""
    _require_rows(results, results.op)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, plot in PLOTS[results.op]:
        path = out / name
        plot(results).savefig(path, dpi=DPI, format="png")
        paths.append(path)
    return paths


def _require_rows(results: Results, op: str) -> None:
    """ValueError unless `results` is a run of `op` with rows to plot."""
    if results.op != op:
        drawn_by = ", ".join(plot.__name__ for _, plot in PLOTS[results.op])
        raise ValueError(
            f"the results file is a run of {results.op}, not of {op}; draw it with {drawn_by}."
        )
    if not results.rows:
        raise ValueError(
            "the results file has no rows, so there is nothing to plot; run "
            f"{BENCHMARK_COMMAND.format(op=op)} on a CUDA machine to measure some."
        )


def _ordered(values: Iterable[str]) -> list[str]:
    """Distinct values in order of first appearance (the benchmark's order)."""
    return list(dict.fromkeys(values))


def _whose(results: Results) -> str:
    """Whose run this is: the kernels measured, the device and the dtype."""
    kernels = Path(results.impl).name
    for variant, impl in results.variant_impls.items():
        kernels += f" ({variant}: {Path(impl).name})"
    return f"{kernels} on {results.device}, {results.dtype}"


def _suptitle(fig: Figure, text: str) -> None:
    """The figure's title, wrapped to the figure's width (a narrow figure cuts a long line)."""
    chars = max(40, int(fig.get_figwidth() * 9))  # 13-point characters an inch, about
    fig.suptitle("\n".join(textwrap.wrap(text, chars)), fontsize=13)


def _message_figure(results: Results, message: str) -> Figure:
    fig = Figure(figsize=(7, 2))
    fig.text(0.5, 0.5, message, ha="center", va="center", fontsize=11)
    fig.suptitle(_whose(results))
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m learning.workshops.plots", description=__doc__.splitlines()[0]
    )
    parser.add_argument("results", help="a results file written by the benchmark")
    parser.add_argument(
        "--out",
        help="folder for the PNGs: warps.png and layouts.png, or backward.png for a backward run "
        "(default: the results file's folder)",
    )
    args = parser.parse_args(argv)
    try:
        results = load(args.results)
    except ResultsError as exc:
        command = BENCHMARK_COMMAND.format(op=FORWARD)
        sys.stderr.write(f"plots: {exc}; pass a file written by {command}.\n")
        return 2
    out = args.out or Path(args.results).parent
    try:
        paths = save_plots(results, out)
    except ValueError as exc:
        sys.stderr.write(f"plots: {exc}\n")
        return 2
    except OSError as exc:
        sys.stderr.write(
            f"plots: cannot write the plots to {out} ({exc.strerror}: {exc.filename}); "
            "choose another --out.\n"
        )
        return 2
    sys.stdout.write("".join(f"wrote {p}\n" for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
