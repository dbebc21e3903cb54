"""The GPU timing cell's policy and its sidecar record (`i1_timing.json`), defined once.

`grader.grading.gpu_timing` scores by these bands and writes the record beside the graded
notebook; the cohort report, `grader.recheck` and `grader.gpu_check` read it back through
`load`, which refuses a bad file with `RecordError` and its reason.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path

from learning.workshops.checking.sidecars import RecordError, hidden_key, of_schema, read_json
from learning.workshops.measuring.results import fits

SIDECAR = "i1_timing.json"
SCHEMA = "i1-timing/1"
TEST = hidden_key("timing")
"""The timing cell's entry in the hints sidecar, written when the checker fails."""
MAX_POINTS = 2
"""The timing cell's points: its `nbgrader.points` in the source notebook and the number its
`timing_points(max_points=...)` call passes (tests/test_records.py holds them equal)."""


@dataclass(frozen=True)
class Band:
    """Correct kernels at most `limit` times the reference's time earn `fraction` of the
    points; `label` names the band on the cohort's ratio plot."""

    limit: float
    fraction: float
    label: str


BANDS = (
    Band(1.10, 1.0, "full points"),
    Band(1.5, 0.75, "3/4"),
    Band(2.5, 0.5, "1/2"),
    Band(5.0, 0.25, "1/4"),
)
"""From H200 runs (docs/gpu-results.md): two runs of the same kernel differ by 0.3% at most and
the reference timed against itself gives 1.00, so 1.10 leaves a wide margin for noise;
copying first costs 1.17-1.26x, so it lands in the 0.75 band; a kernel that reads its input
twice would cost about 2x."""
SLOWEST_FRACTION = 0.1
"""What a correct kernel slower than every band earns; a wrong one earns 0."""


def band(ratio: float, bands: Sequence[Band] = BANDS, slowest: float = SLOWEST_FRACTION) -> float:
    """The fraction of the points a correct kernel earns at this student/reference ratio."""
    for each in bands:
        if ratio <= each.limit:
            return each.fraction
    return slowest


def bands_from_config(pairs: Sequence[Sequence[float]], slowest: float) -> tuple[Band, ...]:
    """Bands from the course's configuration, [(limit, fraction), ...] (see nbgrader_config.py);
    ValueError, saying what is wrong, unless the limits rise from above 1, the fractions fall
    within (0, 1], and the slowest fraction is below the last band's."""
    labels = {1.0: "full points", 0.75: "3/4", 0.5: "1/2", 0.25: "1/4"}
    bands = tuple(Band(float(a), float(f), labels.get(float(f), f"{float(f):g}")) for a, f in pairs)
    problem = ""
    if not bands:
        problem = "no band is given"
    elif bands[0].limit < 1:
        problem = f"the first limit, {bands[0].limit:g}, is below 1 (the reference's own ratio)"
    elif any(a.limit >= b.limit or a.fraction < b.fraction for a, b in itertools.pairwise(bands)):
        problem = "the limits must rise and the fractions must not"
    elif not all(0 < b.fraction <= 1 for b in bands):
        problem = "every fraction must be above 0 and at most 1"
    elif not 0 <= slowest <= bands[-1].fraction:
        problem = f"the slowest fraction, {slowest:g}, must be between 0 and the last band's"
    if problem:
        raise ValueError(f"timing bands {[list(p) for p in pairs]}: {problem}")
    return bands


@dataclass(frozen=True)
class ShapeTiming:
    """One hidden shape: both medians, their ratio, and whether the outputs held up."""

    rows: int
    cols: int
    student_ms: float
    reference_ms: float
    student_min_ms: float
    student_max_ms: float
    ratio: float
    correct: bool
    fraction: float
    reason: str  # why the shape earns nothing ("" when it earns its band)
    student_wall_ms: float | None = None
    reference_wall_ms: float | None = None
    events_ms: float | None = None  # every timed call's events, both (records before 2026-12)
    copy_ms: float | None = None  # a plain device copy of the same bytes: the physics floor
    harness_ms: float | None = None  # the harness around each call, subtracted from both
    reference_alone_ms: float | None = None  # the reference once the submission had gone

    @property
    def shape(self) -> str:
        return f"{self.rows}x{self.cols}"


