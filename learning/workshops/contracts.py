"""Contracts every kernel wrapper in the workshop checks before it launches.

`select_mode()` runs first, before any `@triton.jit` function is defined: with no CUDA
device it switches Triton to its interpreter, where kernels run on CPU tensors.
`matrix` and `warps` turn bad arguments into errors that say what to do, and
`device_context` makes a launch target the device that holds the input.
"""

from __future__ import annotations

import contextlib
import os

import torch

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MAX_WIDTH = 65536
"""Widest row the one-program-per-row kernel accepts, a limit of this course, not of Triton.

The row is one block, and 65536 fp32 values would fill every register of an SM (65536
32-bit registers on an H200; a thread gets at most 255), so no program keeps such a row in
registers: the compiler spills much of it to local memory (per-thread memory in the GPU's
DRAM, cached in L1/L2), still correct but slow. Wider rows need a looped kernel.
"""


def interpreter_active() -> bool:
    """True when Triton runs kernels in its interpreter (`TRITON_INTERPRET=1`)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def select_mode(verbose: bool = True) -> str:
    """Pick how kernels run, once, before any kernel is defined; return the mode's name.

    With a CUDA device kernels compile for it ("gpu"). Without one, this sets
    `TRITON_INTERPRET=1` so kernels run on CPU tensors in Triton's interpreter
    ("interpreter"): slow, but every address is checked the same way.
    """
    if not interpreter_active() and not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
    mode = "interpreter" if interpreter_active() else "gpu"
    if mode == "interpreter":
        from learning.workshops.notebook import interpreter

        interpreter.install()  # compiled handles and autotune, as on a GPU
    if verbose:
        print(describe_mode(mode))
    return mode


def describe_mode(mode: str) -> str:
    """One sentence that says where kernels run in `mode`."""
    if mode == "gpu":
        return f"Triton mode: gpu. Kernels compile for {torch.cuda.get_device_name()}."
    return (
        "Triton mode: interpreter (TRITON_INTERPRET=1). Kernels run on CPU tensors; "
        "results are real, timings are not."
    )


def default_device() -> torch.device:
    """The device that inputs should live on in the active mode."""
    if interpreter_active() or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", torch.cuda.current_device())


def describe_device(device: torch.device) -> str:
    """The device's name as people know it, e.g. 'cuda:0 (NVIDIA H200)'."""
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return f"{device} (Triton interpreter)" if interpreter_active() else str(device)


