"""Time a softmax over real tensor views, or its backward, against copy-first, torch and a copy.

    python -m learning.workshops.benchmark --op strided_softmax --output results/local/i1.json
    python -m learning.workshops.benchmark --op strided_softmax_backward --output backward.json
    python -m learning.workshops.benchmark --op strided_softmax --variants grader/beyond.py \
        --torch-compile --output results/local/beyond.json

For each shape, layout and mode the variants run interleaved call by call (`timing`), then
every timed output is checked against a float64 result, and again on fresh inputs: a wrong
kernel's time means nothing. The backward, `strided_softmax_backward(y, dy, num_warps)`, gets
y (a row softmax) and dy as views of one layout and is timed against PyTorch's own softmax
backward. `--variants FILE` times that file's strided_softmax too, as `layout-aware`, and
`--torch-compile` times torch.softmax compiled by torch.compile, as `torch_compile`, in the
same interleaved run. Exit status: 0 when results were written, 1 when a variant failed its
check, 2 for a usage error or a machine without a CUDA device.
"""

from __future__ import annotations

import argparse
import platform
import re
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
from learning.workshops.check import UsageError, find_impl
from learning.workshops.checking.cases import DTYPES, OPS, TOLERANCES
from learning.workshops.checking.loader import LoadError, load_function, load_module
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
from learning.workshops.paths import unwritable

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


# --- The command ---------------------------------------------------------------------------


def parse_shapes(text: str) -> list[tuple[int, int]]:
    """`4096x4096,65536x512` as [(4096, 4096), (65536, 512)]; UsageError for a bad shape."""
    shapes = []
    for item in (part.strip() for part in text.split(",")):
        found = re.fullmatch(r"(\d+)[xX](\d+)", item)
        if not found:
            raise UsageError(f"--shapes {item!r}: write each shape as ROWSxCOLS, e.g. 4096x4096.")
        rows, cols = int(found[1]), int(found[2])
        if rows < 1 or cols < 1:
            raise UsageError(f"--shapes {item}: rows and columns must both be at least 1.")
        if cols > contracts.MAX_WIDTH:
            raise UsageError(
                f"--shapes {item}: one program holds a whole row, so at most "
                f"{contracts.MAX_WIDTH} columns; choose fewer columns."
            )
        shapes.append((rows, cols))
    return shapes


def parse_warps(text: str) -> list[int]:
    """`4,8` as [4, 8]; UsageError unless each is a power of two from 1 to 32."""
    found = []
    for item in (part.strip() for part in text.split(",")):
        if not re.fullmatch(r"-?\d+", item):
            raise UsageError(f"--warps {item!r}: write whole numbers, e.g. 4,8.")
        try:
            found.append(contracts.warps(int(item)))
        except ValueError as exc:
            raise UsageError(f"--warps {item}: {exc}") from None
    return list(dict.fromkeys(found))


def parse_choices(text: str, allowed: Sequence[str], option: str) -> list[str]:
    """A comma-separated list of names, each one of `allowed`, without repeats."""
    names = [part.strip() for part in text.split(",")]
    for name in names:
        if name not in allowed:
            raise UsageError(f"{option} {name!r}: choose from {', '.join(allowed)}.")
    return list(dict.fromkeys(names))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, the way every usage error reads
        raise UsageError(f"{message}; see --help.")


def build_parser() -> argparse.ArgumentParser:
    """The command's options, each declared once with its default and help."""
    p = _Parser(prog="python -m learning.workshops.benchmark", description=__doc__.splitlines()[0])
    p.add_argument("--op", default=FORWARD, choices=tuple(TIMED_OPS), help="what to time")
    p.add_argument("--output", required=True, type=Path, help="the results file (JSON) to write")
    p.add_argument("--impl", help="a .py file or notebook that defines the op's function")
    p.add_argument(
        "--variants",
        metavar="FILE",
        help=f"another .py file or notebook whose {FORWARD} is timed beside yours, as "
        f"{LAYOUT_AWARE} (e.g. grader/beyond.py; --op {FORWARD} only)",
    )
    p.add_argument(
        "--torch-compile",
        action="store_true",
        help=f"time torch.softmax compiled by torch.compile beside yours, as {TORCH_COMPILE} "
        f"(--op {FORWARD} only)",
    )
    shapes = ",".join(f"{m}x{n}" for m, n in DEFAULT_SHAPES)
    p.add_argument("--shapes", default=shapes, help="logical shapes ROWSxCOLS (%(default)s)")
    warps = ",".join(map(str, DEFAULT_WARPS))
    p.add_argument("--warps", default=warps, help="num_warps for direct and copy (%(default)s)")
    modes = ",".join(DEFAULT_MODES)
    p.add_argument("--modes", default=modes, help="cold: L2 flushed first; warm (%(default)s)")
    layouts = ",".join(DEFAULT_LAYOUTS)
    p.add_argument("--layouts", default=layouts, help="input layouts (%(default)s)")
    p.add_argument("--dtype", default=DEFAULT_DTYPE, choices=tuple(DTYPES), help="element type")
    p.add_argument(
        "--reps", type=int, default=DEFAULT_REPS, help="timed calls per variant (%(default)s)"
    )
    return p


