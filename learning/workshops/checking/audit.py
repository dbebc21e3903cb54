"""The ownership audit: every load and store a kernel makes under Triton's interpreter.

Ownership here is one rule for any decomposition of the work (one program per row, rows
on another grid axis, persistent loops, several rows or column tiles per program, several
launches): each output element is written, and within one launch by exactly one program;
nothing is stored into the input; every load stays inside the view's footprint. Which
program writes which row is the kernel's choice, not the audit's.

While it is open the audit hooks the interpreter in two narrow places, the same in
Triton 3.6 and 3.9:

- `interpreter_builder.create_masked_load` / `create_masked_store`, the two memory
  operations every `tl.load` and `tl.store` reaches (plain ones add an all-true mask;
  block pointers and descriptors build a mask too). The builder's `grid_idx` names the
  program that is running.
- `InterpretedFunction.run`, the launch, to learn the kernel's tensor arguments and grid.

A store is checked before it is performed: one into the input's storage, or outside
every tensor argument that is not the input, is refused with an `OwnershipError`, so a
wrong kernel cannot corrupt memory. A load outside every tensor the kernel was given is
refused the same way. After the call, `Trace.verify` turns the record into findings. A
finding that is a `fault` is wrong whatever the values; the others only explain wrong
values. Lanes that run on past a row's last column (a missing column mask) are told
apart from other faults by following each block axis: consecutive lanes that step
through a row and on into the next are that row's addresses continued. Atomics bypass
the hooks; the workshop's kernels use none.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from triton.runtime import interpreter as _interpreter


class Kind(enum.StrEnum):
    """What a finding is, as the records (`records.AUDIT_FAILURES`) and the hints name it."""

    INPUT_STORE = "input-store"  # a store into the input's storage (refused)
    STRAY_STORE = "stray-store"  # a store outside every output tensor (refused)
    STRAY_LOAD = "stray-load"  # a load outside every tensor the kernel was given (refused)
    OVERRUN = "overrun"  # lanes past a row's last column active: a load or store without its mask
    ROW_OVERRUN = "row-overrun"  # lanes of a row past the last (row >= M) active: no row mask
    DUPLICATE = "duplicate"  # an output element written twice: two programs, or two lanes at once
    UNWRITTEN = "unwritten"  # an output element no program wrote
    FOOTPRINT = "footprint"  # a load from the input's storage outside the view's footprint
    # each element stored was loaded where a contiguous tensor has it: the loads ignore strides
    CONTIGUOUS_LOADS = "contiguous-loads"
    OUTSIDE_VIEW = "outside-view"  # in place: a store into the view's storage, not into the view
    READ_AFTER_WRITE = "read-after-write"  # in place: read what another program writes


_HOOKED = ("create_masked_load", "create_masked_store")
_MISSING = object()
Program = tuple[int, int, int]


@dataclass(frozen=True)
class Region:
    """The bytes `[start, end)` of one tensor, with its name and element size."""

    name: str
    start: int
    end: int
    size: int

    def holds(self, addresses: np.ndarray, size: int) -> np.ndarray:
        """Which accesses of `size` bytes at `addresses` lie wholly inside the region."""
        return (addresses >= self.start) & (addresses + size <= self.end)

    def touches(self, addresses: np.ndarray, size: int) -> np.ndarray:
        """Which accesses of `size` bytes at `addresses` overlap the region at all."""
        return (addresses + size > self.start) & (addresses < self.end)


@dataclass(eq=False)
class Access:
    """One load or store by one program: the byte addresses of its active lanes only."""

    launch: int
    program: Program
    store: bool
    lanes: np.ndarray  # each active lane's index in the flattened block
    addresses: np.ndarray  # int64 byte addresses, one per active lane
    size: int  # bytes per element
    shape: tuple[int, ...] = ()  # the block's shape


@dataclass(frozen=True)
class Finding:
    """One kind of violation: its first example as evidence, and how many lanes show it.

    A `fault` is wrong whatever the output's values; other findings explain wrong values.
    """

    kind: Kind
    text: str
    count: int = 1
    program: Program | None = None
    row: int | None = None
    column: int | None = None
    address: int | None = None  # bytes from the start of the buffer the text names
    fault: bool = True


class OwnershipError(RuntimeError):
    """A load or store the audit refused before it touched memory; `finding` says which."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.text)
        self.finding = finding


