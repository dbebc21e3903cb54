"""What the cohort report knows: the assignment's cells, each student's grades and sidecar
data, the summary's numbers, and the report they make."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from grader import uploads
from grader.cohort.timings import Refusal
from grader.grading.timing_record import TimingRecord
from learning.workshops.measuring.results import H200_SAMPLE, Results


class CohortError(Exception):
    """The course cannot be reported on; the message says what to run first."""


EXTRA = "extra credit"
"""The kind of a cell whose points add to a score, never to the maximum."""
OPTIONAL = "optional"
"""The kind of a test cell worth 0 points and no extra credit (an optional section's public
check): its score is 0 of 0 whatever it did, so it is no full mark."""
OPTIONAL_KINDS = (EXTRA, OPTIONAL)
"""The kinds of the optional sections' cells, kept apart from the required ones."""
NOT_DONE_HINTS = ("not-attempted", "unfinished")
"""Hint ids that say the work was not done (left as its stub), not that it has a bug."""
HELD = "held for review"
"""A graded student's standing when the grade is held (`grader.grading.decisions`): its
scores are computed, not released."""
BLANK = "blank: nothing written"
"""A graded student's standing when every answer cell is the release's, unchanged (nbgrader's
own cell checksum, as it uses to score an unchanged hand-graded answer 0): the release
notebook submitted as it was, its zeros no verdict on any one cell."""
NOT_GRADABLE = uploads.NOT_GRADABLE
"""The status of a student whose upload could not be collected as a notebook
(`grader.uploads.not_gradable`): submitted, not missing."""


@dataclass(frozen=True)
class CellInfo:
    """A graded cell of the assignment, in notebook order."""

    notebook: str
    name: str
    max_score: float
    kind: str  # public, hidden, manual, extra credit, optional
    sidecar_keys: tuple[str, ...]  # the hint-sidecar tests this cell runs
    timing: bool  # the GPU timing cell
    section: str = ""  # the notebook's heading above it ("" when the notebook is not found)


@dataclass(frozen=True)
class CellGrade:
    """One student's grade for one cell, as the gradebook stores it."""

    auto_score: float | None
    manual_score: float | None
    extra_credit: float | None
    needs_manual_grade: bool


@dataclass
class StudentRecord:
    """Everything the report knows about one student on the roster."""

    student: str
    submitted: bool
    autograded: bool  # an autograded notebook exists
    in_submitted_folder: bool
    late_seconds: float | None
    grades: dict[tuple[str, str], CellGrade] = field(default_factory=dict)
    hints: dict[str, list[str]] | None = None  # sidecar test key -> hint ids
    timing: TimingRecord | None = None
    internal: frozenset[str] = frozenset()  # sidecar test keys whose checker failed
    ungradable: str = ""  # why nbgrader could not grade the submission ("" when it did)
    restored: tuple[str, ...] = ()  # cells put back before grading (its grading record)
    flags: tuple[str, ...] = ()  # what the source screen flagged (its grading record)
    unreadable: tuple[str, ...] = ()  # "FILE: reason" of each sidecar present but bad
    no_gpu: bool = False  # its timing cell found no CUDA device (its grading record says so)
    late_penalty: float | None = None  # the export's, from the late policy; None: not graded
    held: bool = False  # held for review, not released (grader.grading.decisions)
    holds: tuple[str, ...] = ()  # why: each hold's cell, line, words and rule
    review: str = ""  # where the review stands: "held: ...", "reviewed: ...", "" never held
    name: str = ""  # "First Last" from the roster (`nbgrader db student import`), "" if none
    blank: bool = False  # every answer cell as released: nothing written (BLANK)
    not_gradable: str = ""  # which upload is no notebook and the fix (`grader.uploads`)

    @property
    def label(self) -> str:
        """The student as the report names them: "Jane Doe (12345)", or the id alone."""
        return f"{self.name} ({self.student})" if self.name else self.student

    @property
    def standing(self) -> str:
        """HELD, BLANK, or "" (its grade released as computed)."""
        return HELD if self.held else BLANK if self.blank else ""


@dataclass
class Cohort:
    """The assignment's cells and every student on the roster."""

    course: Path
    assignment: str
    cells: list[CellInfo]
    students: list[StudentRecord]


@dataclass(frozen=True)
class Summary:
    """The numbers at the top of the report."""

    students: int
    submitted: int
    graded: int
    not_graded: tuple[tuple[str, str], ...]  # (student, reason): "ungradable: <cause>", ...
    missing: tuple[str, ...]
    late: tuple[tuple[str, float], ...]  # (student, seconds late)
    mean_score: float  # over graded students, raw; NaN when none
    max_score: float
    manual_points: float  # points per student graded by hand
    manual_pending: int  # cells waiting for manual grading
    with_hints: int
    with_timing: int
    internal_errors: tuple[tuple[str, str], ...] = ()  # (student, cell) the checker failed in
    restored: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (student, cells put back)
    flagged: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (student, source-screen flags)
    unreadable: tuple[tuple[str, str], ...] = ()  # (student, "FILE: reason")
    no_gpu: tuple[str, ...] = ()  # graded students whose timing cell found no GPU
    no_gpu_points: float = 0.0  # the timing cell's points, left out of their totals
    mean_after_late: float = float("nan")  # the mean less late penalties, as the export's
    late_points: tuple[tuple[str, float], ...] = ()  # (student, points the late policy took)
    optional: tuple[tuple[str, int, int, int], ...] = ()  # (section, earned, tried, skipped)
    timing_refused: tuple[Refusal, ...] = ()  # shapes and timings that earned 0, and why
    held: tuple[tuple[str, float, tuple[str, ...], str], ...] = ()  # (student, computed
    # points, holds, the review's words) of each grade held for review, not released
    reviewed: tuple[tuple[str, str], ...] = ()  # (student, the decision in force)
    blank: tuple[str, ...] = ()  # graded students who wrote nothing (BLANK)
    labels: dict[str, str] = field(default_factory=dict)  # student id -> how it is named

    def named(self, student: str) -> str:
        """The student as the summary names them: "Jane Doe (12345)", or the id alone."""
        return self.labels.get(student, student)


@dataclass
class Report:
    """Everything the plots and the page are drawn from."""

    cohort: Cohort
    table: pd.DataFrame
    timing: pd.DataFrame
    hints: pd.DataFrame
    summary: Summary
    benchmark: Results | None = None
    benchmark_path: Path | None = None

    @property
    def benchmark_source(self) -> str:
        """Where the copy roof and the direct/copy bars come from, in words."""
        if self.benchmark_path is None:
            return "no benchmark results"
        if self.benchmark_path.resolve() == H200_SAMPLE.resolve():
            return f"the course's recorded H200 run, {H200_SAMPLE.name}"
        return f"--benchmark {self.benchmark_path}"
