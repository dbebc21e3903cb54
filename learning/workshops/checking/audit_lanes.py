"""Where a block's active lanes fall in a matrix, told from their addresses alone: which lanes
run on past a row's last column, and which are whole rows past the last.

Consecutive lanes that step through a row and on into the next are that row's addresses
continued; a line of lanes along the block's column axis is one row, or a tile of one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from learning.workshops.checking.audit import Access


@dataclass(frozen=True)
class Columns:
    """How indices map to (row, column) of a matrix, for following lanes along a row.

    `keys` are a view's sorted storage indices, `rows` and `columns` each key's element
    (-1 where several elements share the key); None for a new contiguous output, whose
    element e is row e // cols, column e % cols.
    """

    step: int  # elements between neighbouring columns; 0: columns share addresses
    cols: int
    keys: np.ndarray | None = None
    rows: np.ndarray | None = None
    columns: np.ndarray | None = None

    def lookup(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each index's (row, column, inside the footprint); row and column -1 if unknown."""
        if self.keys is None:
            return index // self.cols, index % self.cols, np.ones(index.shape, dtype=bool)
        if not self.keys.size:
            none = np.full(index.shape, -1, dtype=np.int64)
            return none, none, np.zeros(index.shape, dtype=bool)
        at = np.clip(np.searchsorted(self.keys, index), 0, self.keys.size - 1)
        found = self.keys[at] == index
        return np.where(found, self.rows[at], -1), np.where(found, self.columns[at], -1), found


def view_columns(view: torch.Tensor) -> Columns:
    """A view's storage indices with the element each holds; -1 where several share one."""
    rows, cols = view.shape
    sr, sc = view.stride()
    r = np.repeat(np.arange(rows, dtype=np.int64), cols)
    c = np.tile(np.arange(cols, dtype=np.int64), rows)
    index = view.storage_offset() + r * sr + c * sc
    keys, inverse, counts = np.unique(index, return_inverse=True, return_counts=True)
    row_of = np.full(keys.shape, -1, dtype=np.int64)
    col_of = np.full(keys.shape, -1, dtype=np.int64)
    single = counts[inverse] == 1
    row_of[inverse[single]], col_of[inverse[single]] = r[single], c[single]
    if sr == 0:  # a broadcast row: all rows read one address per column
        col_of[inverse] = c
    return Columns(sc, cols, keys, row_of, col_of)


def past_row(a: Access, index: np.ndarray, columns: Columns) -> tuple[np.ndarray, ...]:
    """For each active lane: does it continue a run of lanes past its row's last column, and
    which row and column (counted on from the run's first lane) would it be?

    A run is a line of active lanes along one block axis whose indices step by the
    matrix's column step: the addresses of one row, walked column by column.
    """
    past = np.zeros(a.lanes.shape, dtype=bool)
    row = np.full(a.lanes.shape, -1, dtype=np.int64)
    column = np.full(a.lanes.shape, -1, dtype=np.int64)
    shape = a.shape or (int(a.lanes.max(initial=0)) + 1,)
    if columns.step == 0 or not a.lanes.size:
        return past, row, column
    total = int(np.prod(shape))
    full = np.zeros(total, dtype=np.int64)
    active = np.zeros(total, dtype=bool)
    full[a.lanes], active[a.lanes] = index, True
    position = np.full(total, -1, dtype=np.int64)
    position[a.lanes] = np.arange(a.lanes.size)
    blocks = full.reshape(-1, shape[-1]), active.reshape(-1, shape[-1])
    placed = position.reshape(-1, shape[-1])
    axes = [(blocks, placed)]
    if len(shape) == 2:  # a 2-D tile may hold its columns on either axis
        axes.append(((blocks[0].T, blocks[1].T), placed.T))
    for (values, on), where in axes:
        run_past, run_row, run_column = _runs(values, on, columns)
        hit = where[run_past]
        past[hit] = True
        row[hit], column[hit] = run_row[run_past], run_column[run_past]
    return past, row, column


def block_lines(a: Access, index: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The block's lines along its column axis, as rows of active lane numbers (-1 where a
    lane is off), and each active lane's place along its line; None for a block of more
    than two axes. The column axis is the last one along which neighbouring active lanes
    step by the column step (`step` elements), or, where no two lanes are neighbours on
    it, the last axis (Triton's [BLOCK_M, BLOCK_N] tiles hold columns there)."""
    shape = a.shape or (int(a.lanes.max(initial=0)) + 1,)
    if len(shape) > 2 or not a.lanes.size:
        return None
    number = np.full(int(np.prod(shape)), -1, dtype=np.int64)
    number[a.lanes] = np.arange(a.lanes.size)
    number = number.reshape(-1, shape[-1])
    values = np.zeros(number.shape, dtype=np.int64)
    values[number >= 0] = index[number[number >= 0]]
    chosen = None
    for lines, on in ((number, values), (number.T, values.T)):
        pairs = (lines[:, 1:] >= 0) & (lines[:, :-1] >= 0)
        if not pairs.any() or (np.diff(on, axis=1)[pairs] == step).all():
            chosen = lines
            break
        if len(shape) == 1:
            break
    if chosen is None:
        return None
    position = np.zeros(a.lanes.size, dtype=np.int64)
    place = np.broadcast_to(np.arange(chosen.shape[1]), chosen.shape)
    position[chosen[chosen >= 0]] = place[chosen >= 0]
    return chosen, position


def row_past(index, position, length, shape, strides, offset) -> tuple[np.ndarray, ...]:
    """Each lane's row r >= M and column c < N if its index is offset + r*SR + c*SC with c
    its place along its line, or that place plus whole lines (a row walked in tiles); -1
    for the others."""
    (rows, cols), (row_stride, step) = shape, strides
    row = np.full(index.shape, -1, dtype=np.int64)
    column = np.full(index.shape, -1, dtype=np.int64)
    for c0 in range(0, cols, max(length, 1)):
        c = position + c0
        rest = index - offset - c * step
        r = rest // row_stride
        hit = (row < 0) & (c < cols) & (rest % row_stride == 0) & (r >= rows)
        row[hit], column[hit] = r[hit], c[hit]
    return row, column


def _runs(values: np.ndarray, on: np.ndarray, columns: Columns):
    """Along axis 1: lanes past column `cols - 1` of the row their run started in, the run
    starting where a row or a block-long tile of it starts."""
    steps = np.zeros(on.shape, dtype=bool)
    steps[:, 1:] = on[:, 1:] & on[:, :-1] & (values[:, 1:] - values[:, :-1] == columns.step)
    lane = np.arange(on.shape[1])
    start = np.maximum.accumulate(np.where(steps, 0, lane), axis=1)
    first_row, first_column, _ = columns.lookup(np.take_along_axis(values, start, axis=1))
    column = first_column + (lane - start)
    # A row's lanes start at its first column or at a tile's (a multiple of the block's
    # length): a run that starts between them began at a wrong address, such as a row
    # start of r*SR*N, and runs on into the next row without any lane past N.
    aligned = (first_column >= 0) & (first_column % on.shape[1] == 0)
    return on & aligned & (column >= columns.cols), first_row, column
