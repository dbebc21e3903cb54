"""The loads of the kernels a softmax really launches, for the notebook's section 7.

`launched_loads` calls the student's `strided_softmax` on two small views, a contiguous one
(column stride 1) and a transpose (a run-time column stride), records each Triton launch it
makes (kernel, arguments, options), and compiles each launched kernel for sm_90 as Triton
specializes that very launch (`evidence.load_summaries`). No kernel signature is assumed:
a persistent loop, several rows per program, column tiles, a compiled handle or autotune
compile with the arguments they were launched with.

`loads_report` is what the ungraded cell prints: the loads, or one sentence that says what
stopped it and what to do next. It never raises, so Run All goes on to the cells after it.
"""

from __future__ import annotations

import contextlib
import inspect
import numbers
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
import triton.language as tl

from learning.workshops.checking.launch_record import kernel_runs
from learning.workshops.notebook.evidence import (
    MEANING,
    NOT_WRITTEN,
    EvidenceError,
    LoadSummary,
    load_summaries,
    not_written,
    phrase,
    raised_line,
)

ROWS, COLS = 64, 1024
"""The views' shape: 1024 fp32 columns, as section 7 reads them; the transpose's column stride
is 64, a multiple of 16 like the benchmark's 4096 and 512."""
VIEWS = {
    "contiguous": f"contiguous {ROWS}x{COLS} rows (column stride 1)",
    "transpose": f"a transposed {ROWS}x{COLS} view (column stride {ROWS})",
}
"""The two calls, by key, with the label a student reads."""
ARCH = 90
"""The GPU the kernels are compiled for: an H100/H200 (sm_90)."""
OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
"""Launch options that change the generated code, passed on to the compiler."""
NEXT_STEP = "fix it (its tests say how), then run this cell again"


def make_view(key: str, device: torch.device | str) -> torch.Tensor:
    """The fp32 view of VIEWS[key] on `device`."""
    if key == "contiguous":
        return torch.randn(ROWS, COLS, device=device)
    return torch.randn(COLS, ROWS, device=device).t()


@dataclass
class Launched:
    """One kernel launch: the kernel's Python function, its arguments by name, its options."""

    fn: Callable
    values: dict
    options: dict = field(default_factory=dict)


@contextlib.contextmanager
def recorded_launches() -> Iterator[list[Launched]]:
    """Every Triton launch made in the block, in order (`launch_record.kernel_runs`): JIT
    calls, autotune and heuristics wrappers, and `warmup`, which a compiled handle's launch
    follows with the same arguments."""
    launches: list[Launched] = []

    def seen(kernel, args, kwargs, grid, warmup) -> None:
        signature = inspect.signature(kernel.fn)
        named = {k: v for k, v in kwargs.items() if k in signature.parameters}
        try:
            values = signature.bind_partial(*args, **named)
        except TypeError:  # the launch itself raises the same, in the student's words
            return
        values.apply_defaults()
        options = {k: v for k, v in kwargs.items() if k in OPTIONS and v is not None}
        launches.append(Launched(kernel.fn, dict(values.arguments), options))

    with kernel_runs(seen):
        yield launches


def launch_job(launched: Launched) -> dict:
    """The compile job (`evidence.launch_job`'s form) of one launch, specialized by Triton's
    own rules: a tensor's pointer and an int that is a multiple of 16 get divisibility 16, an
    int equal to 1 becomes the constant 1, constexpr parameters keep their values."""
    from triton._C.libtriton import native_specialize_impl
    from triton.backends import BaseBackend

    types, fixed, divisible = [], [], []
    name = launched.fn.__name__
    for index, (param, spec) in enumerate(inspect.signature(launched.fn).parameters.items()):
        value = launched.values.get(param)
        if isinstance(value, tl.constexpr):
            value = value.value
        if "constexpr" in str(spec.annotation):
            kind, attribute = "constexpr", None
        else:
            kind, attribute = native_specialize_impl(BaseBackend, value, False, True, True)[:2]
        if not isinstance(kind, str):  # a tuple of arguments: specialized element by element
            _refuse(name, param, value)
        if kind == "constexpr":
            fixed.append([index, _plain(name, param, value)])
        elif attribute == "D":
            divisible.append(index)
        types.append(kind)
    options = {k: int(v) for k, v in launched.options.items() if isinstance(v, numbers.Integral)}
    return {
        "types": types,
        "constexprs": fixed,
        "divisible": divisible,
        "num_warps": options.pop("num_warps", 4),
        "arch": ARCH,
        "options": options,
    }


