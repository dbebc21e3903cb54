"""The allocation guard (learning/workshops/checking/allocations.py): outputs come NaN-filled
with a guard after them; runaway allocations are left alone."""

from __future__ import annotations

import torch

from learning.workshops.checking.allocations import GUARD_MAX_BYTES, GuardAllocations


def test_an_output_comes_nan_filled_and_a_store_past_it_is_seen():
    """Is a float output served NaN-filled, and a store past its end reported as an overrun?"""
    with GuardAllocations() as mode:
        y = torch.empty(5, 7)
    assert y.isnan().all() and len(mode.guards.buffers) == 1
    assert mode.guards.stray() is None
    buffer, size, _ = mode.guards.buffers[0]
    buffer[size : size + 3] = 0.0  # three lanes past the last row's end
    kind, text = mode.guards.stray()
    assert kind == "overrun" and "3 element(s) past the end of the (5, 7) tensor" in text


def test_a_runaway_allocation_is_not_filled():
    """Is an allocation beyond GUARD_MAX_BYTES served as torch serves it, unguarded, so a loop
    of them reaches the memory limit without writing every page first?"""
    with GuardAllocations() as mode:
        big = torch.empty(GUARD_MAX_BYTES // 4 + 1)
        small = torch.empty(4, dtype=torch.float16)
    assert [shape for _, _, shape in mode.guards.buffers] == [(4,)]
    assert big.numel() == GUARD_MAX_BYTES // 4 + 1 and small.isnan().all()
