"""Make Triton's interpreter run the launch styles public Triton code uses on a GPU.

Two styles fail in the interpreter for want of a GPU driver, although the kernels
themselves run there fine:

- a pre-compiled handle: `handle = kernel.warmup(..., grid=(1,))`, then
  `handle[grid](...)` (the fused-softmax tutorial's launch). The interpreter's `warmup`
  returns None; here it returns an `InterpretedHandle`, launched like a compiled kernel.
- `tl.range` loops: compiled, their induction variable is a tensor (`row.to(tl.int64)`
  works); the interpreter hands out Python ints. Here `tl.range` yields int32 tensors, as
  on a GPU (`tl.static_range` still yields plain ints, as it unrolls there too).
- `@triton.autotune` with several configs: choosing one means timing each on a GPU. Here
  the interpreter takes the first config that survives pruning, and says so once.

`install()` applies all three; `select_mode` calls it whenever it picks the interpreter.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import triton.language as tl
from triton.runtime import autotuner as _autotuner
from triton.runtime import interpreter as _interpreter

NOTES: list[str] = []
"""What the interpreter did differently from a GPU, once per kernel, for reports."""


class InterpretedHandle:
    """What `kernel.warmup(...)` returns under the interpreter: `handle[grid](*args)` runs
    the kernel with the warm-up's arguments, overridden by those the launch passes."""

    def __init__(self, kernel, arguments: dict, options: dict) -> None:
        self.kernel = kernel
        self.arguments = arguments
        self.name = kernel.__name__
        self.metadata = SimpleNamespace(
            name=self.name,
            num_warps=options.get("num_warps", 4),
            num_stages=options.get("num_stages", 3),
        )

    def _init_handles(self) -> None:
        """Nothing to load: the interpreter compiles nothing."""

    def __getitem__(self, grid):
        def runner(*args, stream=None):
            values = {**self.arguments, **dict(zip(self.kernel.arg_names, args, strict=False))}
            return self.kernel.run(grid=tuple(grid), warmup=False, **values)

        return runner

    def __getattr__(self, name: str):
        raise AttributeError(
            f"{self.name}.{name} comes from compiling the kernel for a GPU; under Triton's "
            "interpreter nothing is compiled, so the handle has no such attribute. Guard "
            "GPU-only code such as occupancy maths with `if x.is_cuda:`."
        )


def _warmup(kernel, *args, grid, **kwargs) -> InterpretedHandle:
    arguments = dict(zip(kernel.arg_names, args, strict=False))
    arguments.update((k, v) for k, v in kwargs.items() if k in kernel.arg_names)
    options = {k: v for k, v in kwargs.items() if k not in kernel.arg_names}
    return InterpretedHandle(kernel, arguments, options)


def _first_config(tuner, *args, config, **meta) -> list[float]:
    """Stand-in for timing one config: every config "takes" as long as its position, so
    the autotuner keeps the first one pruning left."""
    position = tuner.configs.index(config) if config in tuner.configs else 0
    name = getattr(tuner.base_fn, "__name__", "kernel")
    note = (
        f"{name}: the interpreter cannot time autotune configs; it ran the first of "
        f"{len(tuner.configs)} ({_settings(config)})"
    )
    if position == 0 and note not in NOTES:
        NOTES.append(note)
    return [float(position)] * 3


def _tensor_range(arg1, arg2=None, step=None, **options):
    """`tl.range` as the compiler sees it: each induction value an int32 (or int64) tensor."""
    start, end = (0, arg1) if arg2 is None else (arg1, arg2)
    for value in range(_integer(start), _integer(end), 1 if step is None else _integer(step)):
        kind = tl.int32 if -(2**31) <= value < 2**31 else tl.int64
        array = np.array([value], dtype=np.int32 if kind == tl.int32 else np.int64)
        yield tl.tensor(_interpreter.TensorHandle(array, kind), kind)


def _integer(value) -> int:
    """A loop bound as a Python int: a number, a constexpr, or a one-element tensor."""
    value = getattr(value, "value", value)  # a constexpr
    data = getattr(getattr(value, "handle", value), "data", value)  # a tensor's numpy data
    return int(np.asarray(data).reshape(-1)[0])


_PATCH_CORE = _interpreter._patch_lang_core


def _patch_lang_core(lang, scope) -> None:
    _PATCH_CORE(lang, scope)
    scope.set_attr(lang, "range", _tensor_range)


GRID_LIMITS = (2**31 - 1, 65535, 65535)
"""The most programs CUDA launches along grid axes 0, 1 and 2."""
_SET_GRID_DIM = _interpreter.InterpreterBuilder.set_grid_dim


def _set_grid_dim(builder, *grid) -> None:
    """The interpreter's grid, refused as a GPU refuses it when an axis is over CUDA's limit,
    and a note when axis 1 or 2 is used at all: there a grid that grows with the rows fails
    on a GPU once the view has more than 65535 of them."""
    for axis, (size, limit) in enumerate(zip(grid, GRID_LIMITS, strict=False)):
        if size > limit:
            raise RuntimeError(
                f"Triton Error [CUDA]: invalid argument: the launch grid {tuple(grid)} has "
                f"{size} programs on axis {axis}, and CUDA launches at most {limit} there "
                "(65535 on axes 1 and 2). Put the rows on axis 0, or loop over them in each "
                "program."
            )
        note = (
            f"a kernel ran several programs on grid axis {axis}; a GPU launches at most 65535 "
            f"there (2**31 - 1 on axis 0), so a grid whose axis {axis} grows with the rows "
            "fails on a GPU for views of more than 65535 rows"
        )
        if axis and size > 1 and note not in NOTES:
            NOTES.append(note)
    _SET_GRID_DIM(builder, *grid)


def _settings(config) -> str:
    """A config as its meta-parameters and options, leaving out those it does not set."""
    return ", ".join(f"{k}={v}" for k, v in config.all_kwargs().items() if v is not None)


def install() -> None:
    """Let interpreted kernels be warmed up into handles, loop over tensor induction
    variables and be autotuned, as compiled ones are, and refuse the grids a GPU refuses
    (idempotent)."""
    _interpreter.InterpretedFunction.warmup = _warmup
    _interpreter.InterpreterBuilder.set_grid_dim = _set_grid_dim
    _interpreter._patch_lang_core = _patch_lang_core
    _autotuner.Autotuner._bench = _first_config
