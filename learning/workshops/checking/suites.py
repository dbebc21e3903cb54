"""The functions the checks know, their references, and their public cases.

An `Op` is a function under test: its name in the notebook, its float64 reference, whether
it owns the input contracts, and its public cases, which `check` runs and whose names the
notebook's visible test cells pick from. The hidden cases (`grader.grading.hidden`) are drawn
from the same kinds of view.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from learning.workshops.checking.bad_inputs import BACKWARD_BAD_INPUTS
from learning.workshops.checking.records import Case


@dataclass(frozen=True)
class Op:
    """A function under test: its name, its reference, and whether it owns the contracts."""

    name: str
    function: str
    reference: Callable[..., torch.Tensor]
    exact: bool
    contracts: bool
    public: tuple[Case, ...] = ()
    """The public cases; the main ops' are `PUBLIC_CASES`."""
    kind: str = "new"
    """"new": returns a new tensor (the main ops); "in-place": writes its input and returns
    it; "backward": takes (y, dy). `followons` runs the last two."""
    normalized: bool = True
    """Whether each output row sums to one (a softmax's does; a gradient's sums to zero)."""


def _softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.double(), dim=1)


def _copy_reference(x: torch.Tensor) -> torch.Tensor:
    return x.double().contiguous()


def _backward_reference(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    y, dy = y.double(), dy.double()
    return y * (dy - (dy * y).sum(dim=1, keepdim=True))


PUBLIC_CASES = (
    Case("contiguous", "contiguous", 5, 7),
    Case("contiguous-pow2", "contiguous", 4, 64),
    Case("transpose", "transpose", 7, 5),
    Case("transpose-wide", "transpose", 3, 1000),
    Case("slice", "slice", 6, 9),
    Case("transposed-slice", "transposed-slice", 5, 6),
    Case("row-broadcast", "row-broadcast", 4, 33),
    Case("col-broadcast", "col-broadcast", 6, 5),
    Case("width-one", "transpose", 5, 1),
    Case("large-magnitude", "transpose", 4, 20, fill="large"),
    Case("some-neg-inf", "contiguous", 6, 12, fill="neg-inf"),
    Case("neg-inf-head-wide", "transpose", 3, 1000, fill="neg-inf-head"),
    Case("float16-transpose", "transpose", 7, 5, dtype="float16"),
    Case("bfloat16-slice", "slice", 6, 9, dtype="bfloat16"),
    Case("repeat-same-shape", "transpose", 5, 7, repeat=True),
    Case("eight-warps", "transpose", 7, 5, num_warps=8),
    Case("zero-rows", "transpose", 0, 7),
    Case("reject-3-d", bad_input="3-d"),
    Case("reject-int-dtype", bad_input="int-dtype"),
    Case("reject-warps-6", bad_input="warps-6"),
    Case("reject-cpu-input", bad_input="cpu-input"),
)

INPLACE_CASES = (
    Case("contiguous", "contiguous", 5, 7),
    Case("transpose", "transpose", 7, 5),
    Case("slice", "slice", 6, 9),
    Case("transposed-slice", "transposed-slice", 5, 6),
    Case("transpose-wide", "transpose", 3, 300),
    Case("width-one", "transpose", 5, 1),
    Case("large-magnitude", "transpose", 4, 20, fill="large"),
    Case("float16-slice", "slice", 6, 9, dtype="float16"),
    Case("bfloat16-transpose", "transpose", 7, 5, dtype="bfloat16"),
    Case("zero-rows", "transpose", 0, 7),
    Case("refuse-row-broadcast", "row-broadcast", 4, 6),
    Case("refuse-col-broadcast", "col-broadcast", 6, 5),
    Case("refuse-overlapping", "overlapping", 4, 6),
    Case("reject-3-d", bad_input="3-d"),
    Case("reject-int-dtype", bad_input="int-dtype"),
    Case("reject-warps-6", bad_input="warps-6"),
    Case("reject-cpu-input", bad_input="cpu-input"),
)
"""`strided_softmax_`'s cases: views it must softmax in place, views whose elements share
addresses ("refuse-"), which it must refuse untouched, and bad inputs."""

BACKWARD_CASES = (
    Case("contiguous", "contiguous", 5, 7, grad_layout="contiguous"),
    Case("transpose", "transpose", 7, 5, grad_layout="transpose"),
    Case("slice", "slice", 6, 9, grad_layout="slice"),
    Case("transposed-y", "transpose", 6, 9, grad_layout="contiguous"),
    Case("sliced-dy", "contiguous", 5, 6, grad_layout="slice"),
    Case("broadcast-dy", "contiguous", 4, 33, grad_layout="row-broadcast"),
    Case("wide", "transpose", 3, 300, grad_layout="transposed-slice"),
    Case("width-one", "transpose", 5, 1, grad_layout="contiguous"),
    Case("float16", "transpose", 7, 5, dtype="float16", grad_layout="slice"),
    Case("bfloat16", "slice", 6, 9, dtype="bfloat16", grad_layout="transpose"),
    Case("zero-rows", "transpose", 0, 7, grad_layout="contiguous"),
    *(Case(f"reject-{kind}", bad_input=kind) for kind in BACKWARD_BAD_INPUTS),
)
"""`strided_softmax_backward`'s cases: y (`layout`) and dy (`grad_layout`) views, with the
same strides and with different ones, and bad inputs. In broadcast-dy both column strides
are 1 and only the row strides differ, so a kernel that ignores only column strides passes
it and one that starts row r at r*N does not."""

OPS = {
    "strided_softmax": Op(
        "strided_softmax",
        "strided_softmax",
        _softmax_reference,
        exact=False,
        contracts=True,
        public=PUBLIC_CASES,
    ),
    "softmax_kernel": Op(
        "softmax_kernel",
        "launch_softmax",
        _softmax_reference,
        exact=False,
        contracts=False,
        public=PUBLIC_CASES,
    ),
    "copy_rows": Op(
        "copy_rows", "copy_rows", _copy_reference, exact=True, contracts=False, public=PUBLIC_CASES
    ),
    "strided_softmax_": Op(
        "strided_softmax_",
        "strided_softmax_",
        _softmax_reference,
        exact=False,
        contracts=True,
        public=INPLACE_CASES,
        kind="in-place",
    ),
    "strided_softmax_backward": Op(
        "strided_softmax_backward",
        "strided_softmax_backward",
        _backward_reference,
        exact=False,
        contracts=True,
        public=BACKWARD_CASES,
        kind="backward",
        normalized=False,
    ),
}


def suite(op: str, cases: tuple[Case, ...] | None = None, device: str = "cpu") -> list[Case]:
    """The cases that apply to `op` on `device` (kernel-level ops skip the contract cases),
    from `cases` or else `op`'s public cases."""
    chosen = []
    for case in OPS[op].public if cases is None else cases:
        contract_case = case.bad_input is not None or case.rows == 0
        if contract_case and not OPS[op].contracts:
            continue
        if case.bad_input == "cpu-input" and device == "cpu":
            continue  # the CPU is a valid device under the interpreter
        chosen.append(case)
    return chosen
