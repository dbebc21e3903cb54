"""The report's speed plots, from the GPU timing sidecars and the --benchmark file: each
student's time over the reference's, student against reference, and effective bandwidth.

A shape refused for its time (the physics floor, a disturbed reference) is no honest speed:
it is left out of all three, and each plot says how many it left out and where they are
listed; a wrong output is drawn as an x (its time is real, its output was not)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

from grader.cohort.style import COLOURS, NEEDS_GPU_PANEL, SHAPE_COLOURS, message
from grader.cohort.timings import REFUSED_SECTION, WRONG, graded_bands
from grader.grading.timing_record import Band
from learning.workshops.measuring.results import Results


def honest(timing: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows to draw, rows left out): a shape that earned its band or had a wrong output is
    drawn; one refused for its time (any other refusal) is left out."""
    drawn = timing["refusal"].isin(["", WRONG])
    return timing[drawn], timing[~drawn]


def _left_out(left: pd.DataFrame) -> str:
    """What a plot says of the refused shapes it left out, in two lines; "" when none."""
    if left.empty:
        return ""
    kinds = ", ".join(dict.fromkeys(left["refusal"]))
    n = len(left)
    return (
        f"not drawn, no honest speed: {n} refused shape{'s' * (n != 1)} ({kinds});\n"
        f'listed under "{REFUSED_SECTION}"'
    )


def _left_out_handle(left: pd.DataFrame) -> list[Line2D]:
    """A legend entry, no mark, saying which refused shapes the plot left out."""
    text = _left_out(left)
    return [Line2D([], [], linestyle="", label=text)] if text else []


def _all_refused(ax: Axes, left: pd.DataFrame) -> None:
    message(ax, f"every timed shape was refused:\n{_left_out(left)}")


def plot_speedup(timing: pd.DataFrame, benchmark: Results | None) -> Figure:
    """Left: each student's time / reference time per hidden shape (timing sidecars).
    Right: direct vs copy-first by num_warps and shape (the --benchmark file)."""
    students = timing["student"].nunique() if not timing.empty else 0
    fig = Figure(figsize=(14, max(5.0, 0.3 * students + 2.2)), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=(1.25, 1))
    left.set_label("cohort ratio")
    right.set_label("benchmark direct/copy")
    _draw_ratios(left, timing)
    _draw_direct_copy(right, benchmark)
    fig.suptitle(
        "Speed: each student against the reference, and reading in place against copying first",
        fontsize=13,
    )
    return fig


RATIO_TICKS = (0.25, 0.5, 1.0, 1.1, 1.5, 2.5, 5.0, 10.0)
BAND_SHADES = ("#e8f4e8", "#fbf3dc", "#fbe8d0", "#f8dcd6", "#f3cccc")
"""One shade per band of the timing policy, then one for slower than every band."""
WARP_COLOURS = SHAPE_COLOURS[:4]
"""One colour per num_warps on the direct/copy bars."""


def _draw_ratios(ax: Axes, timing: pd.DataFrame) -> None:
    """One row per student (slowest on top), one marker per hidden shape, bands shaded."""
    ax.set_title(
        "Student kernel time / reference time, per hidden shape\n"
        "(GPU timing cell: transposed fp32, 4 warps, cold L2; lower is faster)",
        loc="left",
        fontsize=10,
    )
    if timing.empty:
        message(ax, NEEDS_GPU_PANEL)
        return
    timing, left = honest(timing)
    if timing.empty:
        _all_refused(ax, left)
        return
    order = timing.groupby("student")["ratio"].apply(lambda r: np.exp(np.log(r).mean()))
    students = list(order.sort_values(kind="stable").index)
    low = min(0.8, timing["ratio"].min() * 0.8)
    high = max(1.6, timing["ratio"].max() * 1.25)
    _shade_bands(ax, low, high, graded_bands(timing))
    ax.axvline(1.0, color=COLOURS["reference"], linewidth=1)
    _scatter_ratios(ax, timing, students)
    ax.set_xscale("log")
    ax.set_xlim(low, high)
    ticks = [t for t in RATIO_TICKS if low <= t <= high]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_yticks(range(len(students)), students, fontsize=8)
    ax.set_ylim(-0.6, len(students) + 0.2)
    ax.set_xlabel(f"time / reference time (log scale; {len(students)} students with timing)")
    handles, _ = ax.get_legend_handles_labels()
    ax.legend(
        handles=handles + _left_out_handle(left),
        loc="upper left",
        bbox_to_anchor=(0, -0.1),
        ncols=3,
        fontsize=8,
        frameon=False,
    )


