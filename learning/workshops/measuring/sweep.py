"""The benchmark's measurement: every shape, layout and mode, each variant timed interleaved
with the others and the roof copy, then checked against a float64 result, as results rows.

A wrong kernel's time means nothing: every timed output is checked, and again on fresh
inputs. The command that runs this and writes the file is `learning.workshops.benchmark`.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import torch
import triton
from tqdm import tqdm

from learning.workshops import contracts
from learning.workshops.checking.cases import DTYPES, OPS, TOLERANCES
from learning.workshops.measuring import timing
from learning.workshops.measuring.results import (
    BACKWARD,
    FORWARD,
    LAYOUT_AWARE,
    LAYOUTS,
    OPTIONAL_VARIANTS,
    TORCH_COMPILE,
    Results,
    Row,
)

DEFAULT_SHAPES = ((2048, 2048), (4096, 4096), (65536, 512))
DEFAULT_WARPS = (4, 8)
DEFAULT_MODES = timing.MODES
DEFAULT_LAYOUTS = LAYOUTS
DEFAULT_DTYPE = "float32"
DEFAULT_REPS = 100

Kernel = Callable[..., torch.Tensor]
"""The function timed: strided_softmax(x, num_warps), strided_softmax_backward(y, dy, num_warps)."""


class BenchmarkFailure(Exception):
    """A variant raised or returned wrong values, so its timing means nothing."""


@dataclass(frozen=True)
class Config:
    """One timed group: the logical shape the kernel sees, the input's layout, the mode."""

    rows: int
    cols: int
    layout: str
    mode: str

    def __str__(self) -> str:
        return f"{self.rows}x{self.cols} {self.layout} ({self.mode})"


@dataclass(frozen=True)
class Variant:
    """One way to compute the op: its results name, its num_warps, and the call on the inputs."""

    name: str
    num_warps: int | None
    call: Kernel

    @property
    def label(self) -> str:
        return self.name if self.num_warps is None else f"{self.name} num_warps={self.num_warps}"


# --- Bytes and bandwidth -------------------------------------------------------------------


def logical_bytes(rows: int, cols: int, element_size: int, inputs: int = 1) -> int:
    """Bytes the op must move at least: read each of its `inputs` once (x; or y and dy), write
    the output once: 2 x M x N x size for the softmax, 3 x M x N x size for its backward."""
    return (inputs + 1) * rows * cols * element_size


def traffic_bytes(variant: str, rows: int, cols: int, element_size: int, inputs: int = 1) -> int:
    """Bytes the variant really moves: `copy` first reads and writes each input once more.
    (`layout-aware` counts its logical bytes: a row it reads twice may come from L2.)"""
    copies = 2 * inputs * rows * cols * element_size if variant == "copy" else 0
    return logical_bytes(rows, cols, element_size, inputs) + copies


def gbps(nbytes: int, ms: float) -> float:
    """Bandwidth in GB/s (1e9 bytes per second) of moving `nbytes` in `ms` milliseconds."""
    return nbytes / (ms * 1e6)


# --- Inputs, variants and checks -----------------------------------------------------------


def make_input(
    rows: int, cols: int, layout: str, dtype: torch.dtype, device: torch.device | str
) -> torch.Tensor:
    """Random input of logical shape (rows, cols): a transposed view, or contiguous."""
    if layout == "transpose":
        return torch.randn(cols, rows, dtype=dtype, device=device).t()
    if layout == "contiguous":
        return torch.randn(rows, cols, dtype=dtype, device=device)
    raise ValueError(f"unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}.")


def make_softmax_inputs(
    rows: int, cols: int, layout: str, dtype: torch.dtype, device: torch.device | str
) -> tuple[torch.Tensor]:
    """The softmax's one input, x, as a tuple like the backward's inputs."""
    return (make_input(rows, cols, layout, dtype, device),)


def make_backward_inputs(
    rows: int, cols: int, layout: str, dtype: torch.dtype, device: torch.device | str
) -> tuple[torch.Tensor, torch.Tensor]:
    """The backward's inputs: y, a row softmax, and dy, random; two views of one layout."""
    y = make_input(rows, cols, layout, dtype, device)
    y.copy_(torch.softmax(y, dim=1, dtype=torch.float32))  # through the view: y keeps its layout
    return y, make_input(rows, cols, layout, dtype, device)


def softmax_variants(
    fn: Kernel,
    warps: Sequence[int],
    layout: str,
    extra: Kernel | None = None,
    compiled: bool = False,
) -> list[Variant]:
    """`direct` and `copy` for each num_warps, then `layout-aware` (`extra` on the view) for
    each when given, then torch.softmax, and torch.compile's when `compiled`; no `copy` when
    contiguous."""
    found = [Variant("direct", w, lambda x, w=w: fn(x, w)) for w in warps]
    if layout != "contiguous":  # there x.contiguous() is x itself: nothing to compare
        found += [Variant("copy", w, lambda x, w=w: fn(x.contiguous(), w)) for w in warps]
    if extra is not None:
        found += [Variant(LAYOUT_AWARE, w, lambda x, w=w: extra(x, w)) for w in warps]
    found.append(Variant("torch_softmax", None, partial(torch.softmax, dim=1)))
    if compiled:
        found.append(Variant(TORCH_COMPILE, None, compiled_softmax()))
    return found


