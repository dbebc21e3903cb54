"""Reading the sidecars beside each autograded notebook: the hint ids and checker faults
(`i1_hints.json`) and the GPU timings (`i1_timing.json`), through their records' loaders.
A sidecar that is absent is missing data; one that is present but bad is missing data too,
and the student's record says why (`StudentRecord.unreadable`), as of an unreadable grading
record (`grader.cohort.gradebook`). A timing cell that found no CUDA device writes no timing
sidecar: the student's grading record says so instead (`StudentRecord.no_gpu`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from grader.cohort.gradebook import load_gradebook, progress
from grader.cohort.records import Cohort, StudentRecord
from grader.grading.timing_record import SIDECAR as TIMING_SIDECAR
from grader.grading.timing_record import load as load_timing
from learning.workshops.checking.sidecars import (
    HINTS_SIDECAR,
    HintRecord,
    RecordError,
    RecordMissing,
)
from learning.workshops.checking.sidecars import load_hints as load_hint_record

T = TypeVar("T")


def load_cohort(course: Path | str, assignment: str) -> Cohort:
    """The gradebook and every student's sidecars, for one assignment of a course."""
    course = Path(course).resolve()
    cells, students = load_gradebook(course, assignment)
    for record in progress(students, "reading sidecars"):
        if record.autograded and not record.ungradable:
            read_sidecars(record, course / "autograded" / record.student / assignment)
    return Cohort(course, assignment, cells, students)


def read_sidecars(record: StudentRecord, folder: Path) -> None:
    """Fill in a student's hints, checker faults and timing from the sidecars in `folder`."""
    hints = _optional(load_hint_record, folder / HINTS_SIDECAR, record)
    if hints is not None:
        record.hints, record.internal = hint_ids(hints), internal_errors(hints)
    record.timing = _optional(load_timing, folder / TIMING_SIDECAR, record)


def _optional(load: Callable[[Path], T], path: Path, record: StudentRecord) -> T | None:
    """The record at `path`, or None: when absent, or when bad (noted in `record`)."""
    try:
        return load(path)
    except RecordMissing:
        return None
    except RecordError as exc:
        record.unreadable += (f"{path.name}: {exc.reason}",)
        return None


def hint_ids(hints: HintRecord) -> dict[str, list[str]]:
    """{test key: the hint ids it fired}."""
    return {key: list(outcome.hints) for key, outcome in hints.tests.items()}


def internal_errors(hints: HintRecord) -> frozenset[str]:
    """The test keys whose status says the checker itself failed."""
    return frozenset(key for key, outcome in hints.tests.items() if outcome.internal)


def load_hints(path: Path | str) -> dict[str, list[str]]:
    """A hint sidecar as {test key: hint ids}; RecordError says why a file is not one."""
    return hint_ids(load_hint_record(path))


def load_internal_errors(path: Path | str) -> frozenset[str]:
    """The test keys of a hint sidecar whose checker failed; RecordError for a bad file."""
    return internal_errors(load_hint_record(path))
