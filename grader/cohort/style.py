"""What every plot of the report shares: its colours and the panel that says what is missing."""

from __future__ import annotations

from matplotlib.axes import Axes

NEEDS_GPU = "needs a GPU: no timing sidecars in this course"
NEEDS_GPU_PANEL = f"{NEEDS_GPU}\n(autograde on a CUDA machine to time each student's kernel)"
COLOURS = {
    "public": "#6baed6",
    "hidden": "#08519c",
    "extra credit": "#54a24b",
    "bug": "#e45756",
    "partial": "#f2b447",
    "reference": "#222222",
    "missing": "#9a9a9a",
}
SHAPE_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#9d755d", "#72b7b2")
"""One colour per hidden shape, in the order the timing table first shows them."""


def message(ax: Axes, text: str) -> None:
    """An empty panel that says what is missing, and why."""
    ax.text(
        0.5,
        0.5,
        text,
        ha="center",
        va="center",
        transform=ax.transAxes,
        fontsize=11,
        color="#444444",
        wrap=True,
    )
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_color("#cccccc")
