"""The timing server's draws and checksums, run on CPU by Triton's interpreter.

The parent judges a timed call only by its checksums (`grader.grading.gpu_timing`), so what
these hold is that a checksum is the projection it claims to be, whatever the output's
strides, and that an answer for another input cannot pass for this one."""

from __future__ import annotations

import pytest
import torch

from grader.grading.gpu_timing import _close
from learning.workshops.contracts import default_device
from learning.workshops.measuring.timed_calls import checksum, draw, projections

ROWS, COLS = 96, 70  # neither a multiple of a checksum's tile


def seed(value: int) -> torch.Tensor:
    return torch.tensor([value], dtype=torch.int64, device=default_device())


def projected(out: torch.Tensor, key: torch.Tensor) -> list[float]:
    """u . out . v in float64 by torch, from the same projections."""
    u, v = projections(*out.shape, key)
    return (u.double() @ (out.double() @ v.double())).tolist()


def test_draws_are_fresh_per_call_and_seed_and_repeat_for_both():
    x = draw(ROWS, COLS, seed(7), 0)
    assert x.shape == (ROWS, COLS) and x.stride() == (1, ROWS)  # a transposed view
    assert -1 <= x.min() and x.max() < 1 and abs(x.std().item() - 3**-0.5) < 0.02
    assert torch.equal(x, draw(ROWS, COLS, seed(7), 0))  # both servers draw the same input
    for other in (draw(ROWS, COLS, seed(7), 1), draw(ROWS, COLS, seed(8), 0)):
        assert (x != other).float().mean() > 0.99


@pytest.mark.parametrize(
    "layout",
    [
        lambda t: t,
        lambda t: t.t().contiguous().t(),  # column-major
        lambda t: torch.zeros(ROWS, 2 * COLS + 3, device=default_device())[:, 3::2].copy_(
            t
        ),  # offset, stride 2
    ],
    ids=["rows", "columns", "strided"],
)
def test_a_checksum_is_the_projection_whatever_the_strides(layout):
    key = seed(11)
    out = layout(torch.softmax(draw(ROWS, COLS, key, 0), dim=1))
    got = checksum(out, ROWS, COLS, key).tolist()
    want = projected(out, key)
    assert _close(got, want)
    assert torch.allclose(torch.tensor(got), torch.tensor(want), rtol=0, atol=1e-6)


def test_another_inputs_answer_fails_the_checksum():
    key = seed(3)
    right = torch.softmax(draw(ROWS, COLS, key, 1), dim=1)
    replayed = torch.softmax(draw(ROWS, COLS, key, 0), dim=1)  # the last call's answer
    want = checksum(right, ROWS, COLS, key).tolist()
    assert _close(checksum(right.clone(), ROWS, COLS, key).tolist(), want)
    assert not _close(checksum(replayed, ROWS, COLS, key).tolist(), want)


def test_a_checksum_refuses_what_is_not_the_output():
    key, device = seed(1), default_device()
    wrong = {
        "torch.float64 on .*, not float32": torch.zeros(ROWS, COLS, dtype=torch.float64),
        f"a {ROWS - 1}x{COLS} tensor, not a {ROWS}x{COLS}": torch.zeros(ROWS - 1, COLS),
    }
    wrong = {says: out.to(device) for says, out in wrong.items()}
    wrong["returned a NoneType"] = None
    if device.type == "cuda":
        wrong["float32 on cpu, not float32 on cuda"] = torch.zeros(ROWS, COLS)
    for says, out in wrong.items():
        with pytest.raises(ValueError, match=says):
            checksum(out, ROWS, COLS, key)
