"""The ownership audit's rules for a kernel that writes its view in place: stores only at
the view's elements, each element written by one program of a launch and read only by it.
"""

from __future__ import annotations

import numpy as np
import torch

from learning.workshops.checking.audit import (
    Access,
    Finding,
    Kind,
    Trace,
    program_key,
    program_name,
    program_of,
    storage_region,
)
from learning.workshops.checking.audit_rules import more


def verify_in_place(trace: Trace, view: torch.Tensor) -> list[Finding]:
    """Findings for a kernel that wrote `view` in place (a view whose elements have
    distinct addresses): stores only at the view's elements, each element written by one
    program of a launch and read only by that program, so no program reads a value
    another program has overwritten, or will overwrite, whatever order programs run in."""
    rows, cols = view.shape
    storage = storage_region("the view", view)
    count = (storage.end - storage.start) // storage.size
    (sr, sc), offset = view.stride(), view.storage_offset()
    elements_at = offset + np.arange(rows)[:, None] * sr + np.arange(cols)[None, :] * sc
    element_at = np.full(count, -1, dtype=np.int64)
    element_at[elements_at.ravel()] = np.arange(rows * cols)
    writer = np.full(rows * cols, -1, dtype=np.int64)
    writer_launch = np.full(rows * cols, -1, dtype=np.int64)
    written_at = np.full(rows * cols, -1, dtype=np.int64)  # the access that stored it last
    found: dict[str, Finding] = {}
    reads: list[tuple[int, Access, np.ndarray]] = []

    def note(kind: str, text: str, a: Access, lanes: int, e: int | None = None) -> None:
        where = divmod(e, cols) if e is not None else (None, None)
        found.setdefault(kind, Finding(kind, text, lanes, a.program, *where))

    for at, a in enumerate(trace.accesses):
        key = program_key(a.program)
        mine = storage.holds(a.addresses, a.size)
        index = (a.addresses[mine] - storage.start) // storage.size
        elements = element_at[index]
        inside = elements[elements >= 0]
        if a.store:
            stray = elements < 0
            if stray.any():
                text = (
                    f"{trace.who(a)} stored to storage index {int(index[stray][0])}, which is "
                    "not an element of the view: storage outside the view was overwritten"
                )
                note(Kind.OUTSIDE_VIEW, text, a, int(stray.sum()))
            other = (writer_launch[inside] == a.launch) & (writer[inside] != key)
            if other.any():
                e = int(inside[other][0])
                first = program_name(program_of(int(writer[e])), trace.ranks[a.launch])
                text = (
                    f"{_place(e, cols)} was written by {first.removeprefix('program ')} and "
                    f"{trace.who(a).removeprefix('program ')} of one launch"
                )
                note(Kind.DUPLICATE, text, a, int(other.sum()), e)
            writer[inside], writer_launch[inside], written_at[inside] = key, a.launch, at
            continue
        reads.append((at, a, inside))
    # Evidence for a read of another program's element: a load that came after that store,
    # if one did (the interpreter's order showed it), else the first such load (a GPU's
    # order may put the store first).
    chosen = None
    for at, a, inside in reads:
        foreign = (writer_launch[inside] == a.launch) & (writer[inside] != program_key(a.program))
        late = foreign & (written_at[inside] < at)
        if late.any():
            chosen = (a, inside, late, True)
            break
        if foreign.any() and chosen is None:
            chosen = (a, inside, foreign, False)
    if chosen is not None:
        a, inside, lanes, after = chosen
        e = int(inside[lanes][0])
        writer_name = program_name(program_of(int(writer[e])), trace.ranks[a.launch])
        text = (
            f"{trace.who(a)} loaded {_place(e, cols)} after {writer_name} had overwritten it "
            "with its result"
            if after
            else f"{trace.who(a)} loaded {_place(e, cols)}, which {writer_name} overwrites: on "
            "a GPU programs run in any order, so the load may see the result instead"
        )
        note(Kind.READ_AFTER_WRITE, text, a, int(lanes.sum()), e)
    never = np.flatnonzero(writer_launch < 0)
    if never.size and rows * cols:
        e = int(never[0])
        found[Kind.UNWRITTEN] = Finding(
            Kind.UNWRITTEN,
            f"{_place(e, cols)} was never written" + more(never.size),
            int(never.size),
            None,
            *divmod(e, cols),
            fault=False,
        )
    return list(found.values())


def _place(e: int, cols: int) -> str:
    return f"row {e // cols}, column {e % cols} of the view"
