"""Compare an output with its float64 reference, and a storage with itself before a call.

`compare` names how values differ (NaN where the reference is finite, the right values in
the wrong places, rows that sum to less than one, other wrong values): the hints read
those kinds. Every op's runner and the parent's judge use the same comparison.
"""

from __future__ import annotations

import torch

from learning.workshops.checking.records import Failure, Verdict

TOLERANCES = {  # (rtol, atol) against a float64 reference
    torch.float32: (1e-5, 1e-6),
    torch.float16: (2e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 4e-3),
}


def changed(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    """Where two storages differ, NaN equal to NaN."""
    return (before.nan_to_num() != after.nan_to_num()) | (before.isnan() != after.isnan())


def compare(out, ref, dtype, op) -> Verdict | None:
    """How `out` differs from the float64 `ref` at `dtype`'s tolerance (exactly, for an op
    that copies), or None when it does not; `op` says whether rows must sum to one."""
    got = out.double()
    rtol, atol = (0.0, 0.0) if op.exact else TOLERANCES[dtype]
    close = torch.isclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)
    if bool(close.all()):
        return None
    bad = (~close).nonzero()
    r, c = (int(v) for v in bad[0])
    where = (
        f"{len(bad)} of {close.numel()} values differ; first at row {r}, column {c}: "
        f"got {got[r, c].item():.6g}, expected {ref[r, c].to(out.dtype).item():.6g}"
    )  # the expected value as the output's dtype holds it (no float32 1e-256)
    if bool((~torch.isfinite(got) & torch.isfinite(ref)).any()):
        return Verdict(Failure.NONFINITE, f"NaN or inf where the reference is finite; {where}")
    if torch.allclose(got.flatten().sort().values, ref.flatten().sort().values, rtol, atol):
        if torch.unique(ref).numel() < ref.numel() // 2:
            return Verdict(
                Failure.AMBIGUOUS,
                "the expected values, nearly all equal (rows of ±1e4 give one-hot rows), in "
                f"other places: wrong loads or wrong stores could do that; {where}",
            )
        return Verdict(Failure.PERMUTED, f"the right values in the wrong places; {where}")
    if not op.exact and op.normalized:
        sums = got.sum(dim=1)
        low = sums < 1 - 4 * rtol  # beyond the rounding of N outputs
        high = sums > 1 + 4 * rtol  # mass moved between rows, not lost: a layout problem
        if bool(low.any()) and not bool(high.any()):
            row = int(low.nonzero()[0])
            text = f"row {row} sums to {sums[row].item():.6g}, not 1; {where}"
            return Verdict(Failure.SUM_LOW, text)
    return Verdict(Failure.VALUES, where)
