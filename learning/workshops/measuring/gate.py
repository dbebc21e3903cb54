"""The timing gate's page, as both of its ends agree on it: the trusted side writes one word
there when it starts a command's clock (`grader.grading.timing_servers`), and the server's
device waits for that word (`timed_calls.wait_for_gate`). No torch here: the parent needs
only the layout."""

from __future__ import annotations

import mmap

GATE_BYTES = mmap.PAGESIZE
SEED_BITS = 31
"""The gate's one word is GEN << SEED_BITS | SEED: a generation and its seed in one store."""