def _plain(kernel: str, param: str, value: object) -> object:
    """A constexpr's value as JSON the compiler child rebuilds."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return _refuse(kernel, param, value)


def _refuse(kernel: str, param: str, value: object) -> None:
    raise EvidenceError(
        f"{kernel}'s argument {param} is a {type(value).__name__}, which this cell cannot "
        "pass to the compiler (it passes tensors, numbers, booleans and None); the rest of "
        "the notebook does not need this cell."
    )


def launched_loads(
    softmax: Callable, device: torch.device | str
) -> dict[str, list[tuple[str, LoadSummary]]]:
    """For each of VIEWS: each kernel `softmax` launched on it (the last launch of each, as an
    autotuner's timing runs come before its real launch), by name, with its loads."""
    calls: dict[str, dict[Callable, Launched]] = {}
    for key in VIEWS:
        x = make_view(key, device)
        with recorded_launches() as launches:
            softmax(x)
        if not launches:
            raise EvidenceError(
                f"{_name(softmax)} launched no Triton kernel on {VIEWS[key]}; it must launch "
                f"its kernel for every view with rows: {NEXT_STEP}."
            )
        calls[key] = {launch.fn: launch for launch in launches}
    kernels = list(dict.fromkeys(fn for launched in calls.values() for fn in launched))
    summaries: dict[tuple[str, Callable], LoadSummary] = {}
    for fn in kernels:
        keys = [key for key in calls if fn in calls[key]]
        jobs = [launch_job(calls[key][fn]) for key in keys]
        for key, summary in zip(keys, load_summaries(fn, jobs, "fp32"), strict=True):
            summaries[key, fn] = summary
    return {
        key: [(fn.__name__, summaries[key, fn]) for fn in launched]
        for key, launched in calls.items()
    }


def describe_launched(loads: dict[str, list[tuple[str, LoadSummary]]]) -> str:
    """One line per view and kernel: its loads and stores; then what the counts mean."""
    lines = []
    for key, kernels in loads.items():
        for kernel, summary in kernels:
            loads_text = phrase(summary.loads_by_width, "load", summary.dtype)
            stores_text = phrase(summary.stores_by_width, "store", summary.dtype)
            lines.append(f"{VIEWS[key]}, {kernel}: {loads_text}; {stores_text}.")
    return "\n".join([*lines, MEANING])


def loads_report(softmax: Callable, device: torch.device | str) -> str:
    """What the notebook's evidence cell prints: the loads, or one sentence saying what
    stopped it and the next step. Never raises: the cell is not graded, and Run All must go
    on past it."""
    try:
        return describe_launched(launched_loads(softmax, device))
    except EvidenceError as exc:
        return f"No generated-code evidence: {str(exc).rstrip('.')}."
    except Exception as exc:  # the student's function raised: say so on one line
        if not_written(exc):
            return f"{_name(softmax)} is {NOT_WRITTEN}: its loads are read once it runs."
        return (
            f"No generated-code evidence: {_name(softmax)} raised {raised_line(exc)} on a "
            f"{ROWS}x{COLS} fp32 view; {NEXT_STEP}."
        )


def _name(fn: object) -> str:
    return getattr(fn, "__name__", "the softmax")