def _shade_bands(ax: Axes, low: float, high: float, bands: tuple[Band, ...]) -> None:
    """The bands the timings were scored with, shaded between `low` and `high`, labelled."""
    edges = (low, *(band.limit for band in bands), max(high, bands[-1].limit * 1.2))
    for (start, end), shade in zip(itertools.pairwise(edges), BAND_SHADES, strict=False):
        ax.axvspan(start, end, color=shade, zorder=0)
    for (start, end), band in zip(itertools.pairwise(edges), bands, strict=False):
        if start < high:
            middle = math.sqrt(start * min(end, high))
            ax.text(
                middle,
                0.995,
                band.label,
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="top",
                fontsize=8,
                color="#555555",
            )


def _scatter_ratios(ax: Axes, timing: pd.DataFrame, students: list[str]) -> None:
    """Each shape's ratios on its student's row, offset per shape; x where the output was wrong."""
    shapes = list(dict.fromkeys(timing["shape"]))
    for i, shape in enumerate(shapes):
        rows = timing[timing["shape"] == shape]
        y = [students.index(s) + (i - (len(shapes) - 1) / 2) * 0.18 for s in rows["student"]]
        ok = rows["correct"].to_numpy()
        colour = SHAPE_COLOURS[i % len(SHAPE_COLOURS)]
        ax.scatter(
            rows["ratio"][ok],
            np.array(y)[ok],
            color=colour,
            zorder=3,
            label=shape,
            gid=f"ratio:{shape}",
        )
        ax.scatter(rows["ratio"][~ok], np.array(y)[~ok], color=colour, marker="x", zorder=3)
    ax.scatter([], [], color="#555555", marker="x", label="wrong output after timing (0 points)")


def _draw_direct_copy(ax: Axes, benchmark: Results | None) -> None:
    """Copy-first time over direct time per shape and mode, one bar per num_warps."""
    if benchmark is None:
        ax.set_title("Direct vs copy-first, by num_warps", loc="left", fontsize=10)
        message(
            ax,
            "no benchmark results given:\npass --benchmark FILE (written by\n"
            "python -m learning.workshops.benchmark)",
        )
        return
    ax.set_title(
        f"Copy-first time / direct time on the transposed view\n"
        f"({benchmark.device}, {benchmark.impl};\n>1: reading the view in place wins)",
        loc="left",
        fontsize=10,
    )
    pairs = _direct_copy_pairs(benchmark)
    if not pairs:
        message(ax, "the benchmark file has no direct and copy rows\nfor the transposed view")
        return
    groups = list(dict.fromkeys(p[0] for p in pairs))
    warps = sorted({p[1] for p in pairs})
    width = 0.8 / len(warps)
    for i, w in enumerate(warps):
        xs = [groups.index(g) + (i - (len(warps) - 1) / 2) * width for g, pw, _ in pairs if pw == w]
        ys = [r for _, pw, r in pairs if pw == w]
        colour = WARP_COLOURS[i % len(WARP_COLOURS)]
        bars = ax.bar(xs, ys, width=width, color=colour, label=f"num_warps={w}")
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
    ax.axhline(1.0, color=COLOURS["reference"], linewidth=1)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylim(0, max(r for *_, r in pairs) * 1.2)
    ax.set_ylabel("copy-first time / direct time")
    ax.legend(loc="lower right", fontsize=8)


def _direct_copy_pairs(benchmark: Results) -> list[tuple[str, int, float]]:
    """(shape and mode, num_warps, copy-first time / direct time) of the transposed view."""
    pairs = []
    for direct in benchmark.rows:
        if direct.variant != "direct" or direct.layout != "transpose" or not direct.num_warps:
            continue
        try:
            copy = benchmark.find("copy", direct.shape, "transpose", direct.mode, direct.num_warps)
        except KeyError:
            continue
        pairs.append(
            (f"{direct.shape}\n{direct.mode}", direct.num_warps, copy.median_ms / direct.median_ms)
        )
    return pairs