@dataclass(frozen=True)
class TimingRecord:
    """A timing sidecar: the points the cell gave and each hidden shape's medians; a timing
    that failed has no shapes and says why in `error`."""

    points: float
    max_points: float
    shapes: tuple[ShapeTiming, ...]
    device: str = "unknown device"
    error: str = ""
    internal_error: bool = False  # the timing's own code failed, not the student's
    versions: dict[str, str] = field(default_factory=dict)
    mode: str = ""
    reps: int = 0
    fraction: float | None = None  # the mean band over the shapes
    seconds: float | None = None  # how long the timing took, the GPU's lock held
    phase_seconds: dict | None = None  # where: "ready" (servers start), "timed", "alone"
    bands: list | None = None  # [[limit, fraction], ...] the grading scored with
    slowest_fraction: float | None = None  # what a correct kernel slower than them earned


def load(path: Path | str) -> TimingRecord:
    """Read a timing sidecar; RecordError (RecordMissing when absent) says why it is not one."""
    return from_json(read_json(path), path)


def from_json(data: object, path: Path | str) -> TimingRecord:
    """A timing record from parsed JSON, every field checked; RecordError names the first
    that is wrong."""
    raw = {k: v for k, v in of_schema(data, SCHEMA, path).items() if k != "schema"}
    typed(TimingRecord, raw, path, "")
    if not isinstance(raw["shapes"], list):
        raise RecordError(path, f"shapes is {raw['shapes']!r}, not a list")
    versions = raw.get("versions", {})
    if not isinstance(versions, dict) or not all(isinstance(v, str) for v in versions.values()):
        raise RecordError(path, f"versions is {versions!r}, not an object of strings")
    points, most = raw["points"], raw["max_points"]
    if not 0 <= points <= most or most <= 0:
        raise RecordError(path, f"points {points!r} of max_points {most!r}: not 0 <= points <= max")
    shapes = tuple(shape_timing(s, path, f"shape {i}: ") for i, s in enumerate(raw["shapes"]))
    return TimingRecord(**{**raw, "shapes": shapes})


def shape_timing(raw: object, path: Path | str, where: str) -> ShapeTiming:
    """One shape of a timing record, checked: typed fields, positive times and ratio, a
    fraction between 0 and 1."""
    if not isinstance(raw, dict):
        raise RecordError(path, f"{where}{raw!r} is not an object")
    shape = ShapeTiming(**typed(ShapeTiming, raw, path, where))
    times = (shape.student_ms, shape.reference_ms, shape.ratio)
    if not all(t > 0 for t in times):
        raise RecordError(path, f"{where}student_ms, reference_ms, ratio {times}: not all > 0")
    if not 0 <= shape.fraction <= 1:
        raise RecordError(path, f"{where}fraction is {shape.fraction!r}, not between 0 and 1")
    return shape


def typed(cls: type, raw: dict, path: Path | str, where: str) -> dict:
    """`raw` when it has every required field of the dataclass `cls`, no other, and each
    number, bool or string of its field's type; RecordError naming the first that is not."""
    known = {f.name: f for f in fields(cls)}
    unexpected = sorted(set(raw) - set(known))
    if unexpected:
        raise RecordError(path, f"{where}unexpected fields {unexpected}")
    missing = [name for name, f in known.items() if name not in raw and _required(f)]
    if missing:
        raise RecordError(path, f"{where}missing {', '.join(missing)}")
    for name, value in raw.items():
        annotation = known[name].type
        if _scalar(annotation) and not fits(value, annotation):
            raise RecordError(path, f"{where}{name} is {value!r}, not {annotation}")
    return raw


def _required(f: Field) -> bool:
    return f.default is MISSING and f.default_factory is MISSING


def _scalar(annotation: str) -> bool:
    """Whether an annotation names numbers, bools, strings or None (not a container)."""
    return set(annotation.replace(" ", "").split("|")) <= {"int", "float", "bool", "str", "None"}