def _tensor_region(name: str, t: torch.Tensor) -> Region:
    """The bytes a tensor's elements span (from its lowest to its highest element)."""
    size = t.element_size()
    if t.numel() == 0:
        return Region(name, t.data_ptr(), t.data_ptr(), size)
    low = sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True) if s < 0)
    high = sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True) if s > 0)
    return Region(name, t.data_ptr() + low * size, t.data_ptr() + (high + 1) * size, size)


def _storage_region(name: str, t: torch.Tensor) -> Region:
    """The bytes of a tensor's whole storage, not only of its view."""
    storage = t.untyped_storage()
    return Region(name, storage.data_ptr(), storage.data_ptr() + storage.nbytes(), t.element_size())


def _tensors(value) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item)


def _grid_rank(grid) -> int:
    """How many grid axes a launch names (3 when the grid is a function of the meta)."""
    return len(grid) if isinstance(grid, (tuple, list)) else (1 if isinstance(grid, int) else 3)


def _who(program: Program, rank: int = 3) -> str:
    """A program by its full grid id: "program 3" on a 1-D grid, "program (0, 3)" else."""
    if rank <= 1 and program[1:] == (0, 0):
        return f"program {program[0]}"
    return f"program ({', '.join(str(p) for p in program[: max(rank, 1)])})"


def _more(count: int) -> str:
    return f" (and {count - 1} more)" if count > 1 else ""


@dataclass(frozen=True)
class _Columns:
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


def _view_columns(view: torch.Tensor) -> _Columns:
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
    return _Columns(sc, cols, keys, row_of, col_of)


def _past_row(a: Access, index: np.ndarray, columns: _Columns) -> tuple[np.ndarray, ...]:
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


def _lines(a: Access, index: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray] | None:
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


def _row_past(index, position, length, shape, strides, offset) -> tuple[np.ndarray, ...]:
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


def _runs(values: np.ndarray, on: np.ndarray, columns: _Columns):
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


