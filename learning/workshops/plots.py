"""Plots of one benchmark run: the num_warps comparison, the layout comparison, the backward.

`plot_warps` shows, per shape and layout, the median time of 4 against 8 warps for the
direct and copy-first variants, with min-max whiskers. `plot_layouts` shows, per shape and
mode, the effective bandwidth (logical bytes) of each way to compute the softmax of a
transposed view, with the plain device copy as the roof; a run with `--variants` adds the
layout-aware kernel to both. `plot_backward` shows, for a run of
the backward (`--op strided_softmax_backward`), the bandwidth of every variant per shape,
layout and mode. Figures are built without pyplot, so they draw on a headless machine.

    python -m learning.workshops.plots results/local/i1.json --out results/local/plots
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from learning.workshops.measuring.results import (
    BACKWARD,
    FORWARD,
    LAYOUT_AWARE,
    LAYOUTS,
    TORCH_COMPILE,
    Results,
    ResultsError,
    Row,
    load,
)

MODES = ("cold", "warm")
MODE_NAMES = {"cold": "cold (L2 flushed)", "warm": "warm (back to back)"}
WARP_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#9d755d")
"""One colour per num_warps value, in increasing order of num_warps."""
WHISKER = "#333333"
ROOF = "#222222"
DPI = 130
COLUMN_INCHES = 12.5
"""The widest a figure is drawn: the notebook's column (1280 px) at 100 dpi, where a figure
wider than it is shrunk, and its tick labels with it."""
OFF_SCALE = 1.6
"""A whisker that ends past this many times the panel's highest median is not allowed to set
the axis: it is cut at the axis's edge, marked, and its end printed beside it."""
BENCHMARK_COMMAND = "`python -m learning.workshops.benchmark --op {op} --output FILE`"


@dataclass(frozen=True)
class Bar:
    """One bar of the layout plot: which rows it draws, its label and colour."""

    key: str
    variant: str
    layout: str
    label: str
    colour: str


LAYOUT_BARS = (
    Bar("direct-transpose", "direct", "transpose", "the kernel\non the transpose", "#e45756"),
    Bar("copy-transpose", "copy", "transpose", "contiguous() first,\nthen the kernel", "#f58518"),
    Bar("direct-contiguous", "direct", "contiguous", "the kernel\non a contiguous x", "#54a24b"),
    Bar(
        "torch_softmax-transpose",
        "torch_softmax",
        "transpose",
        "torch.softmax\non the transpose",
        "#4c78a8",
    ),
)
"""The bars of each layout panel, left to right; a bar without rows shows `not measured`."""
OPTIONAL_BARS = (
    Bar(
        f"{LAYOUT_AWARE}-transpose",
        LAYOUT_AWARE,
        "transpose",
        "layout-aware kernel\non the transpose",
        "#b279a2",
    ),
    Bar(
        f"{TORCH_COMPILE}-transpose",
        TORCH_COMPILE,
        "transpose",
        "torch.compile\non the transpose",
        "#72b7b2",
    ),
)
"""Bars drawn after LAYOUT_BARS only when the file has their rows (a run with --variants or
--torch-compile)."""

WARP_GROUPS = (
    ("direct", "transpose"),
    ("copy", "transpose"),
    (LAYOUT_AWARE, "transpose"),
    ("direct", "contiguous"),
    (LAYOUT_AWARE, "contiguous"),
)
"""The (variant, layout) pairs whose num_warps are compared, when the file has their rows."""
VARIANT_NAMES = {"direct": "direct", "copy": "copy first", LAYOUT_AWARE: "layout-aware"}

