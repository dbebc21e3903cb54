"""Each kernel launch a call makes, as data: which kernel, its grid, every argument.

The child that runs a submission's cases records the launches of each call it makes
(`record_launches`), so that the trusted side can make the same launches itself, in a
clean room that loads nothing of the submission but its kernels' source, on values of its
own (`replay`). A launch is recorded where every launch style ends up: under the
interpreter `InterpretedFunction.run` (JIT calls, autotune and heuristics wrappers, and the
handles `warmup` returns there); on a GPU `JITFunction.run` (its arguments bound, every
constexpr an autotune config or a heuristic set included) and the runner a compiled
handle's `handle[grid]` returns.

A tensor argument is recorded by the buffer it lives in (its storage), its byte offset
there and its dtype; a buffer that is not one of the call's inputs also by whether every
element held one value before its first launch (`fill`): a constant, such as the NaN of the
checks' guarded allocations or a `torch.zeros`, is replayed as it was; any other content was
made outside the kernels and is not replayed. Like everything the child sends, this is
data: a lie about a launch can only make the replay fail.
"""

from __future__ import annotations

import contextlib
import inspect
import numbers
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import torch
import triton.language as tl
from torch.utils._python_dispatch import _disable_current_modes
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

MAX_LAUNCHES = 256
"""Launches recorded per call; a call that makes more is reported as too many to replay."""
INTEGER_DTYPES = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
"""The integer dtype whose elements have each size in bytes: a buffer's fill as bits."""
TEXT_LIMIT = 100


@dataclass
class Recording:
    """The launches one call made, in order, and the buffers their tensors live in."""

    launches: list[dict] = field(default_factory=list)
    buffers: dict[int, dict] = field(default_factory=dict)  # storage address -> facts
    overflow: int = 0  # launches made past MAX_LAUNCHES, not recorded
    known: frozenset[int] = frozenset()  # the inputs' storage addresses: no fill needed

    def add(self, name: str, where: str, params: list[str], args, kwargs, grid) -> None:
        """Record one launch of the kernel `name`, whose parameters are `params`."""
        if len(self.launches) >= MAX_LAUNCHES:
            self.overflow += 1
            return
        launch: dict = {"kernel": name[:TEXT_LIMIT], "where": where[:TEXT_LIMIT]}
        try:
            with _disable_current_modes():  # the checks' modes watch the student, not this
                values, options = _bound(params, args, kwargs)
                launch["grid"] = _grid(grid(values) if callable(grid) else grid)
                launch["args"] = {n: self.encode(v) for n, v in values.items()}
                launch["options"] = {k: _option(v) for k, v in options.items()}
        except Exception as exc:  # the launch itself will raise the same, or run as given
            launch["unreadable"] = f"{type(exc).__name__}: {exc}"[:TEXT_LIMIT]
        self.launches.append(launch)

    def to_wire(self, storages: list[torch.Tensor], returned: object) -> dict:
        """The recording as the parent reads it, every buffer named by its role: `inputN`
        (the call's Nth input storage), `output` (what the call returned lives there) or
        `scratchN`; with where the returned tensor lies in its buffer."""
        roles: dict[int, str] = {}
        for index, storage in enumerate(storages):
            roles.setdefault(storage.untyped_storage().data_ptr(), f"input{index}")
        output = None
        if isinstance(returned, torch.Tensor):
            with _disable_current_modes():
                storage = returned.untyped_storage()
                role = roles.setdefault(storage.data_ptr(), "output")
                output = {
                    "buffer": role,
                    "nbytes": storage.nbytes(),
                    "offset": returned.data_ptr() - storage.data_ptr(),
                    "dtype": str(returned.dtype).removeprefix("torch."),
                    "shape": list(returned.shape),
                    "stride": list(returned.stride()),
                }
        for address in self.buffers:
            roles.setdefault(address, f"scratch{len(roles)}")
        buffers = {roles[a]: facts for a, facts in self.buffers.items()}
        launches = [_named(launch, roles) for launch in self.launches]
        return {
            "launches": launches,
            "buffers": buffers,
            "output": output,
            "overflow": self.overflow,
        }

    def encode(self, value: object) -> object:
        """A launch argument as JSON data (see `replay.decode_argument`)."""
        if isinstance(value, tl.constexpr):
            return self.encode(value.value)
        if isinstance(value, torch.Tensor):
            return {"tensor": self.tensor(value)}
        if value is None or isinstance(value, bool | str):
            return {"value": value[:TEXT_LIMIT] if isinstance(value, str) else value}
        if isinstance(value, numbers.Integral):
            return {"value": int(value)}
        if isinstance(value, numbers.Real):
            return {"value": float(value)}
        if isinstance(value, tl.dtype):
            return {"tl_dtype": str(value)}
        if isinstance(value, torch.dtype):
            return {"torch_dtype": str(value).removeprefix("torch.")}
        if isinstance(value, tuple | list) and len(value) <= 16:
            return {"tuple": [self.encode(v) for v in value]}
        return {"unsupported": type(value).__name__[:TEXT_LIMIT]}

    def tensor(self, t: torch.Tensor) -> dict:
        """A tensor argument: its buffer, byte offset and dtype; its buffer noted once."""
        storage = t.untyped_storage()
        address = storage.data_ptr()
        if address not in self.buffers:
            facts = {"nbytes": storage.nbytes(), "device": t.device.type}
            if address not in self.known:
                facts["fill"] = uniform_fill(storage, t.element_size())
            self.buffers[address] = facts
        return {
            "buffer": address,
            "offset": t.data_ptr() - address,
            "dtype": str(t.dtype).removeprefix("torch."),
        }