@dataclass(frozen=True)
class Options:
    """The command's validated options."""

    op: str
    output: Path
    impl: str | None
    variants: Path | None
    torch_compile: bool
    shapes: list[tuple[int, int]]
    warps: list[int]
    modes: list[str]
    layouts: list[str]
    dtype: str
    reps: int


def parse_options(argv: Sequence[str] | None) -> Options:
    """Parse and validate the command line; UsageError, in one line, for anything wrong."""
    args = build_parser().parse_args(argv)
    if args.reps < 1:
        raise UsageError(f"--reps {args.reps}: time at least one call per variant, e.g. 100.")
    if args.output.is_dir():
        raise UsageError(f"--output {args.output} is a folder; name a file such as i1.json.")
    if args.output.suffix != ".json":
        raise UsageError(f"--output {args.output}: results are JSON; name a file ending in .json.")
    problem = unwritable(args.output.parent)
    if problem:
        raise UsageError(f"--output {args.output}: {problem}; choose another path.")
    return Options(
        op=args.op,
        output=args.output,
        impl=args.impl,
        variants=variants_file(args.variants, args.op),
        torch_compile=compile_peer(args.torch_compile, args.op),
        shapes=parse_shapes(args.shapes),
        warps=parse_warps(args.warps),
        modes=parse_choices(args.modes, timing.MODES, "--modes"),
        layouts=parse_choices(args.layouts, LAYOUTS, "--layouts"),
        dtype=args.dtype,
        reps=args.reps,
    )


def variants_file(text: str | None, op: str) -> Path | None:
    """The --variants file, if given; UsageError unless it is a .py file or notebook and the
    op has an optional variant to time it as."""
    if text is None:
        return None
    if not OPTIONAL_VARIANTS[op]:
        raise UsageError(
            f"--variants times another {FORWARD} beside yours, so it needs --op {FORWARD}; "
            f"leave it out for --op {op}."
        )
    path = Path(text)
    if not path.is_file():
        raise UsageError(
            f"--variants {text}: no such file; give the path of a .py file or notebook that "
            f"defines {FORWARD}, e.g. the course repository's grader/beyond.py."
        )
    if path.suffix not in (".py", ".ipynb"):
        raise UsageError(f"--variants {text}: expected a .py file or a notebook (.ipynb).")
    return path


def compile_peer(asked: bool, op: str) -> bool:
    """Whether to time torch.compile's softmax; UsageError when asked for beside another op."""
    if asked and op != FORWARD:
        raise UsageError(
            f"--torch-compile times torch.compile's {FORWARD} beside yours, so it needs "
            f"--op {FORWARD}; drop it for --op {op}."
        )
    return asked


def load_variant(path: Path) -> Kernel:
    """The strided_softmax that `path` defines; UsageError naming --variants without one."""
    fn = getattr(load_module(path), OPS[FORWARD].function, None)
    if not callable(fn):
        raise UsageError(
            f"--variants {path} defines no {OPS[FORWARD].function}(x, num_warps); give a file "
            "that does, e.g. the course repository's grader/beyond.py."
        )
    return fn


def format_table(rows: Sequence[Row]) -> str:
    """The rows as a table people read: one line per variant and configuration."""
    lines = [
        f"{'variant':<14}{'shape':<12}{'layout':<12}{'mode':<6}{'warps':>6}"
        f"{'median ms':>11}{'GB/s':>9}{'traffic GB/s':>14}"
    ]
    for r in rows:
        warps = "-" if r.num_warps is None else str(r.num_warps)
        lines.append(
            f"{r.variant:<14}{r.shape:<12}{r.layout:<12}{r.mode:<6}{warps:>6}"
            f"{r.median_ms:>11.4f}{r.gbps_logical:>9.1f}{r.gbps_traffic:>14.1f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; the exit status says how it went (0 written, 1 a check failed, 2 usage)."""
    try:
        options = parse_options(argv)
        impl = find_impl(options.op, options.impl)
        contracts.select_mode(verbose=False)  # before the files define their kernels
        fn = load_function(impl, OPS[options.op].function)
        extra = None if options.variants is None else load_variant(options.variants)
        require_gpu_timing()
    except (UsageError, LoadError, timing.NoCudaError) as exc:
        print(f"benchmark: {exc}", file=sys.stderr)
        return 2
    try:
        rows = run_benchmark(
            fn,
            options.shapes,
            options.warps,
            options.modes,
            options.layouts,
            options.dtype,
            options.reps,
            op=options.op,
            extra=extra,
            compiled=options.torch_compile,
        )
    except BenchmarkFailure as exc:
        print(f"benchmark: {exc}", file=sys.stderr)
        return 1
    impls = {} if options.variants is None else {LAYOUT_AWARE: str(options.variants)}
    path = describe_run(options.op, impl, options.dtype, rows, impls).save(options.output)
    print(format_table(rows))
    print(f"Wrote {len(rows)} rows to {path}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