def plot_kernel_vs_reference(timing: pd.DataFrame) -> Figure:
    """Each student's median time against the reference's, same GPU, per hidden shape."""
    fig = Figure(figsize=(7.5, 6.5), layout="constrained")
    ax = fig.add_subplot()
    ax.set_label("kernel vs reference")
    if timing.empty:
        ax.set_title("Student kernel time against the reference", loc="left")
        message(ax, NEEDS_GPU_PANEL)
        return fig
    full = graded_bands(timing)[0].limit
    timing, left = honest(timing)
    if timing.empty:
        ax.set_title("Student kernel time against the reference", loc="left")
        _all_refused(ax, left)
        return fig
    _scatter_times(ax, timing, full)
    times = pd.concat([timing["reference_ms"], timing["student_ms"]])
    low, high = times.min() * 0.7, times.max() * 1.4
    _time_guides(ax, low, high, full)
    ax.set_xlabel("reference median (ms; same GPU, interleaved with the student's)")
    ax.set_ylabel("student median (ms)")
    devices = ", ".join(sorted(timing["device"].unique()))
    ax.set_title(
        f"Student kernel time against the reference: {timing['student'].nunique()} students\n"
        f"({devices}; above the line is slower; names: more than {full:g}x off)",
        loc="left",
        fontsize=10,
    )
    handles, _ = ax.get_legend_handles_labels()
    ax.legend(
        handles=handles + _left_out_handle(left),
        title="hidden shape",
        fontsize=8,
        title_fontsize=8,
        loc="upper left",
    )
    return fig


def _scatter_times(ax: Axes, timing: pd.DataFrame, full: float) -> None:
    """Student against reference median per shape; names beyond the full-points band."""
    for i, (shape, rows) in enumerate(timing.groupby("shape", sort=False)):
        ok = rows["correct"].to_numpy()
        colour = SHAPE_COLOURS[i % len(SHAPE_COLOURS)]
        ax.scatter(
            rows["reference_ms"][ok],
            rows["student_ms"][ok],
            label=shape,
            gid=f"ms:{shape}",
            color=colour,
            zorder=3,
        )
        ax.scatter(
            rows["reference_ms"][~ok], rows["student_ms"][~ok], color=colour, marker="x", zorder=3
        )
        for row in rows.itertuples():
            if not full**-1 <= row.ratio <= full:
                _name(ax, row.student, (row.reference_ms, row.student_ms))


def _time_guides(ax: Axes, low: float, high: float, full: float) -> None:
    """y = x, the slowest time for full points, and log axes from `low` to `high` ms."""
    ax.plot(
        [low, high],
        [low, high],
        color=COLOURS["reference"],
        linewidth=1,
        label="y = x: as fast as the reference",
    )
    ax.plot(
        [low, high],
        [low * full, high * full],
        color=COLOURS["missing"],
        linestyle=":",
        linewidth=1,
        label=f"y = {full:g}x: slowest for full points",
    )
    ax.scatter([], [], color="#555555", marker="x", label="wrong output after timing")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ticks = _log_ticks(low, high)
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_locator(NullLocator())


def _name(ax: Axes, student: str, xy: tuple[float, float]) -> None:
    """Write a student's name beside their point."""
    ax.annotate(student, xy, xytext=(5, 0), textcoords="offset points", fontsize=8, va="center")


