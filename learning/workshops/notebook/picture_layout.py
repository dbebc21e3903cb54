"""Where a view's picture puts things: the corner of the view drawn, each element's storage
index, how much of the storage the strip shows and how it wraps, and the size of each panel
(`pictures` draws with them).
"""

from __future__ import annotations

import torch

CORNER = 16
"""Largest number of logical rows and columns drawn; bigger views show their top-left corner."""

STRIP_LINE = 32
"""Storage cells per line of the strip before it wraps onto the next line."""

STRIP_LABELLED = 256
"""Longest strip drawn cell by cell with index labels; longer ones are drawn as a bar."""

STRIP_CELL_MAX = 0.55
"""Widest a storage cell is drawn, in inches, so short strips stay compact."""


def indices(x: torch.Tensor, rows: int, cols: int) -> list[list[int]]:
    """Storage index of every drawn logical element, row by row."""
    sr, sc = x.stride()
    off = x.storage_offset()
    return [[off + r * sr + c * sc for c in range(cols)] for r in range(rows)]


def storage_length(x: torch.Tensor) -> int:
    return x.untyped_storage().nbytes() // x.element_size()


def strip_length(x: torch.Tensor, index: list[list[int]]) -> int:
    """Cells to draw: through the last one read, and the whole storage when it is short."""
    last = max((s for line in index for s in line), default=-1)
    whole = storage_length(x)
    return max(last + 1, whole if whole <= STRIP_LABELLED else 0)


def panel_sizes(rows: int, cols: int, strip_len: int) -> tuple[float, float, float]:
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
        strip_h = line_pitch(lines) * (lines - 1) * cell_w + 2.2 * cell_w + 1.0
    else:
        strip_h = 1.9
    return width, grid_h, strip_h


def line_pitch(lines: int) -> float:
    """Vertical distance between strip lines, in cell heights; wrapped lines need air."""
    return 1.9 if lines <= 1 else 2.4


def reading_rows(index: list[list[int]]) -> dict[int, list[int]]:
    """For each storage index read, the logical rows that read it, in row order."""
    found: dict[int, list[int]] = {}
    for r, line in enumerate(index):
        for s in line:
            rows_here = found.setdefault(s, [])
            if r not in rows_here:
                rows_here.append(r)
    return found
