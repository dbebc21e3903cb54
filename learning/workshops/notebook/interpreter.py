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
  the interpreter takes the first config that survives pruning, and says so once; the
  check's children on a GPU do the same (`first_configs`), so both judge the same code.
- a module-level alias of a `tl` function (`exp = tl.exp`, `from triton.language import
  exp`): the interpreter swaps the functions it finds on `tl` for ones it can run, so an
  alias kept the original, which only a compiler can call ("Did you forget to add
  @triton.jit?"). Here such aliases in a kernel's globals are swapped too, and put back
  after the launch.
- bfloat16 arithmetic: the interpreter holds bfloat16 values as their 16-bit patterns and
  ran numpy's integer arithmetic on them, so `y * dy` on bfloat16 tensors gave garbage. A
  GPU computes each operation and rounds it to bfloat16; here each floating-point
  operation on bfloat16 operands runs in float32 on their values and rounds the result to
  bfloat16 (nearest, ties to even), and reductions (`tl.sum`, `tl.max`, ...) reduce the
  values, not the patterns.

`install()` applies all five; `select_mode` calls it whenever it picks the interpreter.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np
import triton.language as tl
from triton.runtime import autotuner as _autotuner
from triton.runtime import interpreter as _interpreter
from triton.runtime import jit as _jit

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
        f"{name}: the check ran the first of {len(tuner.configs)} autotune configs "
        f"({_settings(config)}) without timing them, on a GPU as in the interpreter (which "
        "cannot time them), so both judge the same code; on a GPU, timing every config for "
        "each new width would take minutes"
    )
    if position == 0 and note not in NOTES:
        NOTES.append(note)
    return [float(position)] * 3


def _no_disk_cache(tuner, tuning_key, configs, bench_fn) -> bool:
    """Autotune without Triton's disk cache: choose here, and leave no timings there that a
    real autotune (the student's own, or the timing cell's) would read as measured."""
    bench_fn()
    return False


def first_configs() -> None:
    """Make every autotuned kernel run the first config pruning leaves for each key, untimed,
    on any device (idempotent). The interpreter needs it; a check on a GPU takes it too, so
    CPU and GPU judge the same code and a kernel with 120 configs keyed on the width is
    checked in seconds, not minutes. Only the check's processes call it: timing stays real."""
    _autotuner.Autotuner._bench = _first_config
    _autotuner.Autotuner.check_disk_cache = _no_disk_cache


_CREATE_BINDER = _jit.JITFunction.create_binder


def _unspecialized_binder(kernel):
    for param in kernel.params:
        if not param.is_constexpr:
            param.do_not_specialize = param.do_not_specialize_on_alignment = True
    return _CREATE_BINDER(kernel)


def one_compile_per_shape() -> None:
    """Compile each kernel once per set of constexprs and dtypes, not again for every class
    of integer value (1, a multiple of 16, other) and pointer alignment the arguments fall in
    (idempotent). A check's cases come with random strides and offsets, so on a GPU most
    cases were a compile of their own: the solution's hidden cases took 107 compiles and
    10.6 s on the H200 host, and 81 compiles and 6.2 s without these classes. Specializing
    changes how fast the code runs, never what it computes (a check's processes call this;
    the timing and the student's own runs keep specializing). The interpreter compiles
    nothing and never specialized."""
    _jit.JITFunction.create_binder = _unspecialized_binder


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


class _Names:
    """A module's globals as attributes, so Triton's patch scope can swap and restore them."""

    def __init__(self, names: dict) -> None:
        object.__setattr__(self, "_names", names)

    def __getattr__(self, name: str):
        try:
            return self._names[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value) -> None:
        self._names[name] = value

    def __delattr__(self, name: str) -> None:
        del self._names[name]


_PATCH_LANG = _interpreter._patch_lang
_LANG = SimpleNamespace(scope=None)
"""`tl` patched for the interpreter, once for the process (`_patch_lang`)."""