def matrix(x: object) -> tuple[int, int]:
    """Check that `x` is a 2-D float tensor the kernel can read; return `(M, N)`.

    Any strides are allowed, stride 0 included: the kernel only reads `x`.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"x must be a torch.Tensor, got {type(x).__name__}; build it with torch.tensor(...)."
        )
    if x.dim() != 2:
        raise ValueError(
            f"x must be 2-D (rows, columns), got {x.dim()}-D with shape {tuple(x.shape)}; "
            "reshape or index it to a matrix first."
        )
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(
            f"x has dtype {x.dtype}; use torch.float16, torch.bfloat16 or torch.float32 "
            "(for example x.float())."
        )
    m, n = x.shape
    if n == 0:
        raise ValueError(f"x has shape ({m}, 0): a row softmax needs at least one column.")
    if n > MAX_WIDTH:
        raise ValueError(
            f"x has {n} columns; one program holds a whole row, so at most {MAX_WIDTH} fit. "
            "Split the rows or use a looped kernel."
        )
    _check_device(x)
    return m, n


def writable_matrix(x: object) -> tuple[int, int]:
    """`matrix(x)` for a view written in place: also refuse a view in which two elements
    share an address (a stride-0 broadcast, overlapping strides), since each element of an
    in-place result must have one owner. Storage outside the view is never touched."""
    m, n = matrix(x)
    shared = shared_address(x)
    if shared is not None:
        raise ValueError(
            f"x has shape {tuple(x.shape)} and strides {tuple(x.stride())}: {shared}. "
            "Written in place, several results would go to one address: softmax a copy in "
            "place (x.clone()), or write a new output with strided_softmax(x)."
        )
    return m, n


def shared_address(x: torch.Tensor) -> str | None:
    """Why two elements of the 2-D view `x` share a storage address, or None if none do."""
    (m, n), (sr, sc) = x.shape, x.stride()
    if m == 0 or n == 0:
        return None
    for size, stride, what in ((m, sr, "row"), (n, sc, "column")):
        if size > 1 and stride == 0:
            return f"its {what} stride is 0, so its {size} {what}s share addresses (a broadcast)"
    if m < 2 or n < 2:
        return None
    (small, count), (large, _) = sorted(((sc, n), (sr, m)))
    if large >= small * (count - 1) + 1:
        return None  # the larger stride steps past every element of the smaller axis
    rows = torch.arange(m, device=x.device).unsqueeze(1) * sr
    index = (rows + torch.arange(n, device=x.device) * sc).flatten()
    if int(index.unique().numel()) == index.numel():
        return None  # interleaved, but every address once
    return "its strides overlap (the same address is reached from two (row, column) pairs)"


def matching_pair(y: object, dy: object) -> tuple[int, int]:
    """Check the backward's inputs: `y` (softmax outputs) and `dy` (their gradient), both
    2-D float views of one shape, dtype and device, any strides each; return `(M, N)`.
    float64 is accepted too, so `torch.autograd.gradcheck` can run on them."""
    for name, t in (("y", y), ("dy", dy)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}.")
        if t.dim() != 2:
            raise ValueError(
                f"{name} must be 2-D (rows, columns), got {t.dim()}-D with shape {tuple(t.shape)}."
            )
        if t.dtype not in (*FLOAT_DTYPES, torch.float64):
            raise TypeError(
                f"{name} has dtype {t.dtype}; use torch.float16, torch.bfloat16, "
                "torch.float32 or torch.float64."
            )
        _check_device(t)
    if y.shape != dy.shape:
        raise ValueError(
            f"y has shape {tuple(y.shape)} but dy has shape {tuple(dy.shape)}: the gradient "
            "has the shape of the output it belongs to."
        )
    if y.dtype != dy.dtype or y.device != dy.device:
        raise ValueError(
            f"y is {y.dtype} on {y.device} but dy is {dy.dtype} on {dy.device}: give both "
            "the same dtype and device."
        )
    m, n = y.shape
    if n == 0 or n > MAX_WIDTH:
        raise ValueError(f"y has {n} columns; a row needs 1 to {MAX_WIDTH} of them.")
    return m, n


def _check_device(x: torch.Tensor) -> None:
    if x.device.type == "cuda":
        return
    if x.device.type == "cpu" and interpreter_active():
        return
    if x.device.type == "cpu":
        raise ValueError(
            "x is on the CPU but Triton compiles for the GPU; move it with x.cuda(), "
            "or run with TRITON_INTERPRET=1 (select_mode() does this without a GPU)."
        )
    raise ValueError(
        f"x is on {x.device}; Triton here runs on CUDA devices or the CPU interpreter."
    )


def warps(n: object) -> int:
    """Check that `n` is a usable `num_warps`: a power of two from 1 to 32."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"num_warps must be an int, got {type(n).__name__} {n!r}.")
    if n < 1 or n > 32 or n & (n - 1):
        raise ValueError(f"num_warps must be a power of two from 1 to 32, got {n}; try 4 or 8.")
    return n


def device_context(x: torch.Tensor) -> contextlib.AbstractContextManager:
    """The context to launch under so the kernel runs on the device that holds `x`.

    Triton launches on the current CUDA device; an input on another GPU would be read
    through the wrong context. On the CPU (interpreter) there is nothing to switch.
    """
    if x.device.type == "cuda":
        return torch.cuda.device(x.device)
    return contextlib.nullcontext()
