"""Tests for the pictures of how a 2-D view maps onto its storage."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from learning.workshops.notebook.pictures import draw_view, save_view  # noqa: E402


def panels(fig: Figure) -> tuple[Axes, Axes]:
    """The grid and storage axes of a drawing, found by their labels."""
    by_label = {ax.get_label(): ax for ax in fig.axes}
    return by_label["grid"], by_label["storage"]


def texts(ax: Axes) -> dict[str, str]:
    """Every labelled text in `ax`, keyed by its gid."""
    return {t.get_gid(): t.get_text() for t in ax.texts if t.get_gid()}


def patch_gids(ax: Axes) -> set[str]:
    return {p.get_gid() for p in ax.patches if p.get_gid()}


def grid_indices(fig: Figure) -> list[list[int]]:
    """The storage indices written in the grid cells, row by row."""
    grid, _ = panels(fig)
    labels = texts(grid)
    rows = {int(k.split(":")[1].split(",")[0]) for k in labels if k.startswith("index:")}
    cols = {int(k.split(",")[1]) for k in labels if k.startswith("index:")}
    return [
        [int(labels[f"index:{r},{c}"].removeprefix("idx ")) for c in sorted(cols)]
        for r in sorted(rows)
    ]


def transpose() -> torch.Tensor:
    return torch.arange(6.0).view(2, 3).t()


def shifted_slice() -> torch.Tensor:
    return torch.arange(28.0).view(4, 7)[1:, 1::2]


def test_transpose_grid_lists_storage_indices_in_logical_order():
    """Does the transpose of [0..5] viewed 2x3 label its cells 0,3 / 1,4 / 2,5?"""
    assert grid_indices(draw_view(transpose())) == [[0, 3], [1, 4], [2, 5]]


def test_transpose_labels_logical_2_1_with_index_5():
    """Does the transpose picture label logical (2, 1) with storage index 5 and value 5?"""
    grid, _ = panels(draw_view(transpose()))
    labels = texts(grid)
    assert labels["index:2,1"] == "idx 5"
    assert labels["value:2,1"] == "val 5"


def test_slice_grid_starts_at_shifted_pointer_and_steps_by_two():
    """Does base[1:, 1::2] start at index 8 and step 2 along a row and 7 down a column?"""
    assert grid_indices(draw_view(shifted_slice())) == [[8, 10, 12], [15, 17, 19], [22, 24, 26]]


def test_slice_strip_greys_the_cells_the_view_skips():
    """Does the storage strip of base[1:, 1::2] grey out cells 0-7, 9 and 27 but colour 8?"""
    _, storage = panels(draw_view(shifted_slice()))
    gids = patch_gids(storage)
    assert {f"unread:{s}" for s in (*range(8), 9, 11, 27)} <= gids
    assert "read:8:0" in gids and "read:26:2" in gids
    assert not any(g.startswith("read:9:") for g in gids)


def test_strip_covers_the_whole_short_storage():
    """Does the strip of base[1:, 1::2] run from index 0 to the storage's last index, 27?"""
    _, storage = panels(draw_view(shifted_slice()))
    cells = sorted(int(k.split(":")[1]) for k in texts(storage) if k.startswith("cell:"))
    assert cells == list(range(28))


def test_pointer_marks_the_storage_offset():
    """Does the strip point x.data_ptr() at the slice's storage offset, index 8?"""
    _, storage = panels(draw_view(shifted_slice()))
    assert texts(storage)["pointer"].endswith("index 8")


def test_row_colour_is_the_same_in_grid_and_strip():
    """Is logical row 1 of the transpose coloured the same in the grid and at its storage cells?"""
    grid, storage = panels(draw_view(transpose()))
    fill = {p.get_gid(): to_rgba(p.get_facecolor()) for p in (*grid.patches, *storage.patches)}
    for c, s in enumerate([1, 4]):
        assert fill[f"fill:1,{c}"] == fill[f"read:{s}:1"]
    assert fill["fill:0,0"] != fill["fill:1,0"]


def test_row_broadcast_marks_each_shared_cell_with_its_read_count():
    """Does arange(5).view(1, 5).expand(3, 5) mark storage cells 0-4 as read three times?"""
    _, storage = panels(draw_view(torch.arange(5.0).view(1, 5).expand(3, 5)))
    labels = texts(storage)
    assert {k: v for k, v in labels.items() if k.startswith("shared:")} == {
        f"shared:{s}": "\u00d73" for s in range(5)
    }


def test_row_broadcast_cell_carries_every_reading_row():
    """Is storage cell 2 of a row broadcast banded in the colours of rows 0, 1 and 2?"""
    _, storage = panels(draw_view(torch.arange(5.0).view(1, 5).expand(3, 5)))
    assert {"read:2:0", "read:2:1", "read:2:2"} <= patch_gids(storage)


def test_column_broadcast_cell_is_read_four_times_by_one_row():
    """Does arange(3).view(3, 1).expand(3, 4) show cell 1 read four times, by row 1 alone?"""
    _, storage = panels(draw_view(torch.arange(3.0).view(3, 1).expand(3, 4)))
    assert texts(storage)["shared:1"] == "\u00d74"
    assert {g for g in patch_gids(storage) if g.startswith("read:1:")} == {"read:1:1"}


