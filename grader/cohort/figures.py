"""The report's plots in page order: each PNG's file name, caption and how it is drawn."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from grader.cohort.plots import plot_hints, plot_pass_rates, plot_scores
from grader.cohort.records import Report
from grader.cohort.speed_plots import plot_bandwidth, plot_kernel_vs_reference, plot_speedup
from grader.cohort.summary import cells_needing_gpu

DPI = 130


@dataclass(frozen=True)
class Plot:
    """One PNG of the report: its file name, what it shows, and how it is drawn."""

    name: str
    caption: str
    draw: Callable[[Report], Figure]


PLOTS = (
    Plot("scores.png", "Total points of each graded submission.", lambda r: plot_scores(r.table)),
    Plot(
        "pass_rates.png",
        "Share of graded students with full marks on each test cell, in notebook order.",
        lambda r: plot_pass_rates(r.table, cells_needing_gpu(r)),
    ),
    Plot(
        "hints.png",
        "How many students each hint fired for: the bugs the cohort made.",
        lambda r: plot_hints(r.hints, r.summary.with_hints),
    ),
    Plot(
        "speedup.png",
        "Each student's kernel time over the reference's per hidden shape (GPU timing "
        "sidecars), and direct against copy-first by num_warps (benchmark file).",
        lambda r: plot_speedup(r.timing, r.benchmark),
    ),
    Plot(
        "kernel_vs_reference.png",
        "Each student's median time against the reference's, same GPU, interleaved.",
        lambda r: plot_kernel_vs_reference(r.timing),
    ),
    Plot(
        "bandwidth.png",
        "Effective GB/s of each student's kernel against the device-copy roof.",
        lambda r: plot_bandwidth(r.timing, r.benchmark),
    ),
)
"""The report's plots, in the order the page shows them."""


def save_plots(report: Report, out: Path) -> list[Path]:
    """Draw every plot of PLOTS into `out`; return the PNG paths in order."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for plot in PLOTS:
        path = out / plot.name
        plot.draw(report).savefig(path, dpi=DPI, format="png")
        paths.append(path)
    return paths
