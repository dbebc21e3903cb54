"""The two panels of a view's picture, drawn into given axes: the logical grid (each cell
its storage index and value) and the storage strip (each cell coloured by the rows that read
it, hatched where several elements read it, a stray read marked in red), with the strip's
caption. `pictures` makes the figure around them.
"""

from __future__ import annotations

from collections import Counter

import matplotlib
import torch
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

from learning.workshops.notebook.picture_layout import (
    CORNER,
    STRIP_LABELLED,
    STRIP_LINE,
    line_pitch,
    reading_rows,
    storage_length,
)

STRAY = "#d62728"
"""The colour of a storage index a kernel read outside the view."""
GREY = "#e4e4e4"
GREY_TEXT = "#8a8a8a"
EDGE = "#4d4d4d"


def _add(ax: Axes, patch: Rectangle) -> None:
    """Add a patch without recomputing data limits (each panel sets its own limits)."""
    ax.add_artist(patch)


def row_colours(rows: int) -> list[tuple[float, float, float]]:
    """One distinct colour per logical row: tab10, then the pale half of tab20."""
    tab10 = list(matplotlib.colormaps["tab10"].colors)
    tab20 = list(matplotlib.colormaps["tab20"].colors)
    palette = [c for i, c in enumerate(tab10) if i != 7]  # tab10's grey reads as "unused"
    palette += [c for i, c in enumerate(tab20) if i % 2 and i != 15]
    return [palette[r % len(palette)] for r in range(rows)]


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


def draw_grid(
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


def draw_storage(
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
    readers = reading_rows(index)
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
    pitch = line_pitch(lines)

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


def mark_stray(ax: Axes, x: torch.Tensor, stray: int, length: int) -> None:
    """Mark storage index `stray`, which the kernel read outside the view, in red on the strip
    drawn by `draw_storage`, and say so under its title."""
    beyond = stray >= storage_length(x)
    where = "past the storage's end" if beyond else "outside the view"
    said = f"red = index {stray}, which the kernel read, {where}"
    ax.set_title(f"{ax.get_title(loc='left')}\n{said}", fontsize=9.5, loc="left", color="black")
    if length > STRIP_LABELLED:
        ax.vlines([stray + 0.5], -0.25, 1.25, colors=STRAY, linewidth=2.5, gid=f"stray:{stray}")
        return
    per_line = min(length, STRIP_LINE)
    left, top = stray % per_line, (stray // per_line) * line_pitch(-(-length // per_line)) + 0.55
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
    whole = storage_length(x)
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