@dataclass
class Trace:
    """Every load and store seen while the audit was open, per program and launch."""

    inputs: list[torch.Tensor]
    protected: list[Region] = field(default_factory=list)
    launches: list[list[Region]] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    accesses: list[Access] = field(default_factory=list)
    refused: Access | None = None
    refusal: Finding | None = None
    _audited: bool = True  # False for a launch whose tensors the interpreter copies

    def __post_init__(self) -> None:
        self.protected = [_storage_region("the input", x) for x in self.inputs]

    # hooks: called by the interpreter while the audit is open

    def launch(self, names: Sequence[str], args: tuple, kwargs: dict) -> None:
        """Note a launch's tensor arguments (where its stores may go) and its grid's rank."""
        named = list(zip(names, args, strict=False)) + list(kwargs.items())
        tensors = [(name, t) for name, value in named for t in _tensors(value)]
        # The interpreter copies non-CPU tensors to the host: their addresses are not theirs.
        self._audited = all(t.device.type == "cpu" for _, t in tensors)
        self.launches.append([_tensor_region(name, t) for name, t in tensors])
        self.ranks.append(_grid_rank(kwargs.get("grid")))

    def access(self, ptrs, mask, store: bool) -> None:
        """Record one load or store; refuse it (raise) if it may not touch memory."""
        if not self._audited:
            return
        addresses = np.asarray(ptrs.data).astype(np.int64).ravel()
        mask = mask.data if isinstance(mask, _interpreter.TensorHandle) else mask
        active = np.broadcast_to(np.asarray(mask, dtype=bool), np.shape(ptrs.data)).ravel()
        lanes = np.flatnonzero(active)
        size = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
        program = tuple(int(i) for i in _interpreter.interpreter_builder.grid_idx)
        launch = len(self.launches) - 1
        shape = tuple(np.shape(ptrs.data))
        done = Access(launch, program, store, lanes, addresses[lanes], size, shape)
        finding = self._refusal(done)
        if finding is not None:
            self.refused, self.refusal = done, finding
            raise OwnershipError(finding)
        self.accesses.append(done)

    def who(self, a: Access) -> str:
        """The program that made `a`, named by its full grid id."""
        return _who(a.program, self.ranks[a.launch] if a.launch >= 0 else 3)

    def _arguments(self, launch: int) -> list[Region]:
        return self.launches[launch] if launch >= 0 else []

    def _writable(self, launch: int) -> list[Region]:
        """A launch's tensor arguments that do not overlap any input's storage."""
        return [
            r
            for r in self._arguments(launch)
            if not any(r.start < p.end and p.start < r.end for p in self.protected)
        ]

    def _refusal(self, a: Access) -> Finding | None:
        """Why this access must not happen, or None when it may."""
        if a.store:
            for p in self.protected:
                hit = p.touches(a.addresses, a.size)
                if hit.any():
                    index = (int(a.addresses[hit][0]) - p.start) // p.size
                    return Finding(
                        Kind.INPUT_STORE,
                        f"{self.who(a)} stored to storage index {index} of the input; "
                        "refused, so the input is unchanged",
                        int(hit.sum()),
                        a.program,
                        address=int(a.addresses[hit][0]) - p.start,
                    )
            allowed = self._writable(a.launch)
        else:
            allowed = self.protected + self._arguments(a.launch)
        inside = np.zeros(a.addresses.shape, dtype=bool)
        for r in allowed:
            inside |= r.holds(a.addresses, a.size)
        if inside.all():
            return None
        where, offset = self._locate(int(a.addresses[~inside][0]), a)
        verb, kind, outside = (
            ("stored to", Kind.STRAY_STORE, "outside every output tensor")
            if a.store
            else ("loaded", Kind.STRAY_LOAD, "outside every tensor the kernel was given")
        )
        return Finding(
            kind,
            f"{self.who(a)} {verb} {where}, {outside}; refused"
            + (", nothing written" if a.store else ""),
            int((~inside).sum()),
            a.program,
            address=offset,
        )

    def _locate(self, address: int, a: Access) -> tuple[str, int]:
        """An address as people read it, an element of the nearest tensor below it, and
        its offset in bytes from that tensor's start."""
        below = [r for r in self._arguments(a.launch) + self.protected if r.start <= address]
        if not below:
            return f"address {address:#x}", address
        r = max(below, key=lambda r: r.start)
        offset, count = address - r.start, (r.end - r.start) // r.size
        return (
            f"element {offset // a.size} of {r.name}, {_sized(r.name, count)} "
            f"(address +{offset:#x})",
            offset,
        )

    # after the call

    def verify(self, view: torch.Tensor, out: object = None) -> list[Finding]:
        """Findings for one call on `view` that returned `out`, the refused access first.

        `out` is checked as the contract's output, a new contiguous (M, N) tensor: every
        element written, by one program per launch. Anything else is left to the other
        checks.
        """
        rows, cols = view.shape
        findings = [self._refused_finding(view)] if self.refused is not None else []
        stores = [a for a in self.accesses if a.store]
        if (
            isinstance(out, torch.Tensor)
            and tuple(out.shape) == (rows, cols)
            and out.is_contiguous()
            and rows * cols
        ):
            findings += self._ownership(stores, _tensor_region("the output", out), rows, cols)
        findings += self._loads([a for a in self.accesses if not a.store], view)
        return findings

    def contiguous_loads(self, view: torch.Tensor, out: object) -> Finding | None:
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
        stored, loaded = self._elements_by_program(view, _tensor_region("the output", out))
        (sr, sc), offset = view.stride(), view.storage_offset()
        columns = _view_columns(view)
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
        who = _who(program, self.ranks[launch] if launch >= 0 else 3)
        return Finding(
            Kind.CONTIGUOUS_LOADS,
            f"{who} stored row {e // cols}, column {e % cols} after loading storage index "
            f"{offset + e}, where a contiguous tensor has that element, not {int(strided[at])}, "
            "where the view has it" + _more(missed),
            missed,
            program,
            e // cols,
            e % cols,
            fault=False,
        )

    def _elements_by_program(self, view: torch.Tensor, out: Region):
        """Per (launch, program): the output elements it stored, and the input's storage
        indices it loaded, each sorted and unique."""
        storage = _storage_region("the input", view)
        stored: dict[tuple, list] = {}
        loaded: dict[tuple, list] = {}
        for a in self.accesses:
            region, into = (out, stored) if a.store else (storage, loaded)
            keep = region.holds(a.addresses, region.size)
            keep &= (a.addresses - region.start) % region.size == 0
            if keep.any():
                index = (a.addresses[keep] - region.start) // region.size
                into.setdefault((a.launch, a.program), []).append(index)
        stored = {k: np.unique(np.concatenate(v)) for k, v in stored.items()}
        loaded = {k: np.unique(np.concatenate(v)) for k, v in loaded.items()}
        return stored, loaded

    def _refused_finding(self, view: torch.Tensor) -> Finding:
        """The refusal, as a row overrun when its stray lanes are whole rows past the last
        (`_rows_past`), or as an overrun when they continue a row past its end."""
        a, finding = self.refused, self.refusal
        cols = view.shape[1]
        rows_past = self._rows_past(a, view)
        if rows_past is not None:
            return rows_past
        if finding.kind == Kind.STRAY_STORE:
            home = self._home(a)
            if home is None:
                return finding
            past, row, column = _past_row(
                a, (a.addresses - home.start) // a.size, _Columns(1, cols)
            )
            allowed = self._writable(a.launch)
        elif finding.kind == Kind.STRAY_LOAD:
            storage = _storage_region("the input", view)
            index = (a.addresses - storage.start) // storage.size
            past, row, column = _past_row(a, index, _view_columns(view))
            allowed = self.protected + self._arguments(a.launch)
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
            f"{self.who(a)} {verb} column {int(column[first])} of {_row(row[first])}, past the "
            f"row's {cols} "
            f"columns: {self._locate(int(a.addresses[first]), a)[0]}; refused"
            + (", nothing written" if a.store else ""),
            int(over.size),
            a.program,
            column=int(column[first]),
            address=finding.address,
        )

    def _rows_past(self, a: Access, view: torch.Tensor) -> Finding | None:
        """The refused access as lanes of rows past the last, or None: along the block's
        column axis (`_lines`), every line that holds a refused lane is one row r >= M,
        columns below N, of the output's contiguous layout (a store at Y + r*N + c) or of
        the view's (a load at offset + r*SR + c*SC). A line that also holds a lane of a
        row below M is that row run on past its end, which `_past_row` reports. Decided
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
                for r in self._writable(a.launch)
                if r.end - r.start == rows * cols * a.size and r.start <= int(a.addresses.min())
            ]
            if not below:
                return None  # no (M, N) output below the lanes
            out = max(below, key=lambda r: r.start)
            start, step, row_stride, offset = out.start, 1, cols, 0
            allowed, name = self._writable(a.launch), "the output"
        else:
            out = _storage_region("the input", view)
            (row_stride, step), offset = view.stride(), view.storage_offset()
            start, allowed, name = out.start, self.protected + self._arguments(a.launch), "the view"
        index = (a.addresses - start) // a.size
        inside = np.zeros(a.addresses.shape, dtype=bool)
        for r in allowed:
            inside |= r.holds(a.addresses, a.size)
        if row_stride == 0 or inside.all():
            return None
        found = _lines(a, index, step)
        if found is None:
            return None
        lines, position = found
        row, column = _row_past(
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
        where = self._locate(int(a.addresses[first]), a)[0]
        verb = "stored to" if a.store else "loaded"
        return Finding(
            Kind.ROW_OVERRUN,
            f"{self.who(a)} {verb} row {r}, column {c}, past {name}'s last row (row "
            f"{rows - 1}): {where}; refused"
            + (", nothing written" if a.store else "")
            + _more(count),
            count,
            a.program,
            r,
            c,
            int(a.addresses[first]) - start,
        )

    def _home(self, a: Access) -> Region | None:
        """The writable tensor the access's first in-bounds lane falls in."""
        for address in a.addresses:
            for r in self._writable(a.launch):
                if r.start <= int(address) < r.end:
                    return r
        return None

    def _ownership(self, stores: list[Access], out: Region, rows: int, cols: int):
        """Each output element written, within a launch by one program only."""
        columns = _Columns(1, cols)
        written, keys, launches, lanes_past, twice_in_one = [], [], [], [], None
        for a in stores:
            keep = out.holds(a.addresses, out.size) & ((a.addresses - out.start) % out.size == 0)
            if not keep.any():
                continue
            elements = (a.addresses - out.start) // out.size
            past, row, column = _past_row(a, elements, columns)
            if past.any():
                lanes_past.append((a, elements, past, row, column))
            mine = elements[keep]
            if twice_in_one is None and np.unique(mine).size < mine.size:
                twice_in_one = (a, mine)
            written.append(mine)
            keys.append(np.full(mine.shape, _program_key(a.program), dtype=np.int64))
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
            findings.append(self._store_overrun(lanes_past, out, cols))
        if raced.size:
            findings.append(self._race(raced, elements, keys, stores, out, cols))
        elif twice_in_one:
            findings.append(self._lanes_collide(*twice_in_one, out, cols))
        never = np.flatnonzero(np.bincount(elements, minlength=rows * cols) == 0)
        if never.size:
            e = int(never[0])
            findings.append(
                Finding(
                    Kind.UNWRITTEN,
                    f"{_element(e, cols, out.size)} was never written by any program"
                    + _more(never.size),
                    int(never.size),
                    None,
                    *divmod(e, cols),
                    e * out.size,
                )
            )
        return findings

    def _lanes_collide(self, a: Access, mine: np.ndarray, out: Region, cols: int) -> Finding:
        """Several lanes of one store wrote one element at once."""
        values, counts = np.unique(mine, return_counts=True)
        e, shared = int(values[counts > 1][0]), int((counts > 1).sum())
        return Finding(
            Kind.DUPLICATE,
            f"{_element(e, cols, out.size)} was written by {int(counts.max())} lanes of one "
            f"store of {self.who(a)}" + _more(shared),
            shared,
            a.program,
            *divmod(e, cols),
            e * out.size,
        )

    def _store_overrun(self, lanes_past, out: Region, cols: int) -> Finding:
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
            f"{self.who(a)} stored to column {int(column[first])} of {_row(row[first])}, past the "
            f"row's {cols} columns (address +{e * out.size:#x}, {landed})" + _more(total),
            total,
            a.program,
            e // cols,
            int(column[first]),
            e * out.size,
        )

    def _race(self, raced, elements, keys, stores, out: Region, cols: int) -> Finding:
        """Two or more programs of one launch wrote one element: name them by grid id."""
        e = int(raced[0])
        writers = [_program_of(int(k)) for k in np.unique(np.concatenate(keys)[elements == e])]
        launch = next(a.launch for a in stores if a.program == writers[0])
        names = [_who(w, self.ranks[launch]).removeprefix("program ") for w in writers[:4]]
        listed = ", ".join(names[:-1]) + f" and {names[-1]}" + (" ..." if len(writers) > 4 else "")
        return Finding(
            Kind.DUPLICATE,
            f"{_element(e, cols, out.size)} was written by programs {listed} of one launch"
            + _more(raced.size),
            int(raced.size),
            writers[0],
            *divmod(e, cols),
            e * out.size,
        )

    def _loads(self, loads: list[Access], view: torch.Tensor) -> list[Finding]:
        """Loads from the view's storage only at the view's elements; lanes past a row."""
        storage = _storage_region("the input", view)
        columns = _view_columns(view)
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
            past, row, column = _past_row(a, index, columns)
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
                    f"{self.who(a)} loaded column {int(column[first])} of {_row(row[first])}, past "
                    f"the row's {cols} columns (storage index {int(index[first])})"
                    + _more(over_count),
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
                    f"{self.who(a)} loaded storage index {index}, outside the view's footprint"
                    + _more(outside_count),
                    outside_count,
                    a.program,
                    address=index * storage.size,
                )
            )
        return findings


