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

import matplotlib
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

CORNER = 16
"""Largest number of logical rows and columns drawn; bigger views show their top-left corner."""

STRIP_LINE = 32
"""Storage cells per line of the strip before it wraps onto the next line."""

STRIP_LABELLED = 256
"""Longest strip drawn cell by cell with index labels; longer ones are drawn as a bar."""

STRIP_CELL_MAX = 0.55
"""Widest a storage cell is drawn, in inches, so short strips stay compact."""

STRAY = "#d62728"
"""The colour of a storage index a kernel read outside the view."""
GREY = "#e4e4e4"
GREY_TEXT = "#8a8a8a"
EDGE = "#4d4d4d"


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
    index = _indices(x, shown_rows, shown_cols)
    values = x.detach()[:shown_rows, :shown_cols].cpu().tolist()
    stray = stray if stray is not None and stray >= 0 else None
    strip_len = max(_strip_length(x, index), stray + 1 if stray is not None else 0)

    if ax_grid is None:
        fig, ax_grid, ax_storage = _new_figure(shown_rows, shown_cols, strip_len)
    else:
        fig = ax_grid.figure
    colours = _row_colours(shown_rows)
    reads = Counter(s for line in index for s in line)

    _draw_grid(ax_grid, x, index, values, colours, reads)
    ax_grid.set_title(_title(x, title), fontsize=12, loc="left")
    _draw_storage(ax_storage, x, index, colours, reads, strip_len, name)
    if stray is not None:
        _mark_stray(ax_storage, x, stray, strip_len)
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


def _indices(x: torch.Tensor, rows: int, cols: int) -> list[list[int]]:
    """Storage index of every drawn logical element, row by row."""
    sr, sc = x.stride()
    off = x.storage_offset()
    return [[off + r * sr + c * sc for c in range(cols)] for r in range(rows)]


def _storage_length(x: torch.Tensor) -> int:
    return x.untyped_storage().nbytes() // x.element_size()


def _strip_length(x: torch.Tensor, index: list[list[int]]) -> int:
    """Cells to draw: through the last one read, and the whole storage when it is short."""
    last = max((s for line in index for s in line), default=-1)
    whole = _storage_length(x)
    return max(last + 1, whole if whole <= STRIP_LABELLED else 0)