BACKWARD_VARIANTS = {
    "direct": ("the kernel on the views of y and dy", "#e45756"),
    "copy": ("y.contiguous() and dy.contiguous(), then the kernel", "#f58518"),
    "torch": ("torch's softmax backward on the views", "#4c78a8"),
}
"""The backward plot's bars in each layout group, left to right: legend text and colour."""
LAYOUT_NAMES = {"transpose": "transposed y and dy", "contiguous": "contiguous y and dy"}


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
    ratios = [max(1, len(_warp_groups(rows, lay))) for lay in layouts]

    width = min(COLUMN_INCHES, 2.5 + 1.6 * sum(ratios))
    fig = Figure(figsize=(width, 3.4 * len(shapes) + 1.2), layout="constrained")
    grid = fig.add_gridspec(len(shapes), len(layouts), width_ratios=ratios)
    for i, shape in enumerate(shapes):
        for j, layout in enumerate(layouts):
            ax = fig.add_subplot(grid[i, j])
            ax.set_label(f"warps {shape} {layout}")
            _draw_warps_panel(ax, rows, shape, layout, warps, colours)
            ax.set_title(f"{shape}, {layout} view", loc="left", fontsize=11)
            ax.set_ylabel("median time (ms)")
    handles = [Patch(color=colours[w], label=f"num_warps={w}") for w in warps]
    handles.append(Line2D([], [], color=WHISKER, marker="_", markersize=10, label="min to max"))
    if _drew_off_scale(fig):
        handles.append(_off_scale_handle("slowest call off the scale"))
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
    panel = max(5.8, 1.4 * len(_layout_bars(results)) + 0.3)
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
                if r.shape == shape and _on_layout_plot(r)
            ),
            default=1.0,
        )
        for j, mode in enumerate(modes):
            ax = axes[i][j]
            ax.set_label(f"layouts {shape} {mode}")
            _draw_layout_panel(ax, results, shape, mode, top)
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
    most_bars = max(len(_backward_bars(rows, s, m)) for s in shapes for m in modes)
    width = min(COLUMN_INCHES, max(8.0, (0.66 * most_bars + 1.4) * len(modes)))
    fig = Figure(figsize=(width, 4.2 * len(shapes) + 1.4))
    fig.set_layout_engine("constrained")
    axes = fig.subplots(len(shapes), len(modes), squeeze=False)
    for i, shape in enumerate(shapes):
        roofs = {m: _roof(results, shape, m) for m in modes}
        here = [r for r in rows if r.shape == shape]  # one scale per shape: cold beside warm
        top = _scale_top(
            [r.gbps_logical for r in here],
            [_gbps_span(r)[1] for r in here],
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
            _draw_backward_panel(ax, rows, shape, mode, top)
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
    if _drew_off_scale(fig):
        handles.append(_off_scale_handle("fastest call off the scale"))
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
        roof = _roof(results, shape, mode)
        for layout in LAYOUTS:
            cells = []
            for variant in variants:
                row = _best(results, shape, layout, mode, variant)
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


def _warp_groups(rows: list[Row], layout: str) -> list[tuple[str, str]]:
    """The (variant, mode) groups measured for `layout`, in a fixed order."""
    present = {(r.variant, r.mode) for r in rows if r.layout == layout}
    return [(v, m) for v, lay in WARP_GROUPS if lay == layout for m in MODES if (v, m) in present]


def _draw_warps_panel(
    ax: Axes, rows: list[Row], shape: str, layout: str, warps: list[int], colours: dict
) -> None:
    groups = _warp_groups(rows, layout)
    width = 0.8 / len(warps)
    by_key = {
        (r.variant, r.mode, r.num_warps): r for r in rows if (r.shape, r.layout) == (shape, layout)
    }
    top = _scale_top([r.median_ms for r in by_key.values()], [r.max_ms for r in by_key.values()])
    for g, (variant, mode) in enumerate(groups):
        for k, w in enumerate(warps):
            row = by_key.get((variant, mode, w))
            if row is None:
                continue
            x = g + (k - (len(warps) - 1) / 2) * width
            err = [[row.median_ms - row.min_ms], [row.max_ms - row.median_ms]]
            bars = ax.bar(
                x,
                row.median_ms,
                width * 0.92,
                color=colours[w],
                yerr=err,
                error_kw={"ecolor": WHISKER, "capsize": 3, "elinewidth": 1},
            )
            gid = f"{shape}:{layout}:{variant}:{mode}:{w}"
            bars.patches[0].set_gid(f"warps:{gid}")
            _median_label(ax, x, row.median_ms, f"{row.median_ms:.3g}", f"median:{gid}")
            if row.max_ms > top:
                _mark_off_scale(ax, x, top, f"{row.max_ms:.3g}", f"off-scale:{gid}")
    ax.set_xticks(range(len(groups)), [f"{VARIANT_NAMES[v]}\n{m}" for v, m in groups])
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.set_ylim(0, top)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    if not by_key:
        ax.text(0.5, 0.5, "not measured", transform=ax.transAxes, ha="center", color="#888888")


def _best(results: Results, shape: str, layout: str, mode: str, variant: str) -> Row | None:
    """The fastest row of `variant` (over num_warps) for one shape, layout and mode."""
    rows = [
        r
        for r in results.rows
        if (r.variant, r.shape, r.layout, r.mode) == (variant, shape, layout, mode)
    ]
    return min(rows, key=lambda r: r.median_ms, default=None)


def _roof(results: Results, shape: str, mode: str) -> Row | None:
    """The fastest roof row for one shape and mode.

    The benchmark times a plain copy of a contiguous tensor beside every configuration, so a
    roof row may carry either layout; the fastest is the ceiling.
    """
    roofs = [r for r in results.rows if (r.variant, r.shape, r.mode) == ("roof", shape, mode)]
    return min(roofs, key=lambda r: r.median_ms, default=None)


def _on_layout_plot(row: Row) -> bool:
    """Whether the layout plot draws `row`: one of its bars, or the roof."""
    if row.variant == "roof":
        return True
    bars = LAYOUT_BARS + OPTIONAL_BARS
    return any((row.variant, row.layout) == (b.variant, b.layout) for b in bars)


def _layout_bars(results: Results) -> tuple[Bar, ...]:
    """The layout panels' bars: LAYOUT_BARS, then each optional bar the file has rows for."""
    present = {(r.variant, r.layout) for r in results.rows}
    return LAYOUT_BARS + tuple(b for b in OPTIONAL_BARS if (b.variant, b.layout) in present)


def _draw_layout_panel(ax: Axes, results: Results, shape: str, mode: str, top: float) -> None:
    bars = _layout_bars(results)
    drawn = [
        (x, bar, _best(results, shape, bar.layout, mode, bar.variant)) for x, bar in enumerate(bars)
    ]
    roof = _roof(results, shape, mode)
    for x, bar, row in drawn:
        if row is None:
            ax.text(x, 0, "not\nmeasured", ha="center", va="bottom", fontsize=8, color="#888888")
            continue
        patch = ax.bar(x, row.gbps_logical, 0.7, color=bar.colour).patches[0]
        patch.set_gid(f"layouts:{shape}:{mode}:{bar.key}")
        label = f"{row.gbps_logical:,.0f} GB/s"
        if row.num_warps:
            label += f"\n{row.num_warps} warps"
        if bar.variant == "copy" and row.gbps_traffic > row.gbps_logical:
            _draw_traffic(ax, x, row, bar, f"layouts:{shape}:{mode}:{bar.key}-traffic", label, top)
        else:
            _label_bar(ax, x, row.gbps_logical, label, top)
    if roof is not None:
        line = ax.axhline(roof.gbps_logical, color=ROOF, linestyle="--", linewidth=1.2)
        line.set_gid(f"roof:{shape}:{mode}")
        ax.annotate(
            f"roof {roof.gbps_logical:,.0f} GB/s",
            (1.0, roof.gbps_logical),
            xycoords=("axes fraction", "data"),
            xytext=(-4, 3),
            textcoords="offset points",
            ha="right",
            va="bottom",
            fontsize=8,
        )
    ax.set_xticks(range(len(bars)), [b.label for b in bars], fontsize=9)
    ax.set_xlim(-0.6, len(bars) - 0.4)
    ax.set_ylim(0, top)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def _draw_traffic(ax: Axes, x: float, row: Row, bar: Bar, gid: str, label: str, top: float) -> None:
    """Stack the copy's extra traffic, hatched, on its logical bar, and label both values."""
    extra = row.gbps_traffic - row.gbps_logical
    patch = ax.bar(
        x, extra, 0.7, bottom=row.gbps_logical, facecolor="white", edgecolor=bar.colour, hatch="///"
    ).patches[0]
    patch.set_gid(gid)
    real = f"real traffic\n{row.gbps_traffic:,.0f} GB/s"
    if min(extra, row.gbps_logical) < 0.2 * top:
        # Too short to hold labels inside: one label above the whole stack.
        _label_bar(ax, x, row.gbps_traffic, f"{real}\nlogical {label}", top=float("inf"))
        return
    _label_bar(ax, x, row.gbps_logical, label, top)
    ax.annotate(
        real,
        (x, row.gbps_traffic),
        xytext=(0, -4),
        textcoords="offset points",
        ha="center",
        va="top",
        fontsize=8,
        bbox={"facecolor": "white", "edgecolor": "none", "pad": 1},
    )


def _backward_bars(rows: list[Row], shape: str, mode: str) -> list[Row]:
    """One panel's bars in drawing order: per layout, each variant by increasing num_warps."""
    order = {v: k for k, v in enumerate(BACKWARD_VARIANTS)}
    panel = [r for r in rows if (r.shape, r.mode) == (shape, mode)]
    layouts = {lay: k for k, lay in enumerate(LAYOUT_NAMES)}
    return sorted(panel, key=lambda r: (layouts[r.layout], order[r.variant], r.num_warps or 0))


def _gbps_span(row: Row) -> tuple[float, float]:
    """The GB/s of the row's slowest and fastest calls."""
    return (
        row.gbps_logical * row.median_ms / row.max_ms,
        row.gbps_logical * row.median_ms / row.min_ms,
    )


def _draw_backward_panel(ax: Axes, rows: list[Row], shape: str, mode: str, top: float) -> None:
    """Bars grouped by layout, a gap between the groups, each group named under its ticks,
    on an axis up to `top` (a fastest call past it is marked at the edge)."""
    ticks, labels, groups = [], [], {}
    x = 0.0
    for row in _backward_bars(rows, shape, mode):
        if groups and row.layout not in groups:
            x += 0.6  # the gap between layouts
        groups.setdefault(row.layout, []).append(x)
        slowest, fastest = _gbps_span(row)
        err = [[row.gbps_logical - slowest], [fastest - row.gbps_logical]]
        bars = ax.bar(
            x,
            row.gbps_logical,
            0.7,
            color=BACKWARD_VARIANTS[row.variant][1],
            yerr=err,
            error_kw={"ecolor": WHISKER, "capsize": 3, "elinewidth": 1},
        )
        gid = f"{shape}:{mode}:{row.layout}:{row.variant}:{row.num_warps}"
        bars.patches[0].set_gid(f"backward:{gid}")
        label = f"{row.gbps_logical:,.0f}\n{row.median_ms:.3g} ms"
        _median_label(ax, x, row.gbps_logical, label, f"median:{gid}")
        if fastest > top:
            _mark_off_scale(ax, x, top, f"{fastest:,.0f}", f"off-scale:{gid}")
        ticks.append(x)
        warps = f"\n{row.num_warps} warps" if row.num_warps else ""
        labels.append(f"{VARIANT_NAMES.get(row.variant, row.variant)}{warps}")
        x += 1.0
    ax.set_xticks(ticks, labels, fontsize=8)
    named = ax.secondary_xaxis("bottom")
    centres = [sum(xs) / len(xs) for xs in groups.values()]
    named.set_xticks(centres, [f"\n\n{LAYOUT_NAMES[lay]}" for lay in groups], fontsize=9)
    named.tick_params(axis="x", length=0, pad=6)
    named.spines["bottom"].set_visible(False)
    ax.set_xlim(-0.6, max(ticks, default=0.0) + 0.6)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    if not ticks:
        ax.text(0.5, 0.5, "not measured", transform=ax.transAxes, ha="center", color="#888888")


def _scale_top(medians: list[float], ends: list[float], floors: Iterable[float] = ()) -> float:
    """The top of a panel's axis, set by its medians: room above the highest for its label,
    every whisker end within OFF_SCALE of it, and `floors` (a roof line) in view."""
    highest = max(medians, default=1.0)
    kept = [end for end in ends if end <= OFF_SCALE * highest]
    return 1.1 * max([1.22 * highest, *kept, *floors])


def _median_label(ax: Axes, x: float, median: float, text: str, gid: str) -> None:
    """Write a bar's value just above its top, the median, on a white plate so that the
    whisker through it does not cross the digits."""
    ax.annotate(
        text,
        (x, median),
        xytext=(0, 3),
        textcoords="offset points",
        ha="center",
        va="bottom",
        fontsize=8,
        bbox={
            "boxstyle": "round,pad=0.15",
            "facecolor": "white",
            "edgecolor": "none",
            "alpha": 0.85,
        },
        gid=gid,
    )


def _mark_off_scale(ax: Axes, x: float, top: float, end: str, gid: str) -> None:
    """Mark a whisker cut at the axis's edge: a triangle on the edge, its end beside it."""
    ax.plot([x], [top], marker="^", color=WHISKER, markersize=5, clip_on=False, gid=gid)
    ax.annotate(
        end,
        (x, top),
        xytext=(4, -2),
        textcoords="offset points",
        ha="left",
        va="top",
        fontsize=7.5,
        color=WHISKER,
    )


def _drew_off_scale(fig: Figure) -> bool:
    """Whether any panel of `fig` has a whisker cut at its edge (`_mark_off_scale`)."""
    return any(str(line.get_gid()).startswith("off-scale:") for ax in fig.axes for line in ax.lines)


def _off_scale_handle(label: str) -> Line2D:
    """The legend's entry for `_mark_off_scale`'s triangle."""
    return Line2D([], [], color=WHISKER, marker="^", markersize=5, linestyle="none", label=label)


def _label_bar(ax: Axes, x: float, height: float, label: str, top: float) -> None:
    """Write `label` inside the top of a tall bar (clear of the roof line), above a short one."""
    inside = height > 0.2 * top
    ax.annotate(
        label,
        (x, height),
        xytext=(0, -4 if inside else 3),
        textcoords="offset points",
        ha="center",
        va="top" if inside else "bottom",
        fontsize=8,
        color="white" if inside else "black",
        fontweight="bold" if inside else None,
    )


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
