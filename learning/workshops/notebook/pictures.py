"""Pictures of how a 2-D view maps onto its flat storage.

`draw_view` draws two panels: the logical grid, each cell labelled with the storage index
it reads (`storage_offset + row*stride[0] + col*stride[1]`) and its value, and the storage
as a strip of cells from index 0. Each logical row has one colour in both panels, so the
eye can follow row r into memory; storage cells that several elements read (stride 0) are
hatched and carry their read count. A `stray` index (one a kernel read outside the view, as
`check --draw` shows it) is marked in red on the strip, past the storage's end if it lies there.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from learning.workshops.notebook.picture_layout import CORNER, indices, panel_sizes, strip_length
from learning.workshops.notebook.picture_panels import (
    draw_grid,
    draw_storage,
    mark_stray,
    row_colours,
)


def draw_view(
    x: torch.Tensor,
    title: str | None = None,
    ax_grid: Axes | None = None,
    ax_storage: Axes | None = None,
    name: str = "x",
    stray: int | None = None,
) -> Figure:
    """Draw the logical grid of the 2-D view `x` above the storage cells it reads.

    Pass `ax_grid` and `ax_storage` together to draw into existing axes; otherwise a new
    figure is made; `name` is what the view is called in the picture; `stray`, a storage
    index a kernel read that the view does not, is marked on the strip. Returns the figure
    that holds the drawing.
    """
    _check(x)
    if (ax_grid is None) != (ax_storage is None):
        raise ValueError("pass both ax_grid and ax_storage, or neither.")
    rows, cols = x.shape
    shown_rows, shown_cols = min(rows, CORNER), min(cols, CORNER)
    index = indices(x, shown_rows, shown_cols)
    values = x.detach()[:shown_rows, :shown_cols].cpu().tolist()
    stray = stray if stray is not None and stray >= 0 else None
    strip_len = max(strip_length(x, index), stray + 1 if stray is not None else 0)

    if ax_grid is None:
        fig, ax_grid, ax_storage = _new_figure(shown_rows, shown_cols, strip_len)
    else:
        fig = ax_grid.figure
    colours = row_colours(shown_rows)
    reads = Counter(s for line in index for s in line)

    draw_grid(ax_grid, x, index, values, colours, reads)
    ax_grid.set_title(_title(x, title), fontsize=12, loc="left")
    draw_storage(ax_storage, x, index, colours, reads, strip_len, name)
    if stray is not None:
        mark_stray(ax_storage, x, stray, strip_len)
    return fig


def save_view(
    x: torch.Tensor | list[tuple[str, torch.Tensor]],
    path: str | os.PathLike[str],
    title: str | None = None,
    stray: int | None = None,
) -> Path:
    """Draw `x` with `draw_view` (or named views with `draw_views`) and save it as a PNG at
    `path`; return the path. `stray` is `draw_view`'s, for one view."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure = (
        draw_views(x, title, stray) if isinstance(x, list) else draw_view(x, title, stray=stray)
    )
    figure.savefig(out, dpi=130, format="png", bbox_inches="tight", pad_inches=0.2)
    return out


def _check(x: object) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"draw_view needs a torch.Tensor, got {type(x).__name__}.")
    if x.dim() != 2:
        raise ValueError(
            f"draw_view needs a 2-D view (rows, columns), got {x.dim()}-D with shape "
            f"{tuple(x.shape)}; index or reshape it to a matrix first."
        )


def _panels(fig, grid_h: float, strip_h: float) -> tuple[Axes, Axes]:
    """A view's two panels, the grid above the storage, in a figure or a subfigure."""
    ax_grid, ax_storage = fig.subplots(2, 1, height_ratios=[grid_h, strip_h])
    for ax in (ax_grid, ax_storage):
        ax.set_anchor("W")  # both panels and their captions start at the left edge
    return ax_grid, ax_storage


def _new_figure(rows: int, cols: int, strip_len: int) -> tuple[Figure, Axes, Axes]:
    width, grid_h, strip_h = panel_sizes(rows, cols, strip_len)
    fig = Figure(figsize=(width, grid_h + strip_h), layout="constrained")
    return fig, *_panels(fig, grid_h, strip_h)


def draw_views(
    views: list[tuple[str, torch.Tensor]], title: str | None = None, stray: int | None = None
) -> Figure:
    """Draw several named views side by side, each as `draw_view` draws one (the backward's
    y and dy: either may be the one misread), under one title; `stray` marks one view's."""
    if len(views) == 1:
        name, x = views[0]
        return draw_view(x, title, stray=stray)
    for _, x in views:
        _check(x)
    sizes = []
    for _, x in views:
        rows, cols = min(x.shape[0], CORNER), min(x.shape[1], CORNER)
        sizes.append(panel_sizes(rows, cols, strip_length(x, indices(x, rows, cols))))
    height = max(g + s for _, g, s in sizes) + (0.6 if title else 0.0)
    fig = Figure(figsize=(sum(w for w, _, _ in sizes), height), layout="constrained")
    widths = [w for w, _, _ in sizes]
    for sub, (name, x), (_, grid_h, strip_h) in zip(
        fig.subfigures(1, len(views), width_ratios=widths), views, sizes, strict=True
    ):
        draw_view(x, name, *_panels(sub, grid_h, strip_h), name=name)
    if title:
        fig.suptitle(title, fontsize=12, x=0.0, ha="left")
    return fig


def _title(x: torch.Tensor, title: str | None) -> str:
    rows, cols = x.shape
    line = (
        f"shape {tuple(x.shape)}   stride {tuple(x.stride())}   storage_offset {x.storage_offset()}"
    )
    if rows > CORNER or cols > CORNER:
        line += f"\nonly the first {min(rows, CORNER)}x{min(cols, CORNER)} corner is drawn"
    return f"{title}\n{line}" if title else line
