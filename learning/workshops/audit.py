"""The ownership audit: every load and store a kernel makes under Triton's interpreter.

In a block-per-row kernel program `row` owns row `row` of the output and nothing else.
The audit proves that for one call. While it is open it hooks the interpreter in two
narrow places, the same in Triton 3.6 and 3.9:

- `interpreter_builder.create_masked_load` / `create_masked_store`, the two memory
  operations every `tl.load` and `tl.store` reaches (plain ones add an all-true mask;
  block pointers and descriptors build a mask too). The builder's `grid_idx` names the
  program that is running.
- `InterpretedFunction.run`, the launch, to learn the kernel's tensor arguments.

A store is checked before it is performed: one into the input's storage, or outside
every tensor argument that is not the input, is refused with an `OwnershipError`, so a
wrong kernel cannot corrupt memory. A load outside every tensor the kernel was given is
refused the same way. After the call, `Trace.verify` turns the record into findings:
each output element written exactly once, by the program that owns its row; loads only
inside the view's footprint. Atomics bypass the hooks; the workshop's kernels use none.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from triton.runtime import interpreter as _interpreter

KINDS = {
    "input-store": "a store into the input's storage (refused)",
    "stray-store": "a store outside every output tensor (refused)",
    "stray-load": "a load outside every tensor the kernel was given (refused)",
    "overrun": "lanes past the row's last column were active: a load or store without a mask",
    "wrong-owner": "a store into a row that another program owns",
    "duplicate": "an output element written more than once",
    "unwritten": "an output element its row's program never wrote",
    "footprint": "a load from the input's storage outside the view's footprint",
}
"""What each finding's `kind` means."""

_HOOKED = ("create_masked_load", "create_masked_store")
_MISSING = object()


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
    program: tuple[int, int, int]
    store: bool
    lanes: np.ndarray  # each active lane's index in the flattened block
    addresses: np.ndarray  # int64 byte addresses, one per active lane
    size: int  # bytes per element


@dataclass(frozen=True)
class Finding:
    """One kind of violation: its first example as evidence, and how many lanes show it."""

    kind: str
    text: str
    count: int = 1
    program: int | None = None
    row: int | None = None
    column: int | None = None
    address: int | None = None  # bytes from the start of the buffer the text names


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


def _who(program: tuple[int, int, int]) -> str:
    return f"program {program[0]}" if program[1:] == (0, 0) else f"program {program}"


def _more(count: int) -> str:
    return f" (and {count - 1} more)" if count > 1 else ""


def _footprint(view: torch.Tensor) -> np.ndarray:
    """The sorted storage indices of every element of a 2-D view."""
    rows, cols = view.shape
    sr, sc = view.stride()
    r = np.arange(rows, dtype=np.int64)[:, None] * sr
    c = np.arange(cols, dtype=np.int64)[None, :] * sc
    return np.unique(view.storage_offset() + r + c)


def _overrun(access: Access, start: int, strides: tuple[int, int], cols: int) -> np.ndarray | None:
    """The lanes past column `cols - 1` when the access is the row's own address pattern
    continued (`start + (program*SR + lane*SC)*size`, lane as column): a missing mask."""
    if not access.lanes.size or access.program[1:] != (0, 0) or access.lanes.max() < cols:
        return None
    sr, sc = strides
    expected = start + (access.program[0] * sr + access.lanes * sc) * access.size
    if not np.array_equal(access.addresses, expected):
        return None
    return access.lanes >= cols


