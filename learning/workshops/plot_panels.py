"""One panel of a benchmark plot: the rows each bar shows, and how its bars, whiskers, value
labels, roof line and off-scale marks are drawn. The figures that lay panels out, with their
legends and titles, are `learning.workshops.plots`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from learning.workshops.measuring.results import LAYOUT_AWARE, TORCH_COMPILE, Results, Row

MODES = ("cold", "warm")
WHISKER = "#333333"
ROOF = "#222222"
OFF_SCALE = 1.6
"""A whisker that ends past this many times the panel's highest median is not allowed to set
the axis: it is cut at the axis's edge, marked, and its end printed beside it."""


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


def warp_groups(rows: list[Row], layout: str) -> list[tuple[str, str]]:
    """The (variant, mode) groups measured for `layout`, in a fixed order."""
    present = {(r.variant, r.mode) for r in rows if r.layout == layout}
    return [(v, m) for v, lay in WARP_GROUPS if lay == layout for m in MODES if (v, m) in present]


def draw_warps_panel(
    ax: Axes, rows: list[Row], shape: str, layout: str, warps: list[int], colours: dict
) -> None:
    groups = warp_groups(rows, layout)
    width = 0.8 / len(warps)
    by_key = {
        (r.variant, r.mode, r.num_warps): r for r in rows if (r.shape, r.layout) == (shape, layout)
    }
    top = scale_top([r.median_ms for r in by_key.values()], [r.max_ms for r in by_key.values()])
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


def best_row(results: Results, shape: str, layout: str, mode: str, variant: str) -> Row | None:
    """The fastest row of `variant` (over num_warps) for one shape, layout and mode."""
    rows = [
        r
        for r in results.rows
        if (r.variant, r.shape, r.layout, r.mode) == (variant, shape, layout, mode)
    ]
    return min(rows, key=lambda r: r.median_ms, default=None)


def roof_row(results: Results, shape: str, mode: str) -> Row | None:
    """The fastest roof row for one shape and mode.

    The benchmark times a plain copy of a contiguous tensor beside every configuration, so a
    roof row may carry either layout; the fastest is the ceiling.
    """
    roofs = [r for r in results.rows if (r.variant, r.shape, r.mode) == ("roof", shape, mode)]
    return min(roofs, key=lambda r: r.median_ms, default=None)


def on_layout_plot(row: Row) -> bool:
    """Whether the layout plot draws `row`: one of its bars, or the roof."""
    if row.variant == "roof":
        return True
    bars = LAYOUT_BARS + OPTIONAL_BARS
    return any((row.variant, row.layout) == (b.variant, b.layout) for b in bars)


def layout_bars(results: Results) -> tuple[Bar, ...]:
    """The layout panels' bars: LAYOUT_BARS, then each optional bar the file has rows for."""
    present = {(r.variant, r.layout) for r in results.rows}
    return LAYOUT_BARS + tuple(b for b in OPTIONAL_BARS if (b.variant, b.layout) in present)


def draw_layout_panel(ax: Axes, results: Results, shape: str, mode: str, top: float) -> None:
    bars = layout_bars(results)
    drawn = [
        (x, bar, best_row(results, shape, bar.layout, mode, bar.variant))
        for x, bar in enumerate(bars)
    ]
    roof = roof_row(results, shape, mode)
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


def backward_bars(rows: list[Row], shape: str, mode: str) -> list[Row]:
    """One panel's bars in drawing order: per layout, each variant by increasing num_warps."""
    order = {v: k for k, v in enumerate(BACKWARD_VARIANTS)}
    panel = [r for r in rows if (r.shape, r.mode) == (shape, mode)]
    layouts = {lay: k for k, lay in enumerate(LAYOUT_NAMES)}
    return sorted(panel, key=lambda r: (layouts[r.layout], order[r.variant], r.num_warps or 0))


def gbps_span(row: Row) -> tuple[float, float]:
    """The GB/s of the row's slowest and fastest calls."""
    return (
        row.gbps_logical * row.median_ms / row.max_ms,
        row.gbps_logical * row.median_ms / row.min_ms,
    )


def draw_backward_panel(ax: Axes, rows: list[Row], shape: str, mode: str, top: float) -> None:
    """Bars grouped by layout, a gap between the groups, each group named under its ticks,
    on an axis up to `top` (a fastest call past it is marked at the edge)."""
    ticks, labels, groups = [], [], {}
    x = 0.0
    for row in backward_bars(rows, shape, mode):
        if groups and row.layout not in groups:
            x += 0.6  # the gap between layouts
        groups.setdefault(row.layout, []).append(x)
        slowest, fastest = gbps_span(row)
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


def scale_top(medians: list[float], ends: list[float], floors: Iterable[float] = ()) -> float:
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


def drew_off_scale(fig: Figure) -> bool:
    """Whether any panel of `fig` has a whisker cut at its edge (`_mark_off_scale`)."""
    return any(str(line.get_gid()).startswith("off-scale:") for ax in fig.axes for line in ax.lines)


def off_scale_handle(label: str) -> Line2D:
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