def plot_bandwidth(timing: pd.DataFrame, benchmark: Results | None, source: str) -> Figure:
    """GB/s of each student's kernel per hidden shape, under the copy roof of the benchmark
    results `source` names (`Report.benchmark_source`)."""
    fig = Figure(figsize=(9, 5.2), layout="constrained")
    ax = fig.add_subplot()
    ax.set_label("bandwidth")
    title = "Effective bandwidth per hidden shape (logical bytes: 2 x M x N x 4)"
    roof = _roof_gbps(benchmark)
    roof_text = (
        f"copy roof missing ({source})"
        if roof is None
        else f"roof: device copy, {roof[0]:.0f} GB/s\n({roof[1]}; from {source})"
    )
    if timing.empty:
        ax.set_title(title, loc="left")
        message(ax, f"{NEEDS_GPU_PANEL}\n\n{roof_text}")
        return fig
    full = graded_bands(timing)[0].limit
    timing, left = honest(timing)
    if timing.empty:
        ax.set_title(title, loc="left")
        _all_refused(ax, left)
        return fig
    shapes = list(dict.fromkeys(timing["shape"]))
    for x, shape in enumerate(shapes):
        rows = timing[timing["shape"] == shape].reset_index(drop=True)
        _scatter_gbps(ax, x, shape, rows, full)
    handles = _draw_roof(ax, roof, roof_text)
    ax.set_xticks(range(len(shapes)), shapes)
    ax.set_xlim(-0.6, len(shapes) - 0.4)
    ax.set_ylim(0, max(timing["student_gbps"].max(), roof[0] if roof else 0) * 1.2)
    ax.set_ylabel("GB/s (higher is better)")
    devices = ", ".join(sorted(timing["device"].unique()))
    left_out = _left_out(left).replace(";\n", "; ")  # the legend is full: under the title
    ax.set_title(
        f"{title}\n{timing['student'].nunique()} students, {devices}; "
        f"names: more than {full:g}x off the reference" + (f"\n{left_out}" if left_out else ""),
        loc="left",
        fontsize=10,
    )
    ax.legend(handles=handles, loc="upper left", fontsize=8, ncols=2)
    return fig


def _scatter_gbps(ax: Axes, x: int, shape: str, rows: pd.DataFrame, full: float) -> None:
    """One shape's students at `x`, spread out, under the reference's median GB/s."""
    offsets, ok = _jitter(len(rows)), rows["correct"].to_numpy()
    gbps = rows["student_gbps"].to_numpy()
    ax.scatter(x + offsets[ok], gbps[ok], color=COLOURS["public"], zorder=3, gid=f"gbps:{shape}")
    ax.scatter(x + offsets[~ok], gbps[~ok], color=COLOURS["bug"], marker="x", zorder=3)
    reference = float(rows["reference_gbps"].median())
    ax.hlines(reference, x - 0.4, x + 0.4, color=COLOURS["reference"], linewidth=2, zorder=2)
    for dx, row in zip(offsets, rows.itertuples(), strict=True):
        if not reference / full <= row.student_gbps <= reference * full:
            _name(ax, row.student, (x + dx, row.student_gbps))


def _draw_roof(ax: Axes, roof: tuple[float, str] | None, roof_text: str) -> list[Line2D]:
    """The copy roof's line, or a note that it is missing; the legend's handles."""
    handles = [
        Line2D([], [], color=COLOURS["public"], marker="o", linestyle="", label="a student"),
        Line2D(
            [],
            [],
            color=COLOURS["bug"],
            marker="x",
            linestyle="",
            label="a student, wrong output after timing",
        ),
        Line2D(
            [],
            [],
            color=COLOURS["reference"],
            linewidth=2,
            label="reference (median of its runs beside each student)",
        ),
    ]
    if roof is None:
        ax.text(
            0.99,
            0.97,
            roof_text,
            ha="right",
            va="top",
            transform=ax.transAxes,
            fontsize=9,
            color=COLOURS["bug"],
        )
        return handles
    ax.axhline(roof[0], color=COLOURS["reference"], linestyle="--", linewidth=1)
    return [*handles, Line2D([], [], color=COLOURS["reference"], linestyle="--", label=roof_text)]


def _log_ticks(low: float, high: float) -> list[float]:
    """1, 2, 3, 5 times powers of ten between `low` and `high`, for a readable log axis."""
    ticks = []
    for exponent in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        ticks += [m * 10.0**exponent for m in (1, 2, 3, 5) if low <= m * 10.0**exponent <= high]
    return [float(f"{t:.6g}") for t in ticks]


def _roof_gbps(benchmark: Results | None) -> tuple[float, str] | None:
    """The plain device copy's GB/s in the benchmark file (cold, median over shapes)."""
    if benchmark is None:
        return None
    rows = [r for r in benchmark.rows if r.variant == "roof"]
    cold = [r for r in rows if r.mode == "cold"] or rows
    if not cold:
        return None
    return float(np.median([r.gbps_logical for r in cold])), benchmark.device


def _jitter(count: int) -> np.ndarray:
    """Deterministic horizontal offsets, so points of one category do not hide each other."""
    if count <= 1:
        return np.zeros(count)
    return np.linspace(-0.3, 0.3, count)
