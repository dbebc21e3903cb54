"""A submission's outcome: graded, ungradable and why, or not graded since it was resubmitted.

The export (`grader.export`), the cohort report, feedback, hand grading and review say a
submission's status alike, from its grading record (`grader.grading.grading_log`) and the
autograded notebooks. A grading record that cannot be read makes the submission ungradable:
its cause names the file, what is wrong with it, and the command that grades it again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from grader.grading.grading_log import GradingRecord, read_record, submission_fingerprint
from learning.workshops.checking.sidecars import RecordError

GRADED, UNGRADABLE, MISSING, NOT_GRADED = "graded", "ungradable", "missing", "not graded"
NO_NOTEBOOK = "no autograded notebook; see the autograde log"
NOT_AUTOGRADED = "submitted but not autograded: run nbgrader autograde"
RESUBMITTED = (
    "resubmitted since it was graded: autograde it again "
    "(python -m grader.parallel ASSIGNMENT --changed)"
)
UNREADABLE = (
    "its grading record is unreadable ({error}): grade it again "
    "(python -m grader.parallel ASSIGNMENT --student STUDENT)"
)


@dataclass(frozen=True)
class SubmissionOutcome:
    """A submission's status and cause, with its grading record as read: `record` (None when
    never graded through nbgrader's hooks, or unreadable) or `unreadable`, why it is not one."""

    status: str
    cause: str
    record: GradingRecord | None = None
    unreadable: RecordError | None = None


def read_outcome(
    root: Path, assignment: str, student: str, autograded: Path, notebooks: Iterable[str]
) -> SubmissionOutcome:
    """The outcome of a submission the gradebook holds, its grading record read once:
    graded when the record (if any) says graded and every notebook of it is in the
    `autograded` folder; not graded (RESUBMITTED) when `submitted/` holds another submission
    than the one the record graded; else ungradable: the record's cause, UNREADABLE when the
    record cannot be read, or NO_NOTEBOOK."""
    try:
        record = read_record(root, assignment, student)
    except RecordError as exc:
        cause = UNREADABLE.replace("{error}", str(exc)).replace("ASSIGNMENT", assignment)
        return SubmissionOutcome(UNGRADABLE, cause.replace("STUDENT", student), unreadable=exc)
    return SubmissionOutcome(*_outcome(record, root, autograded, notebooks), record=record)


def submission_outcome(
    root: Path, assignment: str, student: str, autograded: Path, notebooks: Iterable[str]
) -> tuple[str, str]:
    """(status, cause) of a submission the gradebook holds (`read_outcome`)."""
    outcome = read_outcome(root, assignment, student, autograded, notebooks)
    return outcome.status, outcome.cause


def _outcome(
    record: GradingRecord | None, root: Path, autograded: Path, notebooks: Iterable[str]
) -> tuple[str, str]:
    if record is not None:
        folder = Path(root) / "submitted" / record.student / record.assignment
        if record.submission != submission_fingerprint(folder):
            return NOT_GRADED, RESUBMITTED.replace("ASSIGNMENT", record.assignment)
        status, cause = record.outcome
        if status != GRADED:
            return UNGRADABLE, " ".join(cause.split())
    if all((Path(autograded) / f"{name}.ipynb").is_file() for name in notebooks):
        return GRADED, ""
    return UNGRADABLE, NO_NOTEBOOK
