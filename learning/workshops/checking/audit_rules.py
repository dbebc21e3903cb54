"""The ownership audit's rules: once a call returns, its recorded loads and stores as findings.

Ownership here is one rule for any decomposition of the work (one program per row, rows
on another grid axis, persistent loops, several rows or column tiles per program, several
launches): each output element is written, and within one launch by exactly one program;
nothing is stored into the input; every load stays inside the view's footprint. Which
program writes which row is the kernel's choice, not the audit's.

`verify` turns the record (`audit.Trace`) into findings. A finding that is a `fault` is
wrong whatever the values; the others only explain wrong values. Lanes that run on past a
row's last column (a missing column mask) are told apart from other faults by following
each block axis (`audit_lanes`).
"""

from __future__ import annotations

import numpy as np
import torch

from learning.workshops.checking.audit import (
    Access,
    Finding,
    Kind,
    Region,
    Trace,
    program_key,
    program_name,
    program_of,
    storage_region,
    tensor_region,
)
from learning.workshops.checking.audit_lanes import (
    Columns,
    block_lines,
    past_row,
    row_past,
    view_columns,
)


def verify(trace: Trace, view: torch.Tensor, out: object = None) -> list[Finding]:
    """Findings for one call on `view` that returned `out`, the refused access first.

    `out` is checked as the contract's output, a new contiguous (M, N) tensor: every
    element written, by one program per launch. Anything else is left to the other
    checks.
    """
    rows, cols = view.shape
    findings = [_refused_finding(trace, view)] if trace.refused is not None else []
    stores = [a for a in trace.accesses if a.store]
    if (
        isinstance(out, torch.Tensor)
        and tuple(out.shape) == (rows, cols)
        and out.is_contiguous()
        and rows * cols
    ):
        findings += _ownership(trace, stores, tensor_region("the output", out), rows, cols)
    findings += _loads(trace, [a for a in trace.accesses if not a.store], view)
    return findings


def contiguous_loads(trace: Trace, view: torch.Tensor, out: object) -> Finding | None:
    """Whether the loads ignored the view's strides (a finding that only explains wrong
    values), or None: every program that stored into `out` loaded each element (r, c) it
    stored where a contiguous tensor has it, offset + r*N + c, some not where the view
    has it, offset + r*SR + c*SC; and its loads spread over more of the view's rows than
    its stores cover of the output's. A program that read whole rows of the view and
    stored them in other places is the stores' fault: on a transpose the two bugs move
    the same values (storage index i to output element i) and only which rows each
    program keeps together tells them apart. Any decomposition: programs are told apart
    by launch and full grid id, and rows by what they stored, not by their id."""
    rows, cols = view.shape
    if not (
        isinstance(out, torch.Tensor)
        and tuple(out.shape) == (rows, cols)
        and out.is_contiguous()
        and rows * cols
    ):
        return None
    stored, loaded = _elements_by_program(trace, view, tensor_region("the output", out))
    (sr, sc), offset = view.stride(), view.storage_offset()
    columns = view_columns(view)
    evidence, load_rows, store_rows, missed = None, 0, 0, 0
    for key, elements in stored.items():
        got = loaded.get(key, np.empty(0, dtype=np.int64))
        row, column = np.divmod(elements, cols)
        if not np.isin(offset + elements, got).all():
            return None  # some element's contiguous address was never loaded
        strided = offset + row * sr + column * sc
        off = np.flatnonzero(~np.isin(strided, got))
        if off.size and evidence is None:
            evidence = (key, int(off[0]), elements, strided)
        missed += int(off.size)
        view_rows = columns.lookup(got)[0]
        load_rows += np.unique(view_rows[view_rows >= 0]).size
        store_rows += np.unique(row).size
    if evidence is None or load_rows <= store_rows:
        return None
    (launch, program), at, elements, strided = evidence
    e = int(elements[at])
    who = program_name(program, trace.ranks[launch] if launch >= 0 else 3)
    return Finding(
        Kind.CONTIGUOUS_LOADS,
        f"{who} stored row {e // cols}, column {e % cols} after loading storage index "
        f"{offset + e}, where a contiguous tensor has that element, not {int(strided[at])}, "
        "where the view has it" + more(missed),
        missed,
        program,
        e // cols,
        e % cols,
        fault=False,
    )


