"""Gradient checks for the backward exercise, as the notebook runs them.

`gradcheck_views` runs `torch.autograd.gradcheck` on a backward function with float64 views
(transposed, sliced, broadcast inputs): the forward is torch's exact float64 softmax, so
the finite differences are exact and only the backward is judged; its output is transposed
before the loss, so the backward receives a strided `dy`. `compare_with_torch` takes a
differentiable softmax (`StridedSoftmax.apply`) and compares its input gradients with
`torch.softmax`'s on fp32, fp16 and bf16 transposed views.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from learning.workshops.notebook.evidence import NOT_WRITTEN, not_written, raised_line

Backward = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

VIEWS = {
    "transposed": lambda base: base.t(),
    "sliced": lambda base: base[1:, ::2],
    "broadcast": lambda base: base[:1].expand(4, base.shape[1]),
}
"""How each gradcheck input is viewed before the softmax, from a (6, 5) float64 base."""

TOLERANCES = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
"""Largest gradient difference from torch's accepted, relative to the largest gradient."""


class _ExactForward(torch.autograd.Function):
    """torch's softmax forward with `backward` for the backward pass."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, backward: Backward) -> torch.Tensor:
        y = torch.softmax(x, dim=1)
        ctx.save_for_backward(y)
        ctx.backward = backward
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        (y,) = ctx.saved_tensors
        return ctx.backward(y, dy), None


def gradcheck_views(backward: Backward, device: torch.device | str) -> dict[str, bool]:
    """Whether `torch.autograd.gradcheck` passes `backward` on each float64 view."""
    generator = torch.Generator().manual_seed(0)
    passed = {}
    for name, view in VIEWS.items():
        base = torch.randn(6, 5, generator=generator, dtype=torch.float64)
        base = base.to(device).requires_grad_()
        passed[name] = torch.autograd.gradcheck(
            lambda b, view=view: _ExactForward.apply(view(b), backward).t(),
            (base,),
            raise_exception=False,
        )
    return passed


def compare_with_torch(softmax: Callable, device: torch.device | str) -> dict[str, float]:
    """The largest difference between `softmax`'s input gradients and torch.softmax's, for
    a transposed view of each dtype, relative to the largest gradient."""
    generator = torch.Generator().manual_seed(1)
    differences = {}
    for dtype in TOLERANCES:
        base = torch.randn(9, 7, generator=generator).to(device=device, dtype=dtype)
        weights = torch.randn(7, 9, generator=generator).to(device=device, dtype=dtype)
        grads = []
        for fn in (softmax, lambda x: torch.softmax(x.float(), dim=1).to(x.dtype)):
            leaf = base.clone().requires_grad_()
            (fn(leaf.t()) * weights).float().sum().backward()
            grads.append(leaf.grad.float())
        scale = grads[1].abs().max().clamp_min(1e-12)
        differences[str(dtype).removeprefix("torch.")] = float(
            (grads[0] - grads[1]).abs().max() / scale
        )
    return differences


def report(backward: Backward, softmax: Callable, device: torch.device | str) -> str:
    """Both checks as lines for the notebook; each line says passed or what failed. While
    `backward` still raises its stub's NotImplementedError, one line that says so instead,
    and one sentence for any other error: the cell is not graded, so it never raises and
    Run All goes on."""
    name = getattr(backward, "__name__", "the backward")
    try:
        gradchecks = gradcheck_views(backward, device)
        differences = compare_with_torch(softmax, device)
    except Exception as exc:
        if not_written(exc):
            return f"{name} is {NOT_WRITTEN}: gradcheck runs once it is."
        return (
            f"The gradient checks stopped: {raised_line(exc)}. Run the backward's test cells "
            "above for the case that fails, fix it, then run this cell again."
        )
    lines = []
    for view, ok in gradchecks.items():
        lines.append(f"gradcheck, float64 {view} view: {'passed' if ok else 'FAILED'}")
    for (dtype, difference), tolerance in zip(
        differences.items(), TOLERANCES.values(), strict=True
    ):
        verdict = "matches" if difference <= tolerance else "DIFFERS from"
        lines.append(
            f"{dtype} transposed view: gradient {verdict} torch.softmax's "
            f"(largest difference {difference:.2g} of the largest gradient)"
        )
    return "\n".join(lines)