def _sizes(rows: int, cols: int, strip_len: int) -> tuple[float, float, float]:
    """The width of a view's picture and the heights of its grid and storage panels, in
    inches."""
    cell = 0.78 if cols <= 8 else 0.62
    grid_w = max(cols, 1) * cell
    grid_h = max(rows, 1) * cell * 0.8 + 1.3
    if strip_len <= STRIP_LABELLED:
        per_line = max(min(strip_len, STRIP_LINE), 1)
        lines = -(-max(strip_len, 1) // per_line)
        strip_w = per_line * 0.38
    else:
        strip_w = 10.0
    width = min(max(grid_w, strip_w, 6.5) + 1.2, 16.0)
    if strip_len <= STRIP_LABELLED:
        cell_w = min((width - 0.6) / per_line, STRIP_CELL_MAX)
        strip_h = _pitch(lines) * (lines - 1) * cell_w + 2.2 * cell_w + 1.0
    else:
        strip_h = 1.9
    return width, grid_h, strip_h


def _panels(fig, grid_h: float, strip_h: float) -> tuple[Axes, Axes]:
    """A view's two panels, the grid above the storage, in a figure or a subfigure."""
    ax_grid, ax_storage = fig.subplots(2, 1, height_ratios=[grid_h, strip_h])
    for ax in (ax_grid, ax_storage):
        ax.set_anchor("W")  # both panels and their captions start at the left edge
    return ax_grid, ax_storage


def _new_figure(rows: int, cols: int, strip_len: int) -> tuple[Figure, Axes, Axes]:
    width, grid_h, strip_h = _sizes(rows, cols, strip_len)
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
        sizes.append(_sizes(rows, cols, _strip_length(x, _indices(x, rows, cols))))
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


def _add(ax: Axes, patch: Rectangle) -> None:
    """Add a patch without recomputing data limits (each panel sets its own limits)."""
    ax.add_artist(patch)


def _pitch(lines: int) -> float:
    """Vertical distance between strip lines, in cell heights; wrapped lines need air."""
    return 1.9 if lines <= 1 else 2.4


def _row_colours(rows: int) -> list[tuple[float, float, float]]:
    """One distinct colour per logical row: tab10, then the pale half of tab20."""
    tab10 = list(matplotlib.colormaps["tab10"].colors)
    tab20 = list(matplotlib.colormaps["tab20"].colors)
    palette = [c for i, c in enumerate(tab10) if i != 7]  # tab10's grey reads as "unused"
    palette += [c for i, c in enumerate(tab20) if i % 2 and i != 15]
    return [palette[r % len(palette)] for r in range(rows)]


def _title(x: torch.Tensor, title: str | None) -> str:
    rows, cols = x.shape
    line = (
        f"shape {tuple(x.shape)}   stride {tuple(x.stride())}   storage_offset {x.storage_offset()}"
    )
    if rows > CORNER or cols > CORNER:
        line += f"\nonly the first {min(rows, CORNER)}x{min(cols, CORNER)} corner is drawn"
    return f"{title}\n{line}" if title else line


def _hatch(ax: Axes, left: float, top: float, width: float, height: float) -> None:
    """Hatch a cell to say that its address is shared with other logical elements."""
    _add(
        ax,
        Rectangle(
            (left, top),
            width,
            height,
            fill=False,
            hatch="/",
            edgecolor=(0, 0, 0, 0.45),
            linewidth=0,
            gid="hatch",
        ),
    )


def _draw_grid(
    ax: Axes,
    x: torch.Tensor,
    index: list[list[int]],
    values: list[list[object]],
    colours: list[tuple[float, float, float]],
    reads: Counter[int],
) -> None:
    """The logical grid, row 0 at the top; each cell names its storage index and value."""
    ax.set_label("grid")
    rows, cols = len(index), min(x.shape[1], CORNER)
    size = 10 if cols <= 8 else 8
    plate = {"facecolor": "white", "edgecolor": "none", "pad": 1.2, "alpha": 0.85}
    for r, line in enumerate(index):
        for c, s in enumerate(line):
            shared = reads[s] > 1
            _add(
                ax,
                Rectangle(
                    (c, r),
                    1,
                    1,
                    facecolor=colours[r],
                    alpha=0.55,
                    edgecolor="none",
                    gid=f"fill:{r},{c}",
                ),
            )
            if shared:
                _hatch(ax, c, r, 1, 1)
            _add(ax, Rectangle((c, r), 1, 1, fill=False, edgecolor=EDGE, linewidth=1))
            ax.text(
                c + 0.5,
                r + 0.34,
                f"idx {s}",
                ha="center",
                va="center",
                fontsize=size,
                fontweight="bold",
                gid=f"index:{r},{c}",
                bbox=plate if shared else None,
            )
            ax.text(
                c + 0.5,
                r + 0.72,
                f"val {_fmt(values[r][c])}",
                ha="center",
                va="center",
                fontsize=size - 1,
                color="#222222",
                gid=f"value:{r},{c}",
                bbox=plate if shared else None,
            )
    empty = rows == 0 or cols == 0
    width = max(cols, 4) if empty else cols
    if empty:
        _add(
            ax,
            Rectangle(
                (0, 0), width, max(rows, 1), fill=False, edgecolor=EDGE, linestyle="--", linewidth=1
            ),
        )
        what = "rows" if x.shape[0] == 0 else "columns"
        ax.text(
            width / 2,
            max(rows, 1) / 2,
            f"no {what}: shape {tuple(x.shape)}\nhas no elements to read",
            ha="center",
            va="center",
            fontsize=10,
            style="italic",
            gid="empty-note",
        )
    ax.set_xlim(0, width)
    ax.set_ylim(max(rows, 1), 0)
    ax.set_aspect(0.8)
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.set_xticks([c + 0.5 for c in range(cols)], [str(c) for c in range(cols)])
    ax.set_yticks([r + 0.5 for r in range(rows)], [str(r) for r in range(rows)])
    for r, label in enumerate(ax.get_yticklabels()):
        label.set_fontweight("bold")
        label.set_bbox({"facecolor": colours[r], "alpha": 0.55, "edgecolor": "none", "pad": 2})
    ax.tick_params(length=0, labelsize=10, pad=4)
    ax.set_xlabel("logical column", fontsize=10)
    ax.set_ylabel("logical row", fontsize=10)
    for spine in ax.spines.values():
        spine.set_visible(False)


def _readers(index: list[list[int]]) -> dict[int, list[int]]:
    """For each storage index read, the logical rows that read it, in row order."""
    found: dict[int, list[int]] = {}
    for r, line in enumerate(index):
        for s in line:
            rows_here = found.setdefault(s, [])
            if r not in rows_here:
                rows_here.append(r)
    return found


def _draw_storage(
    ax: Axes,
    x: torch.Tensor,
    index: list[list[int]],
    colours: list[tuple[float, float, float]],
    reads: Counter[int],
    length: int,
    name: str = "x",
) -> None:
    """The storage strip: each cell coloured by the rows that read it, grey where none does;
    `name` is the tensor's name in the pointer's label."""
    ax.set_label("storage")
    readers = _readers(index)
    ax.set_title(_storage_title(x, length, reads), fontsize=9.5, loc="left")
    ax.set_axis_off()
    if length == 0:
        ax.text(
            0.5,
            0.5,
            "the storage is empty",
            ha="center",
            va="center",
            fontsize=10,
            transform=ax.transAxes,
            gid="empty-storage",
        )
        return
    if length > STRIP_LABELLED:
        _draw_bar(ax, readers, colours, reads, length)
        return
    per_line = min(length, STRIP_LINE)
    lines = -(-length // per_line)
    pitch = _pitch(lines)

    def corner(s: int) -> tuple[int, float]:
        return s % per_line, (s // per_line) * pitch + 0.55

    plate = {"facecolor": "white", "edgecolor": "none", "pad": 0.8, "alpha": 0.85}
    for s in range(length):
        left, top = corner(s)
        rows_here = readers.get(s, [])
        if rows_here:  # one horizontal band per reading row
            band = 1 / len(rows_here)
            for k, r in enumerate(rows_here):
                _add(
                    ax,
                    Rectangle(
                        (left, top + k * band),
                        1,
                        band,
                        facecolor=colours[r],
                        alpha=0.55,
                        edgecolor="none",
                        gid=f"read:{s}:{r}",
                    ),
                )
        else:
            _add(
                ax,
                Rectangle((left, top), 1, 1, facecolor=GREY, edgecolor="none", gid=f"unread:{s}"),
            )
        shared = reads[s] > 1
        if shared:
            _hatch(ax, left, top, 1, 1)
            ax.text(
                left + 0.5,
                top - 0.08,
                f"\u00d7{reads[s]}",
                ha="center",
                va="bottom",
                fontsize=8,
                fontweight="bold",
                gid=f"shared:{s}",
            )
        _add(ax, Rectangle((left, top), 1, 1, fill=False, edgecolor=EDGE, linewidth=0.8))
        ax.text(
            left + 0.5,
            top + 0.5,
            str(s),
            ha="center",
            va="center",
            fontsize=8 if s < 100 else 6.5,
            color="black" if rows_here else GREY_TEXT,
            fontweight="bold" if rows_here else "normal",
            gid=f"cell:{s}",
            bbox=plate if shared else None,
        )
    offset = x.storage_offset()
    if offset < length and x.numel():
        left, top = corner(offset)
        ax.annotate(
            f"{name}.data_ptr() \u2192 index {offset}",
            xy=(left + 0.5, top + 1.02),
            xytext=(left + 0.1 if left < per_line / 2 else left + 0.9, top + 1.6),
            ha="left" if left < per_line / 2 else "right",
            va="center",
            fontsize=8,
            color="#b22222",
            gid="pointer",
            arrowprops={"arrowstyle": "->", "color": "#b22222", "shrinkA": 0, "shrinkB": 0},
        )
    ax.set_xlim(-0.1, per_line + 0.1)
    ax.set_ylim((lines - 1) * pitch + 0.55 + 1.9, 0)
    ax.set_aspect("equal")


def _mark_stray(ax: Axes, x: torch.Tensor, stray: int, length: int) -> None:
    """Mark storage index `stray`, which the kernel read outside the view, in red on the strip
    drawn by `_draw_storage`, and say so under its title."""
    beyond = stray >= _storage_length(x)
    where = "past the storage's end" if beyond else "outside the view"
    said = f"red = index {stray}, which the kernel read, {where}"
    ax.set_title(f"{ax.get_title(loc='left')}\n{said}", fontsize=9.5, loc="left", color="black")
    if length > STRIP_LABELLED:
        ax.vlines([stray + 0.5], -0.25, 1.25, colors=STRAY, linewidth=2.5, gid=f"stray:{stray}")
        return
    per_line = min(length, STRIP_LINE)
    left, top = stray % per_line, (stray // per_line) * _pitch(-(-length // per_line)) + 0.55
    _add(
        ax,
        Rectangle(
            (left, top), 1, 1, fill=False, edgecolor=STRAY, linewidth=2.6, gid=f"stray:{stray}"
        ),
    )


def _draw_bar(
    ax: Axes,
    readers: dict[int, list[int]],
    colours: list[tuple[float, float, float]],
    reads: Counter[int],
    length: int,
) -> None:
    """A storage too long to label cell by cell: a grey bar with a coloured line per read."""
    ax.set_axis_on()
    _add(ax, Rectangle((0, 0), length, 1, facecolor=GREY, edgecolor=EDGE, linewidth=0.8))
    cells = sorted(readers)
    ax.vlines(
        [s + 0.5 for s in cells],
        0,
        1,
        colors=[colours[readers[s][0]] for s in cells],
        linewidth=1.5,
        gid="reads",
    )
    shared = [s + 0.5 for s in cells if reads[s] > 1]
    if shared:
        ax.plot(shared, [-0.15] * len(shared), "v", color=EDGE, markersize=4, gid="shared")
    ax.set_xlim(0, length)
    ax.set_ylim(1.05, -0.35)
    ax.set_yticks([])
    ax.set_xlabel("storage index", fontsize=9)
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)


def _storage_title(x: torch.Tensor, length: int, reads: Counter[int]) -> str:
    """What the strip shows, and how to read its colours, in a few short lines."""
    whole = _storage_length(x)
    corner_only = x.shape[0] > CORNER or x.shape[1] > CORNER
    noun = "element" if whole == 1 else "elements"
    if not x.numel():  # no element reads anything: no colours to explain
        empty = "no rows" if not x.shape[0] else "no columns"
        drawn = f"cells 0 to {length - 1} drawn" if length else "no cell drawn"
        return f"storage: {whole} {noun}, {drawn}; the view has {empty}, so it reads none"
    lines = [f"storage: {whole} {noun} in one line; cells 0 to {max(length - 1, 0)} drawn"]
    if corner_only:
        lines[0] += " (as far as the drawn corner reads)"
        lines.append("only reads by the drawn corner are coloured; the rest of the view reads more")
    elif length < whole:
        lines[0] += f"; {length} to {whole - 1} are not read"
    reader = "the drawn corner" if corner_only else "the view"
    lines.append(f"colour = the logical row that reads the cell, grey = not read by {reader}")
    shared = [n for n in reads.values() if n > 1]
    if shared:
        why = "stride 0" if 0 in x.stride() else "overlapping strides"
        lines.append(f"hatched, \u00d7N = one address read by N logical elements ({why})")
    if STRIP_LINE < length <= STRIP_LABELLED:
        lines.append(f"the strip wraps like text: index {STRIP_LINE} follows {STRIP_LINE - 1}")
    return "\n".join(lines)


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)