def _elements_by_program(trace: Trace, view: torch.Tensor, out: Region):
    """Per (launch, program): the output elements it stored, and the input's storage
    indices it loaded, each sorted and unique."""
    storage = storage_region("the input", view)
    stored: dict[tuple, list] = {}
    loaded: dict[tuple, list] = {}
    for a in trace.accesses:
        region, into = (out, stored) if a.store else (storage, loaded)
        keep = region.holds(a.addresses, region.size)
        keep &= (a.addresses - region.start) % region.size == 0
        if keep.any():
            index = (a.addresses[keep] - region.start) // region.size
            into.setdefault((a.launch, a.program), []).append(index)
    stored = {k: np.unique(np.concatenate(v)) for k, v in stored.items()}
    loaded = {k: np.unique(np.concatenate(v)) for k, v in loaded.items()}
    return stored, loaded


def _refused_finding(trace: Trace, view: torch.Tensor) -> Finding:
    """The refusal, as a row overrun when its stray lanes are whole rows past the last
    (`_rows_past`), or as an overrun when they continue a row past its end."""
    a, finding = trace.refused, trace.refusal
    cols = view.shape[1]
    rows_past = _rows_past(trace, a, view)
    if rows_past is not None:
        return rows_past
    if finding.kind == Kind.STRAY_STORE:
        home = _home(trace, a)
        if home is None:
            return finding
        past, row, column = past_row(a, (a.addresses - home.start) // a.size, Columns(1, cols))
        allowed = trace.writable(a.launch)
    elif finding.kind == Kind.STRAY_LOAD:
        storage = storage_region("the input", view)
        index = (a.addresses - storage.start) // storage.size
        past, row, column = past_row(a, index, view_columns(view))
        allowed = trace.protected + trace.arguments(a.launch)
    else:
        return finding
    inside = np.zeros(a.addresses.shape, dtype=bool)
    for r in allowed:
        inside |= r.holds(a.addresses, a.size)
    over = np.flatnonzero(past & ~inside)
    if not over.size:
        return finding
    first = int(over[0])
    verb = "stored to" if a.store else "loaded"
    return Finding(
        Kind.OVERRUN,
        f"{trace.who(a)} {verb} column {int(column[first])} of {_row(row[first])}, past the "
        f"row's {cols} "
        f"columns: {trace.locate(int(a.addresses[first]), a)[0]}; refused"
        + (", nothing written" if a.store else ""),
        int(over.size),
        a.program,
        column=int(column[first]),
        address=finding.address,
    )


def _rows_past(trace: Trace, a: Access, view: torch.Tensor) -> Finding | None:
    """The refused access as lanes of rows past the last, or None: along the block's
    column axis (`block_lines`), every line that holds a refused lane is one row r >= M,
    columns below N, of the output's contiguous layout (a store at Y + r*N + c) or of
    the view's (a load at offset + r*SR + c*SC). A line that also holds a lane of a
    row below M is that row run on past its end, which `past_row` reports. Decided
    from the addresses only, so any decomposition: a tile of several rows, a grid
    with programs past the last row, a loop that runs past M. A load must also hold
    row M itself: loads of rows further on, with none between, are a row stride gone
    wrong (X + r*SR*N reads view row r*N), which the values blame."""
    rows, cols = view.shape
    if not rows or not cols:
        return None
    if a.store:
        below = [
            r
            for r in trace.writable(a.launch)
            if r.end - r.start == rows * cols * a.size and r.start <= int(a.addresses.min())
        ]
        if not below:
            return None  # no (M, N) output below the lanes
        out = max(below, key=lambda r: r.start)
        start, step, row_stride, offset = out.start, 1, cols, 0
        allowed, name = trace.writable(a.launch), "the output"
    else:
        out = storage_region("the input", view)
        (row_stride, step), offset = view.stride(), view.storage_offset()
        start, allowed, name = out.start, trace.protected + trace.arguments(a.launch), "the view"
    index = (a.addresses - start) // a.size
    inside = np.zeros(a.addresses.shape, dtype=bool)
    for r in allowed:
        inside |= r.holds(a.addresses, a.size)
    if row_stride == 0 or inside.all():
        return None
    found = block_lines(a, index, step)
    if found is None:
        return None
    lines, position = found
    row, column = row_past(
        index, position, lines.shape[1], (rows, cols), (row_stride, step), offset
    )
    stray, lowest = ~inside, None
    for line in lines:
        active = line[line >= 0]
        r = row[active]
        whole = r.size and (r >= rows).all() and (r == r[0]).all()
        if whole:
            lowest = int(r[0]) if lowest is None else min(lowest, int(r[0]))
        elif stray[active].any():
            return None  # a row below M runs on, or the lanes mix rows
    if not a.store and lowest != rows:
        return None  # loads of rows that do not go on from the last: a wrong row stride
    first = int(np.flatnonzero(stray)[0])
    r, c = int(row[first]), int(column[first])
    count = int(stray.sum())
    where = trace.locate(int(a.addresses[first]), a)[0]
    verb = "stored to" if a.store else "loaded"
    return Finding(
        Kind.ROW_OVERRUN,
        f"{trace.who(a)} {verb} row {r}, column {c}, past {name}'s last row (row "
        f"{rows - 1}): {where}; refused" + (", nothing written" if a.store else "") + more(count),
        count,
        a.program,
        r,
        c,
        int(a.addresses[first]) - start,
    )


def _home(trace: Trace, a: Access) -> Region | None:
    """The writable tensor the access's first in-bounds lane falls in."""
    for address in a.addresses:
        for r in trace.writable(a.launch):
            if r.start <= int(address) < r.end:
                return r
    return None


def _ownership(trace: Trace, stores: list[Access], out: Region, rows: int, cols: int):
    """Each output element written, within a launch by one program only."""
    columns = Columns(1, cols)
    written, keys, launches, lanes_past, twice_in_one = [], [], [], [], None
    for a in stores:
        keep = out.holds(a.addresses, out.size) & ((a.addresses - out.start) % out.size == 0)
        if not keep.any():
            continue
        elements = (a.addresses - out.start) // out.size
        past, row, column = past_row(a, elements, columns)
        if past.any():
            lanes_past.append((a, elements, past, row, column))
        mine = elements[keep]
        if twice_in_one is None and np.unique(mine).size < mine.size:
            twice_in_one = (a, mine)
        written.append(mine)
        keys.append(np.full(mine.shape, program_key(a.program), dtype=np.int64))
        launches.append(np.full(mine.shape, a.launch, dtype=np.int64))
    if not written:
        return [
            Finding(
                Kind.UNWRITTEN,
                f"no kernel stored into the returned tensor: its {rows * cols} elements were "
                "never written (return the output your kernel writes)",
                rows * cols,
            )
        ]
    elements = np.concatenate(written)
    raced = _raced(elements, np.concatenate(keys), np.concatenate(launches))
    findings = []
    if lanes_past and (raced.size or twice_in_one):
        findings.append(_store_overrun(trace, lanes_past, out, cols))
    if raced.size:
        findings.append(_race(trace, raced, elements, keys, stores, out, cols))
    elif twice_in_one:
        findings.append(_lanes_collide(trace, *twice_in_one, out, cols))
    never = np.flatnonzero(np.bincount(elements, minlength=rows * cols) == 0)
    if never.size:
        e = int(never[0])
        findings.append(
            Finding(
                Kind.UNWRITTEN,
                f"{_element(e, cols, out.size)} was never written by any program"
                + more(never.size),
                int(never.size),
                None,
                *divmod(e, cols),
                e * out.size,
            )
        )
    return findings


def _lanes_collide(trace: Trace, a: Access, mine: np.ndarray, out: Region, cols: int) -> Finding:
    """Several lanes of one store wrote one element at once."""
    values, counts = np.unique(mine, return_counts=True)
    e, shared = int(values[counts > 1][0]), int((counts > 1).sum())
    return Finding(
        Kind.DUPLICATE,
        f"{_element(e, cols, out.size)} was written by {int(counts.max())} lanes of one "
        f"store of {trace.who(a)}" + more(shared),
        shared,
        a.program,
        *divmod(e, cols),
        e * out.size,
    )


def _store_overrun(trace: Trace, lanes_past, out: Region, cols: int) -> Finding:
    a, elements, past, row, column = lanes_past[0]
    first = int(np.flatnonzero(past)[0])
    e, total = int(elements[first]), sum(int(p[2].sum()) for p in lanes_past)
    landed = (
        f"which is row {e // cols}, column {e % cols}"
        if 0 <= e * out.size < out.end - out.start
        else "outside the output"
    )
    return Finding(
        Kind.OVERRUN,
        f"{trace.who(a)} stored to column {int(column[first])} of {_row(row[first])}, past the "
        f"row's {cols} columns (address +{e * out.size:#x}, {landed})" + more(total),
        total,
        a.program,
        e // cols,
        int(column[first]),
        e * out.size,
    )


def _race(trace: Trace, raced, elements, keys, stores, out: Region, cols: int) -> Finding:
    """Two or more programs of one launch wrote one element: name them by grid id."""
    e = int(raced[0])
    writers = [program_of(int(k)) for k in np.unique(np.concatenate(keys)[elements == e])]
    launch = next(a.launch for a in stores if a.program == writers[0])
    names = [program_name(w, trace.ranks[launch]).removeprefix("program ") for w in writers[:4]]
    listed = ", ".join(names[:-1]) + f" and {names[-1]}" + (" ..." if len(writers) > 4 else "")
    return Finding(
        Kind.DUPLICATE,
        f"{_element(e, cols, out.size)} was written by programs {listed} of one launch"
        + more(raced.size),
        int(raced.size),
        writers[0],
        *divmod(e, cols),
        e * out.size,
    )


def _loads(trace: Trace, loads: list[Access], view: torch.Tensor) -> list[Finding]:
    """Loads from the view's storage only at the view's elements; lanes past a row."""
    storage = storage_region("the input", view)
    columns = view_columns(view)
    cols = view.shape[1]
    over, outside = None, None
    over_count = outside_count = 0
    over_fault = False
    for a in loads:
        mine = storage.holds(a.addresses, a.size)
        if not mine.any():
            continue
        index = (a.addresses - storage.start) // storage.size
        off_view = mine & ~columns.lookup(index)[2]
        past, row, column = past_row(a, index, columns)
        past &= mine
        if past.any():
            over = over or (a, index, past, row, column)
            over_count += int(past.sum())
            over_fault |= bool((past & off_view).any())
        stray = off_view & ~past
        if stray.any():
            outside = outside or (a, int(index[stray][0]))
            outside_count += int(stray.sum())
    findings = []
    if over:
        a, index, past, row, column = over
        first = int(np.flatnonzero(past)[0])
        findings.append(
            Finding(
                Kind.OVERRUN,
                f"{trace.who(a)} loaded column {int(column[first])} of {_row(row[first])}, past "
                f"the row's {cols} columns (storage index {int(index[first])})" + more(over_count),
                over_count,
                a.program,
                column=int(column[first]),
                address=int(index[first]) * storage.size,
                fault=over_fault,
            )
        )
    if outside:
        a, index = outside
        findings.append(
            Finding(
                Kind.FOOTPRINT,
                f"{trace.who(a)} loaded storage index {index}, outside the view's footprint"
                + more(outside_count),
                outside_count,
                a.program,
                address=index * storage.size,
            )
        )
    return findings


def more(count: int) -> str:
    """What follows a finding's first example of `count`: " (and 2 more)" for 3, nothing for 1."""
    return f" (and {count - 1} more)" if count > 1 else ""


def _row(row) -> str:
    return f"row {int(row)}" if row >= 0 else "a row"


def _element(e: int, cols: int, size: int) -> str:
    return f"row {e // cols}, column {e % cols} (address +{e * size:#x})"


def _raced(elements: np.ndarray, keys: np.ndarray, launches: np.ndarray) -> np.ndarray:
    """The output elements that two or more programs of one launch wrote."""
    writes = np.unique(np.stack([launches, elements, keys]), axis=1)
    pairs, writers = np.unique(writes[:2], axis=1, return_counts=True)
    return np.unique(pairs[1][writers > 1])
