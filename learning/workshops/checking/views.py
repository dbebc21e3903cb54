"""Views of the kinds the workshop is about, built inside a sentinel-filled storage.

Each view lives in a flat storage much larger than its footprint. Every element the view
does not cover holds NaN, so a kernel that reads outside the view sees NaN, and a kernel
that writes into its input changes the storage, which the checks compare before and after.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton

from learning.workshops.checking import layouts


@dataclass(frozen=True)
class Geometry:
    """Where a (rows x cols) view's elements live: `offset + row*strides[0] + col*strides[1]`."""

    rows: int
    cols: int
    strides: tuple[int, int]
    offset: int

    @property
    def footprint_end(self) -> int:
        """One past the highest storage index the view covers."""
        if self.rows == 0:
            return self.offset
        last = self.offset + (self.rows - 1) * self.strides[0] + (self.cols - 1) * self.strides[1]
        return last + 1

    def features(self) -> frozenset[str]:
        """The properties hints reason about. A stride counts only where it moves an element:
        a view of one column has no column stride to get wrong, one of one row no row
        stride. "contiguous": every element where a new contiguous tensor would hold it;
        "row-strided": several rows, apart (a wrong row address shows); "col-strided":
        columns not adjacent; "offset": a shifted pointer."""
        sr, sc = self.strides
        rows_move, cols_move = self.rows > 1, self.cols > 1
        found = set()
        if not self.offset and (not rows_move or sr == self.cols) and (not cols_move or sc == 1):
            found.add("contiguous")
        if cols_move and sc != 1:
            found.add("col-strided")
        if rows_move and sr != 0:
            found.add("row-strided")
        if self.offset:
            found.add("offset")
        if 0 in (sr, sc) and rows_move and cols_move:
            found.add("broadcast")
        if self.cols & (self.cols - 1):
            found.add("non-pow2")
        if self.rows == 0:
            found.add("empty")
        return frozenset(found)


def geometry(name: str, rows: int, cols: int) -> Geometry:
    """The strides and offset of a `name` view of shape (rows, cols), as PyTorch builds it
    (`layouts.LAYOUT[name].code`)."""
    chosen = layouts.layout(name)
    return Geometry(rows, cols, chosen.strides(rows, cols), chosen.offset(rows, cols))


def storage_indices(g: Geometry) -> torch.Tensor:
    """The (rows x cols) table of storage indices the view reads, as int64."""
    r = torch.arange(g.rows, dtype=torch.int64).unsqueeze(1)
    c = torch.arange(g.cols, dtype=torch.int64).unsqueeze(0)
    return g.offset + r * g.strides[0] + c * g.strides[1]


def sentinel_view(
    g: Geometry,
    dtype: torch.dtype,
    device: torch.device | str,
    generator: torch.Generator,
    fill: str = "normal",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Build `(storage, view)`: the view's footprint holds data, everything else NaN.

    The storage extends past the footprint by the footprint again plus a full padded
    row, so a kernel that adds the offset twice or loads without a mask still reads
    NaN inside the allocation instead of stray memory.
    """
    layouts.fill(fill)  # refuses an unknown fill
    pad = g.footprint_end + g.offset + triton.next_power_of_2(g.cols) * max(g.strides[1], 1) + 64
    storage = torch.full((g.footprint_end + pad,), float("nan"), dtype=torch.float64)
    used = storage_indices(g).flatten().unique()
    values = torch.randn(used.numel(), generator=generator, dtype=torch.float64)
    if fill == "large":
        values = values.sign() * (1e4 + 1e3 * values.abs())
    storage[used] = values
    if fill == "neg-inf" and g.rows and g.cols > 1:
        first_col = storage_indices(g)[:, 0].unique()
        candidates = used[~torch.isin(used, first_col)]
        chosen = torch.rand(candidates.numel(), generator=generator) < 0.3
        storage[candidates[chosen]] = float("-inf")
    if fill == "neg-inf-head" and g.rows and g.cols > 1:  # an online softmax's first tiles
        storage[storage_indices(g)[:, :-1].flatten().unique()] = float("-inf")
    storage = storage.to(dtype=dtype, device=device)
    view = torch.as_strided(storage, (g.rows, g.cols), g.strides, g.offset)
    return storage, view


def describe(x: torch.Tensor) -> str:
    """A short description of a view: shape, strides, storage offset and dtype."""
    return (
        f"{tuple(x.shape)} view, strides {tuple(x.stride())}, "
        f"storage offset {x.storage_offset()}, {str(x.dtype).removeprefix('torch.')}"
    )
