"""The order students are listed in: by id, numbers by their value ("9" before "10").

An LMS's ids are often numbers of different lengths; sorted as text, "10" comes before "9".
Each run of digits compares as a number and the rest as text, so "s9" < "s10" < "t1". Ties
(e.g. "007" and "7") keep their order, as Python's sort is stable."""

from __future__ import annotations

import re

_RUNS = re.compile(r"(\d+)")


def student_key(student: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key for a student id: digit runs by value, the rest as text."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in _RUNS.split(student) if part
    )
