"""The timing sidecars as tables: a student's columns of the long table, one row per
(student, hidden shape) for the speed plots, and the timings refused (0 points, with the
grading's reason) for the instructor."""

from __future__ import annotations

import csv
import math
from collections import Counter
from dataclasses import astuple, dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd

from grader.grading.timing_record import (
    BANDS,
    SLOWEST_FRACTION,
    Band,
    ShapeTiming,
    TimingRecord,
    bands_from_config,
)

BYTES_PER_ELEMENT = 4
"""The timing cell times fp32 inputs: logical traffic is 2 x M x N x 4 bytes."""

FLOOR = "physics floor"
WRONG = "wrong output"
DISTURBED = "disturbed reference"
OUT_OF_MEMORY = "out of memory"
FAILED = "timing failed"
CHECKER = "checker fault"
OTHER = "refused"
WHAT_TO_DO = {
    FLOOR: "faster than a plain copy of the same bytes allows, measured in the same run: no "
    "softmax can be, so it suggests tampering or a broken measurement; read the submission and "
    "time it again",
    DISTURBED: "the reference ran slower beside the submission than alone, after a retry: look "
    "for work it leaves running on the GPU, or a neighbour on the card; time it again alone",
    WRONG: "its output on a timed input was wrong: a bug, no review needed",
    OUT_OF_MEMORY: "the GPU ran out of memory, after a retry: check whether another job held "
    "it, then autograde the submission again",
    FAILED: "the student's side of the timing failed: the reason says how",
    CHECKER: "the timing's own code failed, not the student's: fix it and autograde again",
    OTHER: "refused by the grading: the reason says why",
}
"""Each kind of refusal, and what it asks of the instructor."""
REVIEW = (FLOOR, DISTURBED)
"""The kinds flagged for the instructor: the time itself is in doubt, not the student's code."""
REFUSED_SECTION = "Timing refused or flagged for review"
"""The report page's section that lists every refusal; the summary and the plots name it."""
EVERY_SHAPE = "every shape"
"""The shape of a refusal of the whole timing (it measured no shape)."""


@dataclass(frozen=True)
class Refusal:
    """A timed shape (or a whole timing) that earned 0 timing points, and why."""

    student: str
    shape: str  # "4096x4096", or EVERY_SHAPE when the timing measured none
    kind: str  # FLOOR, WRONG, DISTURBED, OUT_OF_MEMORY, FAILED, CHECKER or OTHER
    reason: str  # the grading's words, as in the sidecar and the grading log
    student_ms: float | None = None
    reference_ms: float | None = None  # beside the submission, interleaved
    copy_ms: float | None = None  # a plain device copy of the same bytes: the floor
    reference_alone_ms: float | None = None  # once the submission had gone

    @property
    def review(self) -> bool:
        """Whether the instructor should look: the time itself is in doubt."""
        return self.kind in REVIEW


def refusal_kind(shape: ShapeTiming) -> str:
    """Why a timed shape earned nothing, as one of the kinds above; "" when it earned its band.
    From the grading's reason (grader.grading.gpu_timing), and from the numbers for a time
    under its copy's whatever the words say."""
    reason = shape.reason
    if not reason:
        return ""
    if reason.startswith("wrong") or not shape.correct:
        return WRONG
    if "kept the GPU busy" in reason:
        return DISTURBED
    if "faster than a plain copy" in reason or (
        shape.copy_ms is not None and shape.student_ms < shape.copy_ms
    ):
        return FLOOR
    if OUT_OF_MEMORY in reason:
        return OUT_OF_MEMORY
    return OTHER


def refusals(timings: dict[str, TimingRecord | None]) -> tuple[Refusal, ...]:
    """Every refused shape, and every timing that failed, of the students' timing sidecars:
    those for review first (the physics floor's before a disturbed reference's), then by
    student."""
    found = []
    for student, record in timings.items():
        if record is None:
            continue
        if not record.shapes and record.error:
            kind = (
                CHECKER
                if record.internal_error
                else OUT_OF_MEMORY
                if OUT_OF_MEMORY in record.error
                else FAILED
            )
            found.append(Refusal(student, EVERY_SHAPE, kind, record.error))
        for s in record.shapes:
            kind = refusal_kind(s)
            if kind:
                found.append(
                    Refusal(
                        student,
                        s.shape,
                        kind,
                        s.reason,
                        s.student_ms,
                        s.reference_ms,
                        s.copy_ms,
                        s.reference_alone_ms,
                    )
                )
    order = {kind: i for i, kind in enumerate(REVIEW)}
    return tuple(sorted(found, key=lambda r: (order.get(r.kind, len(REVIEW)), r.student)))


REFUSED_CSV = "timing_refused.csv"
REFUSED_COLUMNS = (*(f.name for f in fields(Refusal)), "review")


def save_refusals(found: tuple[Refusal, ...], out: Path) -> Path:
    """Write `timing_refused.csv`: one row per refusal (the header alone when none); times in
    ms, empty where not measured; review is "yes" for the kinds flagged for the instructor."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / REFUSED_CSV
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(REFUSED_COLUMNS)
        for r in found:
            values = ["" if v is None else v for v in astuple(r)]
            writer.writerow([*values, "yes" if r.review else "no"])
    return path


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
    """One row per (student, hidden shape) from the timing sidecars; empty without any.
    `refusal` is the kind of refusal of a shape that earned nothing (`refusal_kind`), ""
    for one that earned its band."""
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
            "reason": s.reason,
            "refusal": refusal_kind(s),
            "copy_ms": math.nan if s.copy_ms is None else s.copy_ms,
            "student_gbps": _gbps(s.rows, s.cols, s.student_ms),
            "reference_gbps": _gbps(s.rows, s.cols, s.reference_ms),
            "bands": _bands(record),
        }
        for student, record in timings.items()
        if record is not None
        for s in record.shapes
    ]
    columns = ["student", "device", "shape", "rows", "cols", "student_ms", "reference_ms"]
    columns += ["ratio", "correct", "fraction", "reason", "refusal", "copy_ms"]
    columns += ["student_gbps", "reference_gbps", "bands"]
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