def _named(launch: dict, roles: dict[int, str]) -> dict:
    """`launch` with each tensor argument's buffer address replaced by the buffer's role."""
    if "args" not in launch:
        return launch
    return {**launch, "args": {n: _role(v, roles) for n, v in launch["args"].items()}}


def _role(value: dict, roles: dict[int, str]) -> dict:
    if "tensor" in value:
        return {"tensor": {**value["tensor"], "buffer": roles.get(value["tensor"]["buffer"])}}
    if "tuple" in value:
        return {"tuple": [_role(v, roles) for v in value["tuple"]]}
    return value


def _bound(params: list[str], args, kwargs) -> tuple[dict, dict]:
    """The launch's arguments by parameter name (defaults filled in), and its options
    (num_warps, num_stages, ...: every keyword that is not a parameter)."""
    signature = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params]
    )
    passed = {k: v for k, v in kwargs.items() if k in params}
    bound = signature.bind_partial(*args, **passed)
    options = {k: v for k, v in kwargs.items() if k not in params}
    return dict(bound.arguments), options


def _grid(grid: object) -> list[int]:
    values = list(grid) if isinstance(grid, tuple | list) else [grid]
    if not 1 <= len(values) <= 3:
        raise ValueError(f"a grid of {len(values)} dimensions")
    return [int(g) for g in values]


def _option(value: object) -> object:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return {"unsupported": type(value).__name__[:TEXT_LIMIT]}


def uniform_fill(storage: torch.UntypedStorage, size: int) -> dict | None:
    """{"bits": b, "size": size} when every `size`-byte element of `storage` holds the bit
    pattern b (an empty buffer counts), else None."""
    nbytes = storage.nbytes()
    if size not in INTEGER_DTYPES or nbytes % size:
        return None
    flat = torch.empty(0, dtype=torch.uint8, device=storage.device)
    flat.set_(storage, 0, (nbytes,), (1,))
    elements = flat.view(INTEGER_DTYPES[size])
    if not elements.numel():
        return {"bits": 0, "size": size}
    first = elements[0]
    if not bool((elements == first).all()):
        return None
    return {"bits": int(first), "size": size}


def _params(kernel) -> list[str]:
    return list(inspect.signature(kernel.fn).parameters)


@contextlib.contextmanager
def record_launches(inputs: Iterable[torch.Tensor] = ()) -> Iterator[Recording]:
    """Record every launch made while the block runs; `inputs`' buffers are the call's own
    inputs, which the trusted side fills itself."""
    recording = Recording(known=frozenset(t.untyped_storage().data_ptr() for t in inputs))

    def launched(kernel, args, kwargs, grid, warmup: bool) -> None:
        if not warmup:
            fn = kernel.fn
            where = f"{fn.__module__}.{fn.__qualname__}"
            recording.add(fn.__name__, where, _params(kernel), args, kwargs, grid)

    with kernel_runs(launched), _compiled_handles(recording):
        yield recording


@contextlib.contextmanager
def kernel_runs(seen: Callable[[object, tuple, dict, object, bool], None]) -> Iterator[None]:
    """Call `seen(kernel, args, kwargs, grid, warmup)` before each run of a Triton kernel in
    the block, where every launch style ends up (`InterpretedFunction.run` under the
    interpreter, `JITFunction.run` on a GPU): JIT calls, autotune and heuristics wrappers,
    and `warmup` (with warmup True)."""
    interpreted, jitted = InterpretedFunction.run, JITFunction.run

    def hooked(real):
        def run(kernel, *args, grid, warmup, **kwargs):
            seen(kernel, args, kwargs, grid, warmup)
            return real(kernel, *args, grid=grid, warmup=warmup, **kwargs)

        return run

    InterpretedFunction.run, JITFunction.run = hooked(interpreted), hooked(jitted)
    try:
        yield
    finally:
        InterpretedFunction.run, JITFunction.run = interpreted, jitted


@contextlib.contextmanager
def _compiled_handles(recording: Recording) -> Iterator[None]:
    """On a GPU, record the launches of compiled handles (`kernel.warmup(...)[grid](...)`),
    which take every argument positionally, constexprs included, in the kernel's order."""
    try:
        from triton.compiler.compiler import CompiledKernel
    except ImportError:  # no compiler here: the interpreter's handles go through run
        yield
        return
    getitem = CompiledKernel.__getitem__

    def handle_launcher(handle, grid):
        runner = getitem(handle, grid)
        fn = getattr(getattr(handle, "src", None), "fn", None)

        def launch(*args, **kwargs):
            if fn is not None:
                options = {"num_warps": handle.metadata.num_warps}
                options["num_stages"] = handle.metadata.num_stages
                inner = getattr(fn, "fn", fn)
                where = f"{inner.__module__}.{inner.__qualname__}"
                params = list(inspect.signature(inner).parameters)
                recording.add(inner.__name__, where, params, args, options, grid)
            return runner(*args, **kwargs)

        return launch

    CompiledKernel.__getitem__ = handle_launcher
    try:
        yield
    finally:
        CompiledKernel.__getitem__ = getitem
