"""The LMS's submission times: its submissions exports (a CSV, or the JSON list Canvas's API
returns), each student's latest time, as naive UTC.

- Submission times come from the LMS's submissions export (`load_times`): every `.csv` and
  `.json` in `downloaded/<assignment>/times/`, and each `--times FILE`. A CSV has a header
  with `user_id` (or `student_id`, `id`) and `submitted_at` (or `timestamp`), and optionally
  `late`; a JSON file is a list of such objects, as Canvas's submissions API returns them.
  Times need a zone (`Z`, `+01:00`). A student's latest time is their submission's time.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

STUDENT_COLUMNS = ("user_id", "student_id", "id")
TIME_COLUMNS = ("submitted_at", "timestamp")


class TimesError(ValueError):
    """A submissions export that cannot be read: the message names the file and the row."""


@dataclass(frozen=True)
class LmsTime:
    """When the LMS says a student submitted, where that was read, and its late flag."""

    submitted_at: datetime  # naive UTC, as nbgrader keeps times
    source: str
    late: bool | None = None


def parse_time(text: str) -> datetime:
    """A time with its zone as naive UTC; ValueError without a zone or when unreadable."""
    from dateutil import parser

    try:
        when = parser.isoparse(text.strip())
    except ValueError:
        when = parser.parse(text.strip())
    if when.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone: add Z for UTC, or its offset")
    return when.astimezone(UTC).replace(tzinfo=None)


def shown(when: datetime | None) -> str:
    """A time as timestamp.txt and messages write it: '2026-12-02 09:30:00 UTC'."""
    return "" if when is None else f"{when:%Y-%m-%d %H:%M:%S} UTC"


def _flag(value) -> bool | None:
    text = str(value).strip().lower()
    return {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}.get(text)


def _rows(path: Path) -> list[dict]:
    """The rows of a times file: a CSV with a header, or a JSON list of objects."""
    if path.suffix.lower() == ".json":
        rows = json.loads(path.read_text())
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise TimesError(f"{path}: expected a JSON list of submissions, as Canvas gives")
        return rows
    with path.open(newline="", encoding="utf-8-sig") as fh:
        return list(csv.DictReader(fh))


def load_times(paths: list[Path]) -> dict[str, LmsTime]:
    """Each student's latest submission time in the LMS's submissions exports at `paths`."""
    times: dict[str, LmsTime] = {}
    for path in paths:
        for number, row in enumerate(_rows(path), start=2):
            student = next((row[c] for c in STUDENT_COLUMNS if row.get(c) not in (None, "")), None)
            stamp = next((row[c] for c in TIME_COLUMNS if row.get(c) not in (None, "")), None)
            if student is None and stamp is None:
                continue
            if student is None or stamp is None:
                if student is not None:  # Canvas lists unsubmitted students with no time
                    continue
                raise TimesError(
                    f"{path}, row {number}: no student id: the header needs one of "
                    f"{', '.join(STUDENT_COLUMNS)} and one of {', '.join(TIME_COLUMNS)}"
                )
            try:
                when = parse_time(str(stamp))
            except (ValueError, OverflowError) as exc:
                raise TimesError(f"{path}, row {number}: {exc}") from None
            found = LmsTime(when, path.name, _flag(row.get("late", "")))
            key = str(student).strip()
            if key not in times or when >= times[key].submitted_at:
                times[key] = found
    return times
