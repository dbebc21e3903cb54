"""The ownership audit's recording: every load and store a kernel makes under Triton's interpreter.

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
refused the same way. What the record means after the call is for the rules to say
(`audit_rules`, `audit_in_place`). Atomics bypass the hooks; the workshop's kernels use
none.
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


def tensor_region(name: str, t: torch.Tensor) -> Region:
    """The bytes a tensor's elements span (from its lowest to its highest element)."""
    size = t.element_size()
    if t.numel() == 0:
        return Region(name, t.data_ptr(), t.data_ptr(), size)
    low = sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True) if s < 0)
    high = sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True) if s > 0)
    return Region(name, t.data_ptr() + low * size, t.data_ptr() + (high + 1) * size, size)


def storage_region(name: str, t: torch.Tensor) -> Region:
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


def program_name(program: Program, rank: int = 3) -> str:
    """A program by its full grid id: "program 3" on a 1-D grid, "program (0, 3)" else."""
    if rank <= 1 and program[1:] == (0, 0):
        return f"program {program[0]}"
    return f"program ({', '.join(str(p) for p in program[: max(rank, 1)])})"


@dataclass
class Trace:
    """Every load and store seen while the audit was open, per program and launch; the
    rules read it after the call (`audit_rules.verify`, `audit_in_place.verify_in_place`)."""

    inputs: list[torch.Tensor]
    protected: list[Region] = field(default_factory=list)
    launches: list[list[Region]] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    accesses: list[Access] = field(default_factory=list)
    refused: Access | None = None
    refusal: Finding | None = None
    _audited: bool = True  # False for a launch whose tensors the interpreter copies

    def __post_init__(self) -> None:
        self.protected = [storage_region("the input", x) for x in self.inputs]

    # hooks: called by the interpreter while the audit is open

    def launch(self, names: Sequence[str], args: tuple, kwargs: dict) -> None:
        """Note a launch's tensor arguments (where its stores may go) and its grid's rank."""
        named = list(zip(names, args, strict=False)) + list(kwargs.items())
        tensors = [(name, t) for name, value in named for t in _tensors(value)]
        # The interpreter copies non-CPU tensors to the host: their addresses are not theirs.
        self._audited = all(t.device.type == "cpu" for _, t in tensors)
        self.launches.append([tensor_region(name, t) for name, t in tensors])
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
        return program_name(a.program, self.ranks[a.launch] if a.launch >= 0 else 3)

    def arguments(self, launch: int) -> list[Region]:
        return self.launches[launch] if launch >= 0 else []

    def writable(self, launch: int) -> list[Region]:
        """A launch's tensor arguments that do not overlap any input's storage."""
        return [
            r
            for r in self.arguments(launch)
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
            allowed = self.writable(a.launch)
        else:
            allowed = self.protected + self.arguments(a.launch)
        inside = np.zeros(a.addresses.shape, dtype=bool)
        for r in allowed:
            inside |= r.holds(a.addresses, a.size)
        if inside.all():
            return None
        where, offset = self.locate(int(a.addresses[~inside][0]), a)
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

    def locate(self, address: int, a: Access) -> tuple[str, int]:
        """An address as people read it, an element of the nearest tensor below it, and
        its offset in bytes from that tensor's start."""
        below = [r for r in self.arguments(a.launch) + self.protected if r.start <= address]
        if not below:
            return f"address {address:#x}", address
        r = max(below, key=lambda r: r.start)
        offset, count = address - r.start, (r.end - r.start) // r.size
        return (
            f"element {offset // a.size} of {r.name}, {_sized(r.name, count)} "
            f"(address +{offset:#x})",
            offset,
        )


def _sized(name: str, count: int) -> str:
    """How many elements a tensor has, in words that cannot be read as a value it holds."""
    last = f": 0 to {count - 1}" if count > 1 else ""
    return f"which has {count} element{'s' if count != 1 else ''}{last}"


def program_key(program: Program) -> int:
    """A program's grid id as one integer, for sorting and counting programs with numpy."""
    return program[0] | program[1] << 21 | program[2] << 42


def program_of(key: int) -> Program:
    """The grid id that `program_key` made `key` from."""
    mask = (1 << 21) - 1
    return key & mask, key >> 21 & mask, key >> 42


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
