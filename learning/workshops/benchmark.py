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
same interleaved run. `--remote` runs the same command on the course's GPU queue and writes
the same file (`learning.workshops.remote`, docs/queue.md). Exit status: 0 when results were
written, 1 when a variant failed its check (or the remote job failed), 2 for a usage error, a
machine without a CUDA device, or a queue that could not take the job.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from learning.workshops import contracts, remote
from learning.workshops.check import UsageError, find_impl
from learning.workshops.checking.cases import DTYPES, OPS
from learning.workshops.checking.loader import LoadError, load_function, load_module
from learning.workshops.measuring import timing
from learning.workshops.measuring.results import (
    FORWARD,
    LAYOUT_AWARE,
    LAYOUTS,
    OPTIONAL_VARIANTS,
    TORCH_COMPILE,
    Row,
)
from learning.workshops.measuring.sweep import (
    DEFAULT_DTYPE,
    DEFAULT_LAYOUTS,
    DEFAULT_MODES,
    DEFAULT_REPS,
    DEFAULT_SHAPES,
    DEFAULT_WARPS,
    TIMED_OPS,
    BenchmarkFailure,
    Kernel,
    describe_run,
    require_gpu_timing,
    run_benchmark,
)
from learning.workshops.paths import unwritable


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


COMMAND = "python -m learning.workshops.benchmark"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, the way every usage error reads
        raise UsageError(f"{message}; see --help.")


def build_parser() -> argparse.ArgumentParser:
    """The command's options, each declared once with its default and help."""
    p = _Parser(prog=COMMAND, description=__doc__.splitlines()[0])
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
    p.add_argument(
        "--remote",
        action="store_true",
        help=f"run it on the course's GPU queue named in your {remote.HANDOUT} (docs/queue.md)",
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
    remote: bool = False


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
    if args.remote and args.variants:
        raise UsageError("--variants is a second file the queue does not take; drop it.")
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
        remote=args.remote,
    )


def sent_options(o: Options) -> dict[str, object]:
    """The options a remote job runs with, by long name, as the command line spells them."""
    return {
        "shapes": ",".join(f"{m}x{n}" for m, n in o.shapes),
        "warps": ",".join(map(str, o.warps)),
        "modes": ",".join(o.modes),
        "layouts": ",".join(o.layouts),
        "dtype": o.dtype,
        "reps": o.reps,
        "torch_compile": o.torch_compile,
    }


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
        if options.remote:
            return remote.benchmark(
                options.op, impl, options.output, sent_options(options), format_table
            )
        contracts.select_mode(verbose=False)  # before the files define their kernels
        fn = load_function(impl, OPS[options.op].function)
        extra = None if options.variants is None else load_variant(options.variants)
        require_gpu_timing()
    except (UsageError, LoadError) as exc:
        print(f"benchmark: {exc}", file=sys.stderr)
        return 2
    except timing.NoCudaError as exc:
        again = remote.next_step(COMMAND, sys.argv[1:] if argv is None else argv)
        print(f"benchmark: {exc} {again}", file=sys.stderr)
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
