"""The report's plots in page order: each PNG's file name, caption and how it is drawn; the
speed plots only when some student has GPU timings, else one note says why they are not."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from grader.cohort.plots import plot_hints, plot_pass_rates, plot_scores
from grader.cohort.records import Report
from grader.cohort.speed_plots import plot_bandwidth, plot_kernel_vs_reference, plot_speedup
from grader.cohort.timings import REFUSED_SECTION
from grader.grading.timing_record import SIDECAR as TIMING_SIDECAR

DPI = 130
REFUSED = (
    "A wrong output is an x; a shape refused for its time (the physics floor, a disturbed "
    f'reference) is left out, no honest speed, and listed under "{REFUSED_SECTION}".'
)


@dataclass(frozen=True)
class Plot:
    """One PNG of the report: its file name, what it shows, how it is drawn, and whether it
    needs the GPU timing sidecars (without any it would be an empty placeholder)."""

    name: str
    caption: str
    draw: Callable[[Report], Figure]
    needs_timing: bool = False


PLOTS = (
    Plot("scores.png", "Total points of each graded submission.", lambda r: plot_scores(r.table)),
    Plot(
        "pass_rates.png",
        "Share of graded students with full marks on each required test cell, in notebook "
        "order; apart below, the optional sections' extra credit: earned, tried, skipped.",
        lambda r: plot_pass_rates(r.table),
    ),
    Plot(
        "hints.png",
        "How many students each hint fired for: the bugs the cohort made, in the required "
        "sections and, apart, the optional ones; grey: work left as its stub, not a bug.",
        lambda r: plot_hints(r.hints, r.summary.with_hints),
    ),
    Plot(
        "speedup.png",
        "Each student's kernel time over the reference's per hidden shape (GPU timing "
        "sidecars), and direct against copy-first by num_warps (benchmark file). " + REFUSED,
        lambda r: plot_speedup(r.timing, r.benchmark),
        needs_timing=True,
    ),
    Plot(
        "kernel_vs_reference.png",
        "Each student's median time against the reference's, same GPU, interleaved. " + REFUSED,
        lambda r: plot_kernel_vs_reference(r.timing),
        needs_timing=True,
    ),
    Plot(
        "bandwidth.png",
        "Effective GB/s of each student's kernel against the device-copy roof (the plot "
        "names the benchmark results the roof comes from). " + REFUSED,
        lambda r: plot_bandwidth(r.timing, r.benchmark, r.benchmark_source),
        needs_timing=True,
    ),
)
"""The report's plots, in the order the page shows them."""


def drawn_plots(report: Report) -> tuple[Plot, ...]:
    """The plots of PLOTS with data to draw: the speed plots need some student's timings."""
    return tuple(p for p in PLOTS if not (p.needs_timing and report.timing.empty))


def missing_plots_note(report: Report) -> str:
    """Which plots are not drawn and why; "" when every plot is."""
    drawn = drawn_plots(report)
    missing = [p.name for p in PLOTS if p not in drawn]
    if not missing:
        return ""
    why = (
        "the course was autograded without a CUDA device, so the timing cell could not run"
        if report.summary.no_gpu
        else f"no timing sidecar ({TIMING_SIDECAR}) holds measurements; each student's "
        "grading log says why"
    )
    return (
        f"Not drawn: {', '.join(missing)}. They show each student's GPU timings, and no "
        f"student has any: {why}. Autograde on a GPU machine to draw them."
    )


def save_plots(report: Report, out: Path) -> list[Path]:
    """Draw the plots of `drawn_plots` into `out` (removing an earlier report's PNG of any
    other); return the PNG paths in order."""
    out.mkdir(parents=True, exist_ok=True)
    drawn = drawn_plots(report)
    paths = []
    for plot in PLOTS:
        path = out / plot.name
        if plot in drawn:
            plot.draw(report).savefig(path, dpi=DPI, format="png")
            paths.append(path)
        else:
            path.unlink(missing_ok=True)
    return paths