def verify_in_place(trace: Trace, view: torch.Tensor) -> list[Finding]:
    """Findings for a kernel that wrote `view` in place (a view whose elements have
    distinct addresses): stores only at the view's elements, each element written by one
    program of a launch and read only by that program, so no program reads a value
    another program has overwritten, or will overwrite, whatever order programs run in."""
    rows, cols = view.shape
    storage = _storage_region("the view", view)
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
        key = _program_key(a.program)
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
                first = _who(_program_of(int(writer[e])), trace.ranks[a.launch])
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
        foreign = (writer_launch[inside] == a.launch) & (writer[inside] != _program_key(a.program))
        late = foreign & (written_at[inside] < at)
        if late.any():
            chosen = (a, inside, late, True)
            break
        if foreign.any() and chosen is None:
            chosen = (a, inside, foreign, False)
    if chosen is not None:
        a, inside, lanes, after = chosen
        e = int(inside[lanes][0])
        writer_name = _who(_program_of(int(writer[e])), trace.ranks[a.launch])
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
            f"{_place(e, cols)} was never written" + _more(never.size),
            int(never.size),
            None,
            *divmod(e, cols),
            fault=False,
        )
    return list(found.values())


def _sized(name: str, count: int) -> str:
    """How many elements a tensor has, in words that cannot be read as a value it holds."""
    last = f": 0 to {count - 1}" if count > 1 else ""
    return f"which has {count} element{'s' if count != 1 else ''}{last}"