def test_views_without_sharing_have_no_shared_marks():
    """Does the transpose, where every element has its own address, show no read counts?"""
    grid, storage = panels(draw_view(transpose()))
    assert not [k for k in texts(storage) if k.startswith("shared:")]
    assert "hatch" not in patch_gids(grid) | patch_gids(storage)


def test_zero_rows_draws_an_empty_grid_with_a_note():
    """Does a (0, 5) view draw without error, with a note and no cell labels?"""
    grid, storage = panels(draw_view(torch.arange(10.0).view(2, 5)[:0]))
    labels = texts(grid)
    assert "no rows" in labels["empty-note"]
    assert not [k for k in labels if k.startswith("index:")]
    assert not [g for g in patch_gids(storage) if g.startswith("read:")]


def test_title_states_shape_strides_and_offset():
    """Does the title of the slice give its shape, strides and storage offset?"""
    grid, _ = panels(draw_view(shifted_slice(), title="slice"))
    title = grid.get_title(loc="left")
    assert title.startswith("slice\n")
    assert "shape (3, 3)" in title and "stride (7, 2)" in title and "storage_offset 8" in title


def test_large_view_draws_only_its_corner_and_says_so():
    """Does a 40x40 view draw a 16x16 corner and say so in the title?"""
    fig = draw_view(torch.arange(1600.0).view(40, 40).t())
    indices = grid_indices(fig)
    assert len(indices) == 16 and all(len(line) == 16 for line in indices)
    assert indices[15][15] == 15 + 15 * 40
    assert "16x16 corner" in panels(fig)[0].get_title(loc="left")


@pytest.mark.parametrize("shape", [(3,), (2, 2, 2)])
def test_non_matrix_raises_value_error_naming_the_shape(shape):
    """Does a tensor that is not 2-D raise a ValueError that names its shape?"""
    with pytest.raises(ValueError, match=rf"{len(shape)}-D with shape {re.escape(str(shape))}"):
        draw_view(torch.zeros(shape))


def test_draws_into_the_axes_it_is_given():
    """Does draw_view draw into caller-supplied axes and return their figure?"""
    fig = Figure()
    ax_grid, ax_storage = fig.subplots(2, 1)
    assert draw_view(transpose(), ax_grid=ax_grid, ax_storage=ax_storage) is fig
    assert texts(ax_grid)["index:0,1"] == "idx 3"


def test_one_axis_alone_is_refused():
    """Does passing ax_grid without ax_storage raise a ValueError?"""
    ax = Figure().subplots()
    with pytest.raises(ValueError, match="both ax_grid and ax_storage"):
        draw_view(transpose(), ax_grid=ax)


def test_save_view_writes_a_png(tmp_path):
    """Does save_view write a PNG file, creating its folder, and return its path?"""
    path = save_view(transpose(), tmp_path / "sub" / "t.png")
    assert path == tmp_path / "sub" / "t.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_view_with_no_rows_says_it_reads_no_cell():
    """Does the storage caption of a view with no rows say that it reads none, instead of
    "cells 0 to 0 drawn" (no cell is drawn of an empty storage)?"""
    for view in (torch.zeros(0, 7), torch.arange(10.0).view(2, 5)[:0]):
        _, storage = panels(draw_view(view))
        caption = storage.get_title(loc="left")
        assert "the view has no rows, so it reads none" in caption
        assert "cells 0 to 0 drawn" not in caption
    _, storage = panels(draw_view(torch.zeros(0, 7)))
    assert "no cell drawn" in storage.get_title(loc="left")


def test_the_backward_draws_y_and_dy_side_by_side():
    """Does a failing backward case's picture draw both of its views, y and dy, each under
    its name with its own pointer, so a misread dy shows (not y alone)?"""
    from learning.workshops.checking.records import Case
    from learning.workshops.checking.shrink import build_views, view_words
    from learning.workshops.notebook.pictures import draw_views

    case = Case("sliced-dy", "contiguous", 3, 4, grad_layout="slice")
    views = build_views(case, seed=0)
    assert [name for name, _ in views] == ["y", "dy"]
    assert views[1][1].stride() == case.grad_geometry.strides
    assert "dy: a (3, 4) slice [1:, 1::2]" in view_words(case)
    fig = draw_views(views, "smallest failing view")
    grids = [ax for ax in fig.axes if ax.get_label() == "grid"]
    stores = [ax for ax in fig.axes if ax.get_label() == "storage"]
    assert [g.get_title(loc="left").splitlines()[0] for g in grids] == ["y", "dy"]
    pointers = [t.get_text() for ax in stores for t in ax.texts if "data_ptr" in t.get_text()]
    assert pointers == ["y.data_ptr() \u2192 index 0", "dy.data_ptr() \u2192 index 10"]


def test_a_stray_read_is_marked_on_the_strip_or_the_bar():
    """Is an index a kernel read outside the view marked in red, in the strip drawn cell by
    cell and in the long storage's bar, with the caption saying where it lies?"""
    _, storage = panels(draw_view(shifted_slice(), stray=4))
    assert "stray:4" in patch_gids(storage)
    assert "red = index 4, which the kernel read, outside the view" in storage.get_title(loc="left")
    long = torch.arange(600.0).as_strided((20, 20), (1, 20))
    _, bar = panels(draw_view(long, stray=410))
    assert [c.get_gid() for c in bar.collections if c.get_gid() == "stray:410"] == ["stray:410"]
    _, unmarked = panels(draw_view(shifted_slice(), stray=None))
    assert not [g for g in patch_gids(unmarked) if g.startswith("stray:")]
