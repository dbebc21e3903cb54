"""The timing sidecars as tables: a student's columns of the long table, and one row per
(student, hidden shape) for the speed plots."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd

from grader.grading.timing_record import (
    BANDS,
    SLOWEST_FRACTION,
    Band,
    TimingRecord,
    bands_from_config,
)

BYTES_PER_ELEMENT = 4
"""The timing cell times fp32 inputs: logical traffic is 2 x M x N x 4 bytes."""


def timing_columns(timing: TimingRecord | None) -> dict[str, float]:
    """A student's timing columns of the long table: medians summed over the shapes, the
    geometric mean of the ratios, the points; NaN without a timing sidecar (never zero)."""
    if timing is None or not timing.shapes:
        nan = math.nan
        return {"student_ms": nan, "reference_ms": nan, "ratio": nan, "timing_points": nan}
    ratios = [s.ratio for s in timing.shapes]
    return {
        "student_ms": sum(s.student_ms for s in timing.shapes),
        "reference_ms": sum(s.reference_ms for s in timing.shapes),
        "ratio": float(np.exp(np.mean(np.log(ratios)))),
        "timing_points": timing.points,
    }


def timing_table(timings: dict[str, TimingRecord | None]) -> pd.DataFrame:
    """One row per (student, hidden shape) from the timing sidecars; empty without any."""
    rows = [
        {
            "student": student,
            "device": record.device,
            "shape": s.shape,
            "rows": s.rows,
            "cols": s.cols,
            "student_ms": s.student_ms,
            "reference_ms": s.reference_ms,
            "ratio": s.ratio,
            "correct": s.correct,
            "fraction": s.fraction,
            "student_gbps": _gbps(s.rows, s.cols, s.student_ms),
            "reference_gbps": _gbps(s.rows, s.cols, s.reference_ms),
            "bands": _bands(record),
        }
        for student, record in timings.items()
        if record is not None
        for s in record.shapes
    ]
    columns = ["student", "device", "shape", "rows", "cols", "student_ms", "reference_ms"]
    columns += ["ratio", "correct", "fraction", "student_gbps", "reference_gbps", "bands"]
    return pd.DataFrame(rows, columns=columns)


def graded_bands(timing: pd.DataFrame) -> tuple[Band, ...]:
    """The bands the cohort's timings were scored with (the sidecars record them; the most
    common when they differ), or the default policy for sidecars without them."""
    recorded = [b for b in timing.get("bands", pd.Series(dtype=object)) if b]
    if not recorded:
        return BANDS
    (pairs, slowest), _ = Counter(recorded).most_common(1)[0]
    return bands_from_config(pairs, slowest)


def _bands(record: TimingRecord) -> tuple | None:
    """The record's bands and slowest fraction, hashable; None when it has none."""
    if not record.bands:
        return None
    pairs = tuple((float(limit), float(fraction)) for limit, fraction in record.bands)
    slowest = SLOWEST_FRACTION if record.slowest_fraction is None else record.slowest_fraction
    return pairs, float(slowest)


def _gbps(rows: int, cols: int, ms: float) -> float:
    """Logical bandwidth: the view read once and the output written once, fp32."""
    return 2 * rows * cols * BYTES_PER_ELEMENT / (ms * 1e-3) / 1e9