def _row_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=1)


def compiled_softmax() -> Callable[[torch.Tensor], torch.Tensor]:
    """torch.softmax over rows, compiled afresh for one configuration's shape and strides
    (its first call compiles; Dynamo's caches are cleared first, so no earlier shape's
    kernel, nor its limit on recompiles, is in the way)."""
    torch._dynamo.reset()
    return torch.compile(_row_softmax, dynamic=False)


def torch_softmax_backward(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """PyTorch's own softmax backward on the views: what autograd runs after torch.softmax."""
    return torch._softmax_backward_data(dy, y, 1, y.dtype)


def backward_variants(fn: Kernel, warps: Sequence[int], layout: str) -> list[Variant]:
    """`direct` and `copy` (both inputs copied) for each num_warps, then torch's backward."""
    found = [Variant("direct", w, lambda y, dy, w=w: fn(y, dy, w)) for w in warps]
    if layout != "contiguous":
        found += [
            Variant("copy", w, lambda y, dy, w=w: fn(y.contiguous(), dy.contiguous(), w))
            for w in warps
        ]
    found.append(Variant("torch", None, torch_softmax_backward))
    return found


@dataclass(frozen=True)
class TimedOp:
    """An op the benchmark times (its function is the check's, `OPS`): how its inputs are
    drawn, the variants timed beside the roof (`variants(fn, warps, layout)`, and for an op
    with optional variants `extra=` another implementation), and the name of the float64
    result (`OPS[op].reference`) each output is checked against."""

    make_inputs: Callable[..., tuple[torch.Tensor, ...]]
    variants: Callable[..., list[Variant]]
    reference_name: str


TIMED_OPS = {
    FORWARD: TimedOp(make_softmax_inputs, softmax_variants, "softmax"),
    BACKWARD: TimedOp(make_backward_inputs, backward_variants, "softmax backward"),
}
"""Each op of `--op`, by the name its results file records and the check command takes."""


def mismatch(op: str, out: object, inputs: Sequence[torch.Tensor]) -> str | None:
    """What is wrong with `out` as `op`'s result on `inputs`, or None when it is right."""
    timed_op, x = TIMED_OPS[op], inputs[0]
    if not isinstance(out, torch.Tensor):
        return f"returned {type(out).__name__}, not a tensor"
    if (out.shape, out.dtype, out.device) != (x.shape, x.dtype, x.device):
        return (
            f"returned shape {tuple(out.shape)} {out.dtype} on {out.device}, expected "
            f"{tuple(x.shape)} {x.dtype} on {x.device}"
        )
    ref = OPS[op].reference(*inputs)
    rtol, atol = TOLERANCES[x.dtype]
    close = torch.isclose(out.double(), ref, rtol=rtol, atol=atol)
    if bool(close.all()):
        return None
    error = (out.double() - ref).abs().nan_to_num(float("inf")).max().item()
    wrong = int((~close).sum())
    return (
        f"{wrong} of {close.numel()} values differ from a float64 {timed_op.reference_name} "
        f"(largest error {error:.3g})"
    )


def call(variant: Variant, inputs: Sequence[torch.Tensor], config: Config) -> torch.Tensor:
    """The variant's output on `inputs`; BenchmarkFailure naming it when it raises."""
    try:
        return variant.call(*inputs)
    except Exception as exc:
        raise BenchmarkFailure(
            f"{variant.label} on {config} raised {type(exc).__name__}: {exc}".splitlines()[0]
        ) from exc


def verify(
    op: str,
    variant: Variant,
    inputs: Sequence[torch.Tensor],
    out: torch.Tensor,
    config: Config,
) -> None:
    """Check a timed output of `op`, then one call on fresh inputs; BenchmarkFailure says
    which failed."""
    problem = mismatch(op, out, inputs)
    if problem is None:
        x = inputs[0]
        fresh = TIMED_OPS[op].make_inputs(
            config.rows, config.cols, config.layout, x.dtype, x.device
        )
        problem = mismatch(op, call(variant, fresh, config), fresh)
        if problem is not None:
            problem = f"on fresh inputs, {problem}, as if an earlier result were returned"
    if problem is not None:
        raise BenchmarkFailure(
            f"{variant.label} on {config}: {problem}; a wrong result's time means nothing, so "
            f"nothing was written. Run python -m learning.workshops.check {op} --hint."
        )


# --- Timing --------------------------------------------------------------------------------


def make_row(
    name: str,
    num_warps: int | None,
    config: Config,
    samples_ms: list[float],
    size: int,
    inputs: int = 1,
) -> Row:
    """A checked results row from raw samples; `size` is the element size in bytes, `inputs`
    the number of tensors the op reads (the roof copy reads one)."""
    stats = timing.summarize(samples_ms)
    logical = logical_bytes(config.rows, config.cols, size, inputs)
    traffic = traffic_bytes(name, config.rows, config.cols, size, inputs)
    return Row(
        variant=name,
        rows=config.rows,
        cols=config.cols,
        layout=config.layout,
        mode=config.mode,
        num_warps=num_warps,
        median_ms=stats.median_ms,
        min_ms=stats.min_ms,
        max_ms=stats.max_ms,
        samples=stats.samples,
        gbps_logical=gbps(logical, stats.median_ms),
        gbps_traffic=gbps(traffic, stats.median_ms),
        checked=True,
    )


def _record(
    outputs: dict[str, torch.Tensor], variant: Variant, inputs: Sequence[torch.Tensor]
) -> None:
    outputs[variant.label] = variant.call(*inputs)


def time_config(
    op: str,
    fn: Kernel,
    config: Config,
    warps: Sequence[int],
    dtype: torch.dtype,
    reps: int,
    extra: Kernel | None = None,
    compiled: bool = False,
) -> list[Row]:
    """Time every variant of one configuration interleaved, then check what each returned;
    `extra`, another implementation of a softmax, joins them as `layout-aware`, and with
    `compiled` torch.compile's softmax as `torch_compile`."""
    device = contracts.default_device()
    timed_op = TIMED_OPS[op]
    inputs = timed_op.make_inputs(config.rows, config.cols, config.layout, dtype, device)
    extras = {} if extra is None else {"extra": extra}
    if compiled:
        extras["compiled"] = True
    variants = timed_op.variants(fn, warps, config.layout, **extras)
    outputs = {v.label: call(v, inputs, config) for v in variants}  # compiles, names a crash
    src = torch.randn(config.rows * config.cols, dtype=dtype, device=device)
    dst = torch.empty_like(src)
    timed: dict[str, Callable[[], object]] = {
        v.label: partial(_record, outputs, v, inputs) for v in variants
    }
    timed["roof"] = partial(dst.copy_, src)
    samples = timing.interleaved(timed, reps, config.mode, device=device)
    for variant in variants:
        verify(op, variant, inputs, outputs[variant.label], config)
    if not torch.equal(dst, src):
        raise BenchmarkFailure(f"roof on {config}: the device copy did not copy; check the GPU.")
    size = src.element_size()
    rows = [
        make_row(v.name, v.num_warps, config, samples[v.label], size, len(inputs)) for v in variants
    ]
    return rows + [make_row("roof", None, config, samples["roof"], size)]


def require_gpu_timing() -> None:
    """NoCudaError, in one sentence, unless kernels compile for a CUDA device."""
    timing.require_cuda()
    if contracts.interpreter_active():
        raise timing.NoCudaError(
            "TRITON_INTERPRET=1 is set, so kernels would run in Triton's interpreter and their "
            "times would be Python's; unset it to time on the GPU."
        )


def run_benchmark(
    fn: Kernel,
    shapes: Sequence[tuple[int, int]] = DEFAULT_SHAPES,
    warps: Sequence[int] = DEFAULT_WARPS,
    modes: Sequence[str] = DEFAULT_MODES,
    layouts: Sequence[str] = DEFAULT_LAYOUTS,
    dtype: str | torch.dtype = DEFAULT_DTYPE,
    reps: int = DEFAULT_REPS,
    progress: bool = True,
    op: str = FORWARD,
    extra: Kernel | None = None,
    compiled: bool = False,
) -> list[Row]:
    """Time and check `fn` in every configuration, one checked row per variant: `fn(x,
    num_warps)` for the softmax, `fn(y, dy, num_warps)` for op="strided_softmax_backward".
    `extra(x, num_warps)`, another softmax (e.g. grader/beyond.py's), is timed beside it as
    `layout-aware`, and with `compiled` torch.compile's softmax as `torch_compile`."""
    if (extra is not None or compiled) and not OPTIONAL_VARIANTS[op]:
        raise ValueError(f"{op} has no optional variants; pass extra=None, compiled=False.")
    require_gpu_timing()
    dtype = DTYPES[dtype] if isinstance(dtype, str) else dtype
    configs = [
        Config(m, n, layout, mode) for m, n in shapes for layout in layouts for mode in modes
    ]
    rows: list[Row] = []
    bar = tqdm(configs, desc="benchmark", unit="config", file=sys.stderr, disable=not progress)
    with bar:  # closed on failure too, so a message after it starts on its own line
        for config in bar:
            bar.set_postfix_str(str(config))
            rows += time_config(op, fn, config, warps, dtype, reps, extra, compiled)
    return rows


def describe_run(
    op: str,
    impl: Path | str,
    dtype: str,
    rows: list[Row],
    variant_impls: dict[str, str] | None = None,
) -> Results:
    """The results of one run, with the device, the versions and the files that produced
    them."""
    device = contracts.default_device()
    major, minor = torch.cuda.get_device_capability(device)
    return Results(
        op=op,
        impl=str(impl),
        device=torch.cuda.get_device_name(device),
        capability=f"{major}.{minor}",
        dtype=dtype,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        versions={
            "torch": str(torch.__version__),
            "triton": str(triton.__version__),
            "python": platform.python_version(),
        },
        rows=rows,
        variant_impls=dict(variant_impls or {}),
    )
