"""Tests for the view layouts, their geometry, and the NaN-filled storage they live in."""

from __future__ import annotations

import math

import pytest
import torch

from learning.workshops.checking.layouts import FILL, FILLS, LAYOUT, LAYOUTS
from learning.workshops.checking.views import (
    geometry,
    sentinel_view,
    storage_indices,
)

# How a student builds each layout from a base tensor: the constructions that
# `views.geometry` names beside each layout, written out independently.
CONSTRUCTIONS = {
    "contiguous": lambda m, n: torch.arange(m * n).view(m, n),
    "transpose": lambda m, n: torch.arange(n * m).view(n, m).t(),
    "slice": lambda m, n: torch.arange((m + 1) * (2 * n + 1)).view(m + 1, 2 * n + 1)[1:, 1::2],
    "transposed-slice": lambda m, n: torch.arange(2 * n * (m + 1)).view(2 * n, m + 1).t()[1:, ::2],
    "row-broadcast": lambda m, n: torch.arange(n).view(1, n).expand(m, n),
    "col-broadcast": lambda m, n: torch.arange(m).view(m, 1).expand(m, n),
    "scalar-broadcast": lambda m, n: torch.arange(1).view(1, 1).expand(m, n),
    "overlapping": lambda m, n: torch.arange(max(0, (m - 1) * (n // 2) + n)).as_strided(
        (m, n), (n // 2, 1)
    ),
}
SHAPES = [(3, 5), (4, 8)]


def build(layout: str, m: int, n: int, fill: str = "normal", seed: int = 0):
    g = geometry(layout, m, n)
    generator = torch.Generator().manual_seed(seed)
    storage, view = sentinel_view(g, torch.float32, "cpu", generator, fill)
    return g, storage, view


def test_every_layout_has_a_construction():
    """Does this test know a PyTorch construction for every layout the module offers?"""
    assert set(CONSTRUCTIONS) == set(LAYOUT) > set(LAYOUTS)


@pytest.mark.parametrize("m, n", SHAPES)
@pytest.mark.parametrize("layout", LAYOUT)
def test_geometry_matches_what_pytorch_builds(layout, m, n):
    """Are a layout's strides, storage offset and base tensor's size those of the real
    PyTorch view?"""
    real = CONSTRUCTIONS[layout](m, n)
    g = geometry(layout, m, n)
    assert tuple(real.shape) == (m, n)
    assert (g.strides, g.offset) == (tuple(real.stride()), real.storage_offset())
    assert LAYOUT[layout].base_size(m, n) == real.untyped_storage().size() // real.element_size()


@pytest.mark.parametrize("layout", LAYOUT.values(), ids=lambda layout: layout.name)
def test_every_layout_has_its_words(layout):
    """Has every layout, the one to refuse included, its code, its kind and how it is built
    in words, with both shapes filled in, as the checks, the shrinker and feedback read it?"""
    assert layout.code.startswith("base.") and layout.kind
    words = layout.words(3, 5)
    assert "(3, 5)" in words and str(layout.base_shape(3, 5)) in words, words


def test_every_fill_but_the_ordinary_has_words():
    """Has every fill words for feedback and the shrinker, but the ordinary one?"""
    assert [name for name, fill in FILL.items() if not fill.words] == ["normal"]
    assert set(FILL) == set(FILLS)


@pytest.mark.parametrize("m, n", SHAPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_storage_indices_match_the_real_views_elements(layout, m, n):
    """Do the storage indices name the very base elements the PyTorch view shows?"""
    real = CONSTRUCTIONS[layout](m, n)  # built from arange: each value is its own index
    assert torch.equal(storage_indices(geometry(layout, m, n)), real)


def test_unknown_layout_is_refused_by_name():
    """Is an unknown layout refused with a ValueError naming it and the choices?"""
    with pytest.raises(ValueError) as info:
        geometry("diagonal", 3, 4)
    assert str(info.value) == f"unknown layout 'diagonal'; choose one of {', '.join(LAYOUTS)}."


def test_unknown_fill_is_refused_by_name():
    """Is an unknown fill refused with a ValueError naming it and the choices?"""
    with pytest.raises(ValueError) as info:
        build("contiguous", 3, 4, fill="zeros")
    assert str(info.value) == f"unknown fill 'zeros'; choose one of {', '.join(FILLS)}."


@pytest.mark.parametrize("layout", LAYOUTS)
def test_sentinel_view_is_nan_exactly_outside_the_footprint(layout):
    """Is every storage element the view does not cover NaN, and every one it covers finite?"""
    g, storage, _ = build(layout, 4, 6)
    inside = torch.zeros(storage.numel(), dtype=torch.bool)
    inside[storage_indices(g).flatten()] = True
    assert bool(storage[~inside].isnan().all())
    assert bool(storage[inside].isfinite().all())


@pytest.mark.parametrize("layout", LAYOUTS)
def test_sentinel_view_has_the_layouts_geometry(layout):
    """Does the returned view have the layout's shape, strides and offset?"""
    g, _, view = build(layout, 4, 6)
    assert (tuple(view.shape), tuple(view.stride()), view.storage_offset()) == (
        (4, 6),
        g.strides,
        g.offset,
    )


def test_sentinel_view_reads_its_storage():
    """Is the view a view of the returned storage, not a copy?"""
    _, storage, view = build("slice", 3, 4)
    assert view.untyped_storage().data_ptr() == storage.untyped_storage().data_ptr()


def test_sentinel_view_pads_past_the_footprint():
    """Does the storage extend past the footprint, so a stray read stays inside it?"""
    g, storage, _ = build("transposed-slice", 3, 5)
    assert storage.numel() > g.footprint_end


def test_large_fill_has_large_magnitudes():
    """With fill "large", is every value in the view at least 1e4 in magnitude?"""
    _, _, view = build("transpose", 4, 20, fill="large")
    assert bool((view.abs() >= 1e4).all())
    assert bool(view.isfinite().all())


def test_neg_inf_fill_keeps_the_first_column_finite():
    """With fill "neg-inf", is column 0 of every row finite, so no row is all -inf?"""
    _, _, view = build("contiguous", 6, 12, fill="neg-inf")
    assert bool(view[:, 0].isfinite().all())


def test_neg_inf_fill_puts_neg_inf_after_the_first_column():
    """With fill "neg-inf", do some elements outside column 0 hold -inf (and none +inf/NaN)?"""
    _, _, view = build("contiguous", 6, 12, fill="neg-inf")
    rest = view[:, 1:]
    assert int((rest == -math.inf).sum()) > 0
    assert not bool((rest == math.inf).any())
    assert not bool(rest.isnan().any())


def test_neg_inf_fill_keeps_first_column_finite_in_a_transpose():
    """In a transpose, where column 0 is scattered in storage, does it stay finite?"""
    _, _, view = build("transpose", 7, 9, fill="neg-inf")
    assert bool(view[:, 0].isfinite().all())
    assert int((view[:, 1:] == -math.inf).sum()) > 0


def test_fresh_generators_give_fresh_values():
    """Do two different seeds give different values in the same view?"""
    _, _, first = build("contiguous", 3, 4, seed=1)
    _, _, second = build("contiguous", 3, 4, seed=2)
    assert not torch.equal(first, second)


# --- features -------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_only_the_contiguous_layout_is_contiguous(layout):
    """Is "contiguous" reported for the contiguous layout and no other?"""
    found = "contiguous" in geometry(layout, 4, 8).features()
    assert found == (layout == "contiguous")


def test_col_strided_layouts():
    """Are transposes, strided slices and column broadcasts the col-strided layouts?"""
    strided = {lay for lay in LAYOUTS if "col-strided" in geometry(lay, 4, 8).features()}
    assert strided == {
        "transpose",
        "slice",
        "transposed-slice",
        "col-broadcast",
        "scalar-broadcast",
    }


def test_offset_is_reported_for_slices():
    """Are exactly the sliced layouts (shifted pointer) reported as "offset"?"""
    shifted = {lay for lay in LAYOUTS if "offset" in geometry(lay, 4, 8).features()}
    assert shifted == {"slice", "transposed-slice"}


def test_broadcast_is_reported_for_stride_zero_views():
    """Are the three stride-0 layouts, and only they, reported as "broadcast"?"""
    broad = {lay for lay in LAYOUTS if "broadcast" in geometry(lay, 4, 8).features()}
    assert broad == {"row-broadcast", "col-broadcast", "scalar-broadcast"}


def test_broadcast_needs_more_than_one_row():
    """Is a one-row "row-broadcast" (nothing repeated) not reported as broadcast?"""
    assert "broadcast" not in geometry("row-broadcast", 1, 8).features()


def test_broadcast_needs_more_than_one_column():
    """Is a one-column "col-broadcast" (nothing repeated) not reported as broadcast?"""
    assert "broadcast" not in geometry("col-broadcast", 4, 1).features()


def test_non_pow2_width_is_reported():
    """Is a width of 7 reported as "non-pow2"?"""
    assert "non-pow2" in geometry("contiguous", 4, 7).features()


@pytest.mark.parametrize("n", [1, 8, 64])
def test_pow2_width_is_not_reported_as_non_pow2(n):
    """Are widths 1, 8 and 64 free of "non-pow2"?"""
    assert "non-pow2" not in geometry("contiguous", 4, n).features()


def test_zero_rows_are_reported_as_empty():
    """Is a view with no rows reported as "empty"?"""
    assert "empty" in geometry("transpose", 0, 7).features()


def test_rows_are_not_reported_as_empty():
    """Is a view with rows free of "empty"?"""
    assert "empty" not in geometry("transpose", 1, 7).features()


def test_contiguous_features_are_just_contiguous():
    """Does a plain 4x8 contiguous matrix carry no feature but "contiguous" (and
    "row-strided": its rows lie N apart)?"""
    assert geometry("contiguous", 4, 8).features() == frozenset({"contiguous", "row-strided"})
