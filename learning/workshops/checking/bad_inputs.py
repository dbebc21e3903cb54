"""The bad inputs each op must refuse, and what its error must say about them.

A bad-input case calls the function on an input the contract forbids (a 3-D tensor, an
integer dtype, `num_warps=6`, a CPU tensor while CUDA is in use; for the backward also a
`dy` whose shape is not `y`'s): it must raise ValueError or TypeError with words that name
the problem. The runners (`cases`, `followons`) and the parent's judge (`judge`) build the
same inputs and expect the same words here.
"""

from __future__ import annotations

import torch

from learning.workshops.checking.raised import expect_refusal
from learning.workshops.checking.records import Case, Verdict

BAD_INPUTS = ("3-d", "int-dtype", "warps-6", "cpu-input")
BACKWARD_BAD_INPUTS = ("shape-mismatch", "3-d", "int-dtype", "warps-6")


def _bad_input(kind: str, device, generator) -> tuple[torch.Tensor, int, tuple[str, ...]]:
    """The input for a bad-input case and the words its error message must contain."""
    if kind == "3-d":
        return torch.randn(2, 3, 4, generator=generator).to(device), 4, ("3-D", "(2, 3, 4)")
    if kind == "int-dtype":
        return (
            torch.randint(0, 9, (4, 5), generator=generator, dtype=torch.int32).to(device),
            4,
            ("int32",),
        )
    if kind == "warps-6":
        return torch.randn(4, 5, generator=generator).to(device), 6, ("6",)
    if kind == "cpu-input":
        return torch.randn(4, 5, generator=generator), 4, ("cpu", "CPU")
    raise ValueError(f"unknown bad input {kind!r}; choose one of {', '.join(BAD_INPUTS)}.")


def bad_input_case(kind: str, device, generator) -> tuple[tuple, int, str, tuple[str, ...]]:
    """A bad-input case's arguments, num_warps, description and the words its error must
    contain."""
    x, num_warps, words = _bad_input(kind, device, generator)
    what = (
        f"{tuple(x.shape)} {str(x.dtype).removeprefix('torch.')} on {x.device}, "
        f"num_warps={num_warps}"
    )
    return (x,), num_warps, what, words


def backward_bad_case(kind: str, device, generator) -> tuple[tuple, int, str, tuple[str, ...]]:
    """A bad (y, dy) pair's arguments, num_warps, description and the words its error must
    contain."""

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=generator).to(dtype=dtype, device=device)

    y, dy, num_warps, words = {
        "shape-mismatch": lambda: (randn(4, 5), randn(5, 4), 4, ("(4, 5)", "(5, 4)")),
        "3-d": lambda: (randn(2, 3, 4), randn(2, 3, 4), 4, ("3-D", "(2, 3, 4)")),
        "int-dtype": lambda: (
            torch.randint(0, 9, (4, 5), generator=generator, dtype=torch.int32).to(device),
            torch.randint(0, 9, (4, 5), generator=generator, dtype=torch.int32).to(device),
            4,
            ("int32",),
        ),
        "warps-6": lambda: (randn(4, 5), randn(4, 5), 6, ("6",)),
    }[kind]()
    what = f"y {tuple(y.shape)}, dy {tuple(dy.shape)} {str(y.dtype).removeprefix('torch.')}"
    what += f", num_warps={num_warps}"
    return (y, dy), num_warps, what, words


def bad_case(kind: str, backward: bool, device, generator) -> tuple:
    """The arguments, num_warps, description and words of bad input `kind`, for the
    backward's (y, dy) pair when `backward`, else for one input."""
    build = backward_bad_case if backward else bad_input_case
    return build(kind, device, generator)


def run_bad_input(fn, case: Case, device, generator, seen=None, backward=False) -> Verdict:
    """Call `fn` on the case's bad input: it must raise ValueError or TypeError naming the
    problem; `seen` records the call for a parent to judge."""
    args, num_warps, what, words = bad_case(case.bad_input, backward, device, generator)
    return expect_refusal(fn, args, num_warps, what, words, seen)