def _patch_lang(fn):
    """Triton's patching of `tl` for the interpreter, done once and kept (Triton patches
    about 300 functions and puts them back around every launch, about 1.7 ms a launch and a
    third of a check's time; before Triton 3.4 it kept them too), then the kernel's globals
    that are `tl` builtins under another name, swapped for this launch only."""
    if _LANG.scope is None:
        _LANG.scope = _PATCH_LANG(SimpleNamespace(__globals__={"tl": tl, "core": tl.core}))
    scope = _interpreter._LangPatchScope()
    names = _Names(fn.__globals__)
    for name, value in list(fn.__globals__.items()):
        if tl.core.is_builtin(value):  # `tl`'s own are swapped by now: these are aliases
            _interpreter._patch_attr(names, name, value, _interpreter.interpreter_builder, scope)
    return scope


# -- bfloat16 ---------------------------------------------------------------------------------

_BF16 = tl.bfloat16


def _is_bf16(value) -> bool:
    return isinstance(value, _interpreter.TensorHandle) and value.dtype.scalar == _BF16


def bf16_values(bits: np.ndarray) -> np.ndarray:
    """The float32 values of bfloat16 bit patterns (exact: bfloat16 is float32's top half)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (to nearest, ties to even), as bit patterns; NaN
    stays a quiet NaN of its sign, as a GPU's conversion leaves it."""
    values = np.asarray(values, dtype=np.float32)
    bits = values.view(np.uint32)
    odd = (bits >> np.uint32(16)) & np.uint32(1)
    rounded = ((bits + np.uint32(0x7FFF) + odd) >> np.uint32(16)).astype(np.uint16)
    quiet = ((bits >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16)
    return np.where(np.isnan(values), quiet, rounded)


def _widened(value):
    """A bfloat16 handle as float32 values; anything else as it is."""
    if not _is_bf16(value):
        return value
    return _interpreter.TensorHandle(bf16_values(value.data), tl.float32)


def _narrowed(handle):
    """A float32 handle rounded to bfloat16."""
    return _interpreter.TensorHandle(bf16_bits(handle.data), _BF16)


def _on_values(method: Callable, result_from: int | None) -> Callable:
    """`method` run on the values of its bfloat16 operands, in float32; the result rounded
    to bfloat16 when the operand it takes its type from (`result_from`) was bfloat16."""

    def run(builder, *args):
        if not any(_is_bf16(a) for a in args):
            return method(builder, *args)
        out = method(builder, *(_widened(a) for a in args))
        narrow = result_from is not None and _is_bf16(args[result_from])
        if narrow and isinstance(out, _interpreter.TensorHandle) and out.dtype.scalar == tl.float32:
            return _narrowed(out)
        return out

    run.__wrapped__ = method
    return run


_BINARY = ("fadd", "fsub", "fmul", "fdiv", "frem", "precise_divf", "approx_divf")
_BINARY += ("minimumf", "minnumf", "maximumf", "maxnumf")
_COMPARE = tuple(f"fcmp{o}{c}" for o in "OU" for c in ("LT", "GT", "LE", "GE", "EQ", "NE"))
_UNARY = ("fneg", "cos", "sin", "exp", "exp2", "log", "log2", "sqrt", "precise_sqrt")
_UNARY += ("rsqrt", "erf", "floor", "ceil")
BF16_OPERATIONS = (
    *((f"create_{op}", 0) for op in _BINARY + _UNARY),
    *((f"create_{op}", None) for op in _COMPARE),
    ("create_fma", 2),
    ("create_clampf", 0),
    ("create_dot", 2),
)
"""The builder's floating-point operations, each with the operand its result's type is
taken from (None: a comparison, whose result is a boolean)."""


def _cast(cast_impl: Callable) -> Callable:
    """The interpreter's casts, through float32 where one side is bfloat16 and the other
    is not float32: it converts bfloat16 only to and from float32, and cast other types'
    values as if they were bit patterns."""

    def cast(builder, src, dst_type):
        to_bf16 = dst_type.scalar == _BF16 and src.dtype.scalar not in (_BF16, tl.float32)
        if _is_bf16(src) and dst_type.scalar not in (_BF16, tl.float32):
            return cast_impl(builder, _widened(src), dst_type)
        if to_bf16:
            return cast_impl(builder, cast_impl(builder, src, tl.float32), dst_type)
        return cast_impl(builder, src, dst_type)

    cast.__wrapped__ = cast_impl
    return cast


def _reduced(reduce: Callable) -> Callable:
    """A vectorised reduction or scan (sum, max, cumsum, ...) of a bfloat16 tensor, on its
    values in float32 with the result rounded to bfloat16 (indices as they are)."""

    def run(ops, input, *args, **kwargs):
        first = input[0] if isinstance(input, tuple) else input  # min_max: (values, index)
        if not isinstance(first, tl.core.tensor) or first.dtype != _BF16:
            return reduce(ops, input, *args, **kwargs)
        handle = _interpreter.TensorHandle(bf16_values(first.handle.data), tl.float32)
        values = tl.core.tensor(handle, _float32_type(first))
        widened = (values, *input[1:]) if isinstance(input, tuple) else values
        return _rounded(reduce(ops, widened, *args, **kwargs))

    run.__wrapped__ = reduce
    return run


def _float32_type(t):
    """`t`'s type with float32 elements."""
    return tl.block_type(tl.float32, list(t.shape)) if t.shape else tl.float32


def _rounded(out):
    """A reduction's float32 results (a tensor, a list or tuple of them) as bfloat16."""
    if isinstance(out, (list, tuple)):
        return type(out)(_rounded(o) for o in out)
    if isinstance(out, tl.core.tensor) and out.dtype == tl.float32:
        bits = bf16_bits(out.handle.data)
        kind = tl.block_type(_BF16, list(out.shape)) if out.shape else _BF16
        return tl.core.tensor(_interpreter.TensorHandle(bits, _BF16), kind)
    return out


_REDUCTIONS = (
    (_interpreter.ReduceOps, ("sum", "min_max")),
    (_interpreter.ScanOps, ("cumsum", "cumprod")),
)


def _install_bf16() -> None:
    """Run bfloat16 arithmetic on values (idempotent: each method wrapped once)."""
    builder = _interpreter.InterpreterBuilder
    for name, result_from in BF16_OPERATIONS:
        method = getattr(builder, name, None)
        if method is not None and not hasattr(method, "__wrapped__"):
            setattr(builder, name, _on_values(method, result_from))
    if not hasattr(builder.cast_impl, "__wrapped__"):
        builder.cast_impl = _cast(builder.cast_impl)
    for ops, names in _REDUCTIONS:
        for name in names:
            method = getattr(ops, name, None)
            if method is not None and not hasattr(method, "__wrapped__"):
                setattr(ops, name, _reduced(method))


def _settings(config) -> str:
    """A config as its meta-parameters and options, leaving out those it does not set."""
    return ", ".join(f"{k}={v}" for k, v in config.all_kwargs().items() if v is not None)


def install() -> None:
    """Let interpreted kernels be warmed up into handles, loop over tensor induction
    variables, be autotuned, call `tl` functions by other names and compute in bfloat16, as
    compiled ones do, and refuse the grids a GPU refuses (idempotent)."""
    _interpreter.InterpretedFunction.warmup = _warmup
    _interpreter.InterpreterBuilder.set_grid_dim = _set_grid_dim
    _interpreter._patch_lang_core = _patch_lang_core
    _interpreter._patch_lang = _patch_lang
    first_configs()
    _install_bf16()
    _skip_unasserted_overflow_checks()


def _skip_unasserted_overflow_checks() -> None:
    """Build no integer-overflow checks that nothing asserts. With `sanitize_overflow` on,
    every int32 `+`, `-` and `*` is done again in int64 and compared with int32's bounds for a
    `device_assert`, which does nothing unless the options ask for `debug`, as the
    interpreter's never do (a compiled kernel drops the same checks unless built for debug).
    The values are the same either way; the checks were a third of a case's time."""
    builder = _interpreter.interpreter_builder
    options = getattr(builder, "options", None)
    if options is not None and not options.debug and options.sanitize_overflow:
        builder.options = dataclasses.replace(options, sanitize_overflow=False)
