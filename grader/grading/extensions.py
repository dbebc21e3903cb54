"""Extensions: a student's own due date for an assignment, kept in the course folder.

`python -m grader.extension` grants one; it lives in the course's `extensions.json` (instructor
data, beside `nbgrader_config.py`) as the student's own due date, in UTC, so that it holds for
a student who has not submitted yet (the gradebook has no row for them) and in a gradebook made
again. nbgrader's gradebook carries it as `SubmittedAssignment.extension`, the time past the
assignment's due date: its `duedate` and `total_seconds_late`, which autograde's late penalty
(`grader.grading.late`) and `nbgrader export` read, include it. The command writes both where
the gradebook has the submission; `honour_extension`, called by autograde before it takes up a
submission (`grader.grading.fresh_start`), writes it into the gradebook otherwise. A regrade
keeps the gradebook's row, and so its extension.

The due date stays the extension's if the assignment's due date moves later; one that is no
longer after the assignment's due date extends nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from learning.workshops.checking.sidecars import (
    entries_of,
)

FILE = "extensions.json"
SCHEMA = "i1-extensions/1"
STAMP = "%Y-%m-%dT%H:%M:%SZ"
"""How the file writes a due date: UTC, to the second."""


@dataclass(frozen=True)
class Extension:
    """A student's own due date for an assignment (`until`, naive UTC as nbgrader's)."""

    assignment: str
    student: str
    until: datetime

    def past(self, duedate: datetime | None) -> timedelta | None:
        """The time past the assignment's `duedate` this extension grants, as the gradebook
        keeps it (`SubmittedAssignment.extension`); None when it grants none."""
        if duedate is None or self.until <= duedate:
            return None
        return self.until - duedate

    def to_json(self) -> dict:
        return {
            "assignment": self.assignment,
            "student": self.student,
            "until": self.until.strftime(STAMP),
        }

    @classmethod
    def from_json(cls, data: object) -> Extension:
        """An extension as the file stores it; ValueError for anything else."""
        if not isinstance(data, dict) or set(data) != {"assignment", "student", "until"}:
            raise ValueError(f"not an extension: {data!r}")
        if not all(isinstance(value, str) for value in data.values()):
            raise ValueError(f"not an extension: {data!r}")
        until = datetime.strptime(data["until"], STAMP)
        return cls(data["assignment"], data["student"], until)


def shown(when: datetime | None) -> str:
    """A naive UTC time as the command and the guide write it."""
    return "none" if when is None else f"{when:%Y-%m-%d %H:%M:%S} UTC"


def read_extensions(root: Path) -> list[Extension]:
    """The course's extensions ([] when it has none); RecordError says why the file is not
    an extensions file."""
    return entries_of(Path(root) / FILE, SCHEMA, "extensions", Extension.from_json)


def write_extensions(root: Path, extensions: list[Extension]) -> None:
    """Replace the course's extensions file with `extensions` (sorted), all at once."""
    path = Path(root) / FILE
    ordered = sorted(extensions, key=lambda e: (e.assignment, e.student))
    record = {"schema": SCHEMA, "extensions": [e.to_json() for e in ordered]}
    part = path.with_name(f".{path.name}.part")
    part.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(part, path)


def extension_of(root: Path, assignment: str, student: str) -> Extension | None:
    """The student's extension of `assignment` in the course at `root`, or None."""
    for extension in read_extensions(root):
        if (extension.assignment, extension.student) == (assignment, student):
            return extension
    return None


def own_due_date(root: Path, assignment: str, student: str, duedate: datetime | None):
    """The student's due date: their extension's when it is after `duedate` (the
    assignment's), else `duedate`."""
    extension = extension_of(root, assignment, student)
    if extension is None or extension.past(duedate) is None:
        return duedate
    return extension.until


def honour_extension(coursedir, assignment: str, student: str) -> None:
    """Give the student's gradebook submission the extension the course grants them, making
    the submission's row when there is none yet; nothing without one (an extension granted
    through nbgrader's own API stays), or for a student or assignment not in the gradebook,
    which autograde refuses next in its own words."""
    from nbgrader.api import Gradebook, MissingEntry

    extension = extension_of(Path(coursedir.root), assignment, student)
    if extension is None:
        return
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        try:
            gradebook.find_student(student)
            duedate = gradebook.find_assignment(assignment).duedate
        except MissingEntry:
            return
        gradebook.update_or_create_submission(
            assignment, student, extension=extension.past(duedate)
        )
