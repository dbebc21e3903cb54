"""The portfolio softmax from the earlier lessons: fast, and only for contiguous rows.

It assumes each row's columns sit next to each other (`x.stride(1) == 1`) and refuses
anything else. The workshop starts from why that refusal exists.
"""

import torch
import triton
import triton.language as tl

from learning.workshops.contracts import device_context, matrix, select_mode

select_mode(verbose=False)  # before the kernel below is defined


@triton.jit
def _contiguous_rows_softmax(X, Y, SR, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * SR + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(Y + row * N + cols, (e / tl.sum(e, axis=0)).to(Y.dtype.element_ty), mask=cols < N)


def contiguous_softmax(x: torch.Tensor) -> torch.Tensor:
    """Row softmax of `x`, whose columns must be adjacent in memory."""
    m, n = matrix(x)
    if x.stride(1) != 1:
        raise ValueError(
            f"contiguous_softmax needs adjacent columns (stride(1) == 1), got strides "
            f"{tuple(x.stride())}; this is the limit the workshop removes."
        )
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if m:
        with device_context(x):
            _contiguous_rows_softmax[(m,)](x, y, x.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return y