@dataclass
class Trace:
    """Every load and store seen while the audit was open, per program and launch."""

    inputs: list[torch.Tensor]
    protected: list[Region] = field(default_factory=list)
    launches: list[list[Region]] = field(default_factory=list)
    accesses: list[Access] = field(default_factory=list)
    refused: Access | None = None
    refusal: Finding | None = None
    _audited: bool = True  # False for a launch whose tensors the interpreter copies

    def __post_init__(self) -> None:
        self.protected = [_storage_region("the input", x) for x in self.inputs]

    # hooks: called by the interpreter while the audit is open

    def launch(self, names: Sequence[str], args: tuple, kwargs: dict) -> None:
        """Note a launch's tensor arguments: where its stores may go."""
        named = list(zip(names, args, strict=False)) + list(kwargs.items())
        tensors = [(name, t) for name, value in named for t in _tensors(value)]
        # The interpreter copies non-CPU tensors to the host: their addresses are not theirs.
        self._audited = all(t.device.type == "cpu" for _, t in tensors)
        self.launches.append([_tensor_region(name, t) for name, t in tensors])

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
        done = Access(launch, program, store, lanes, addresses[lanes], size)
        finding = self._refusal(done)
        if finding is not None:
            self.refused, self.refusal = done, finding
            raise OwnershipError(finding)
        self.accesses.append(done)

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
                        "input-store",
                        f"{_who(a.program)} stored to storage index {index} of the input; "
                        "refused, so the input is unchanged",
                        int(hit.sum()),
                        a.program[0],
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
            ("stored to", "stray-store", "outside every output tensor")
            if a.store
            else ("loaded", "stray-load", "outside every tensor the kernel was given")
        )
        return Finding(
            kind,
            f"{_who(a.program)} {verb} {where}, {outside}; refused"
            + (", nothing written" if a.store else ""),
            int((~inside).sum()),
            a.program[0],
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
            f"element {offset // a.size} of {r.name}, which holds {count} (address +{offset:#x})",
            offset,
        )

    # after the call

    def verify(self, view: torch.Tensor, out: object = None) -> list[Finding]:
        """Findings for one call on `view` that returned `out`, the refused access first.

        `out` is checked as the contract's output, a contiguous (M, N) tensor written at
        `Y + row*N + col` by program `row`; anything else is left to the other checks.
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
            findings += _ownership(stores, _tensor_region("the output", out), rows, cols)
        findings += _loads([a for a in self.accesses if not a.store], view)
        return findings

    def _refused_finding(self, view: torch.Tensor) -> Finding:
        """The refusal, as an overrun when the store is its row's addresses continued."""
        a, finding = self.refused, self.refusal
        if finding.kind != "stray-store":
            return finding
        first = int(a.addresses[0]) if a.addresses.size else -1
        home = [r for r in self._writable(a.launch) if r.start <= first < r.end]
        cols = view.shape[1]
        over = _overrun(a, home[0].start, (cols, 1), cols) if home else None
        if over is None:
            return finding
        lane = int(a.lanes[over][0])
        return Finding(
            "overrun",
            f"{_who(a.program)} stored to column {lane} of row {a.program[0]}, past the row's "
            f"{cols} columns: {self._locate(int(a.addresses[over][0]), a)[0]}; refused, "
            "nothing written",
            int(over.sum()),
            a.program[0],
            a.program[0],
            lane,
            int(a.addresses[over][0]) - home[0].start,
        )


