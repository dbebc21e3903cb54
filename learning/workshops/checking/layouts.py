"""Every view layout and value fill the checks draw, each one record: how PyTorch builds it,
where its elements live, and its words. The checks, the shrinker's case words and the
student's feedback all read these records, so a layout cannot lack words in one of them.

Torch-free: the grader's light shells (the feedback preprocessor) import it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

Placement = tuple[tuple[int, int], int, tuple[int, ...]]
"""(strides, storage offset, base tensor's shape) of a (rows x cols) view."""


@dataclass(frozen=True)
class Layout:
    """One kind of view: how it is built from a base tensor, in code and in words."""

    name: str
    code: str  # the PyTorch expression, over a base tensor `base`
    kind: str  # the kind in words, without sizes: "a transpose"
    built: str  # how it is built, with its sizes: "{view}" and "{base}" are shapes
    place: Callable[[int, int], Placement]

    def strides(self, rows: int, cols: int) -> tuple[int, int]:
        return self.place(rows, cols)[0]

    def offset(self, rows: int, cols: int) -> int:
        return self.place(rows, cols)[1]

    def base_shape(self, rows: int, cols: int) -> tuple[int, ...]:
        return self.place(rows, cols)[2]

    def base_size(self, rows: int, cols: int) -> int:
        """How many elements the base tensor has."""
        return math.prod(self.base_shape(rows, cols))

    def words(self, rows: int, cols: int) -> str:
        """How a (rows x cols) view of this layout is built, with its base tensor's shape."""
        return self.built.format(view=(rows, cols), base=self.base_shape(rows, cols))


@dataclass(frozen=True)
class Fill:
    """What values a view's elements hold; `words` is empty for ordinary values."""

    name: str
    words: str


_LAYOUTS = (
    Layout(
        "contiguous",
        "base.view(m, n)",
        "contiguous rows",
        "a contiguous {view} tensor",
        lambda m, n: ((n, 1), 0, (m, n)),
    ),
    Layout(
        "transpose",
        "base.view(n, m).t()",
        "a transpose",
        "a {view} transpose of a {base} tensor",
        lambda m, n: ((1, m), 0, (n, m)),
    ),
    Layout(
        "slice",
        "base.view(m + 1, 2n + 1)[1:, 1::2]",
        "a slice with a shifted pointer and column stride 2",
        "a {view} slice [1:, 1::2] of a {base} tensor",
        lambda m, n: ((2 * n + 1, 2), 2 * n + 2, (m + 1, 2 * n + 1)),
    ),
    Layout(
        "transposed-slice",
        "base.view(2n, m + 1).t()[1:, ::2]",
        "a transposed slice",
        "a {view} slice [1:, ::2] of the transpose of a {base} tensor",
        lambda m, n: ((1, 2 * (m + 1)), 1, (2 * n, m + 1)),
    ),
    Layout(
        "row-broadcast",
        "base.view(1, n).expand(m, n)",
        "a broadcast row (stride 0 between rows)",
        "a {base} row expanded to {view}",
        lambda m, n: ((0, 1), 0, (1, n)),
    ),
    Layout(
        "col-broadcast",
        "base.view(m, 1).expand(m, n)",
        "a broadcast column (stride 0 along each row)",
        "a {base} column expanded to {view}",
        lambda m, n: ((1, 0), 0, (m, 1)),
    ),
    Layout(
        "scalar-broadcast",
        "base.view(1, 1).expand(m, n)",
        "a broadcast scalar (both strides 0)",
        "a {base} tensor expanded to {view}",
        lambda m, n: ((0, 0), 0, (1, 1)),
    ),
    Layout(  # each row starts inside the one before it: must be refused, never drawn to pass
        "overlapping",
        "base.as_strided((m, n), (n // 2, 1))",
        "a view whose rows overlap in storage",
        "a {view} view of a {base} tensor whose rows overlap (row stride cols // 2)",
        lambda m, n: ((max(1, n // 2), 1), 0, (max(0, (m - 1) * max(1, n // 2) + n),)),
    ),
)
LAYOUT = {layout.name: layout for layout in _LAYOUTS}
"""Every layout by name, the overlapping one (a view to refuse) included."""
LAYOUTS = tuple(name for name in LAYOUT if name != "overlapping")
"""The view layouts a softmax must handle, named by how a student would build them."""

_FILLS = (
    Fill("normal", ""),
    Fill("large", "values near ±1e4"),
    Fill("neg-inf", "some values -inf"),
    Fill("neg-inf-head", "every value -inf but the last of each row"),
)
FILL = {fill.name: fill for fill in _FILLS}
"""Every fill by name."""
FILLS = tuple(FILL)


def layout(name: str) -> Layout:
    """The layout called `name`; ValueError naming the choices otherwise."""
    if name not in LAYOUT:
        raise ValueError(f"unknown layout {name!r}; choose one of {', '.join(LAYOUTS)}.")
    return LAYOUT[name]


def fill(name: str) -> Fill:
    """The fill called `name`; ValueError naming the choices otherwise."""
    if name not in FILL:
        raise ValueError(f"unknown fill {name!r}; choose one of {', '.join(FILLS)}.")
    return FILL[name]