def _place(e: int, cols: int) -> str:
    return f"row {e // cols}, column {e % cols} of the view"


def _row(row) -> str:
    return f"row {int(row)}" if row >= 0 else "a row"


def _element(e: int, cols: int, size: int) -> str:
    return f"row {e // cols}, column {e % cols} (address +{e * size:#x})"


def _program_key(program: Program) -> int:
    return program[0] | program[1] << 21 | program[2] << 42


def _program_of(key: int) -> Program:
    mask = (1 << 21) - 1
    return key & mask, key >> 21 & mask, key >> 42


def _raced(elements: np.ndarray, keys: np.ndarray, launches: np.ndarray) -> np.ndarray:
    """The output elements that two or more programs of one launch wrote."""
    writes = np.unique(np.stack([launches, elements, keys]), axis=1)
    pairs, writers = np.unique(writes[:2], axis=1, return_counts=True)
    return np.unique(pairs[1][writers > 1])


@contextlib.contextmanager
def audit(inputs: Sequence[torch.Tensor] = ()) -> Iterator[Trace]:
    """Trace every load and store of interpreted kernels while the block runs.

    `inputs` are the tensors the kernels must only read: stores into their storages, and
    stores outside every other tensor argument of the launch, are refused before they
    happen. Needs `TRITON_INTERPRET=1` set before the kernels were defined, and CPU tensors.
    """
    trace = Trace(list(inputs))
    builder = _interpreter.interpreter_builder
    saved = {name: vars(builder).get(name, _MISSING) for name in _HOOKED}
    load, store = builder.create_masked_load, builder.create_masked_store
    run = _interpreter.InterpretedFunction.run

    def audited_load(ptrs, mask, *args, **kwargs):
        trace.access(ptrs, mask, store=False)
        return load(ptrs, mask, *args, **kwargs)

    def audited_store(ptrs, value, mask, *args, **kwargs):
        trace.access(ptrs, mask, store=True)
        return store(ptrs, value, mask, *args, **kwargs)

    def audited_run(kernel, *args, **kwargs):
        trace.launch(kernel.arg_names, args, kwargs)
        return run(kernel, *args, **kwargs)

    builder.create_masked_load = audited_load
    builder.create_masked_store = audited_store
    _interpreter.InterpretedFunction.run = audited_run
    try:
        yield trace
    finally:
        _interpreter.InterpretedFunction.run = run
        for name, value in saved.items():
            if value is _MISSING:
                delattr(builder, name)
            else:
                setattr(builder, name, value)