def _ownership(stores: list[Access], out: Region, rows: int, cols: int) -> list[Finding]:
    """Each output element written exactly once, by the program that owns its row."""
    findings: list[Finding] = []
    overruns = []
    written, writers = [], []
    for a in stores:
        over = _overrun(a, out.start, (cols, 1), cols)
        keep = np.ones(a.lanes.shape, dtype=bool) if over is None else ~over
        if over is not None:
            overruns.append((a, over))
        keep &= out.holds(a.addresses, out.size) & ((a.addresses - out.start) % out.size == 0)
        elements = (a.addresses[keep] - out.start) // out.size
        written.append(elements)
        owner = a.program[0] if a.program[1:] == (0, 0) else -1
        writers.append(np.full(elements.shape, owner, dtype=np.int64))
    if overruns:
        a, over = overruns[0]
        lane, total = int(a.lanes[over][0]), sum(int(o.sum()) for _, o in overruns)
        address = int(a.addresses[over][0]) - out.start
        row, col = divmod(address // out.size, cols)
        landed = (
            f"which is row {row}, column {col}, owned by program {row}"
            if 0 <= address < out.end - out.start
            else "outside the output"
        )
        findings.append(
            Finding(
                "overrun",
                f"{_who(a.program)} stored to column {lane} of row {a.program[0]}, past the "
                f"row's {cols} columns (address +{address:#x}, {landed})" + _more(total),
                total,
                a.program[0],
                row,
                col,
                address,
            )
        )
    elements = np.concatenate(written) if written else np.zeros(0, dtype=np.int64)
    programs = np.concatenate(writers) if writers else np.zeros(0, dtype=np.int64)
    wrong = np.flatnonzero(elements // cols != programs)
    if wrong.size:
        e, p = int(elements[wrong[0]]), int(programs[wrong[0]])
        row, col = divmod(e, cols)
        who = f"program {p}" if p >= 0 else "a program off the grid's first axis"
        findings.append(
            Finding(
                "wrong-owner",
                f"{who} stored to row {row}, column {col} (address +{e * out.size:#x}), "
                f"owned by program {row}" + _more(wrong.size),
                int(wrong.size),
                p,
                row,
                col,
                e * out.size,
            )
        )
    counts = np.bincount(elements, minlength=rows * cols)
    twice = np.flatnonzero(counts > 1)
    if twice.size:
        e = int(twice[0])
        row, col = divmod(e, cols)
        by = ", ".join(str(p) for p in np.unique(programs[elements == e]))
        findings.append(
            Finding(
                "duplicate",
                f"row {row}, column {col} (address +{e * out.size:#x}) was written "
                f"{int(counts[e])} times, by program(s) {by}" + _more(twice.size),
                int(twice.size),
                None,
                row,
                col,
                e * out.size,
            )
        )
    never = np.flatnonzero(counts == 0)
    if never.size:
        e = int(never[0])
        row, col = divmod(e, cols)
        findings.append(
            Finding(
                "unwritten",
                f"row {row}, column {col} (address +{e * out.size:#x}) was not written by "
                f"program {row}, its owner" + _more(never.size),
                int(never.size),
                row,
                row,
                col,
                e * out.size,
            )
        )
    return findings


def _loads(loads: list[Access], view: torch.Tensor) -> list[Finding]:
    """Loads from the view's storage only at the view's elements, and no lanes past a row."""
    storage = _storage_region("the input", view)
    footprint = _footprint(view)
    cols = view.shape[1]
    over_first, over_count, out_first, out_count = None, 0, None, 0
    for a in loads:
        over = _overrun(a, view.data_ptr(), view.stride(), cols)
        if over is not None:
            over_first = over_first or (a, int(a.lanes[over][0]), int(a.addresses[over][0]))
            over_count += int(over.sum())
            continue
        mine = storage.holds(a.addresses, a.size)
        indices = (a.addresses[mine] - storage.start) // storage.size
        outside = indices[~np.isin(indices, footprint)]
        if outside.size:
            out_first = out_first or (a, int(outside[0]))
            out_count += int(outside.size)
    findings = []
    if over_first:
        a, lane, address = over_first
        index = (address - storage.start) // storage.size
        findings.append(
            Finding(
                "overrun",
                f"{_who(a.program)} loaded column {lane} of row {a.program[0]}, past the "
                f"row's {cols} columns (storage index {index})" + _more(over_count),
                over_count,
                a.program[0],
                a.program[0],
                lane,
                address - storage.start,
            )
        )
    if out_first:
        a, index = out_first
        findings.append(
            Finding(
                "footprint",
                f"{_who(a.program)} loaded storage index {index}, outside the view's footprint"
                + _more(out_count),
                out_count,
                a.program[0],
                address=index * storage.size,
            )
        )
    return findings


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
