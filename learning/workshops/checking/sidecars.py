"""The hint sidecar (`i1_hints.json`) and what every cross-process record shares.

While nbgrader autogrades, each test cell writes its outcome beside the notebook: passed,
failed or internal-error, the failed cases and the hint ids. `learning.workshops.notebook.testing`
and `grader.grading.trusted` write it, the cohort report reads it, all through this module. A
loader refuses a bad file with `RecordError`, whose reason names what is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

HINTS_SIDECAR = "i1_hints.json"
HINTS_SCHEMA = "i1-hints/1"
LISTS = ("failed", "hints", "internal_errors")
"""An entry's lists of strings: failed case names, hint ids, the checker's faults."""


def public_key(op: str, names: Iterable[str] | None = None) -> str:
    """The entry of `expect_cases(fn, op, names)`: `public:OP`, then `:` and the case names
    sorted and joined by `+` when some are named."""
    return f"public:{op}" + (f":{'+'.join(sorted(set(names)))}" if names else "")


def hidden_key(name: str) -> str:
    """The entry of a hidden check of an op or a function, or of the timing cell."""
    return f"hidden:{name}"


class RecordError(ValueError):
    """A record file is missing, unreadable or does not match its schema."""

    def __init__(self, path: Path | str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = Path(path)
        self.reason = reason


class RecordMissing(RecordError):
    """The record file does not exist (its writer never ran)."""


def read_json(path: Path | str) -> object:
    """A record file's JSON; RecordMissing when absent, RecordError when unreadable."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise RecordMissing(path, "no such file") from None
    except OSError as exc:
        raise RecordError(path, f"cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise RecordError(path, "not text, so not a record") from None
    except json.JSONDecodeError as exc:
        raise RecordError(path, f"not JSON ({exc.msg}, line {exc.lineno})") from None


def of_schema(data: object, schema: str, path: Path | str) -> dict:
    """`data` when it is a JSON object of `schema`; RecordError naming what it is instead."""
    if not isinstance(data, dict):
        raise RecordError(path, f"holds a JSON {type(data).__name__}, not an object")
    if data.get("schema") != schema:
        raise RecordError(path, f"schema is {data.get('schema')!r}, expected {schema!r}")
    return data


T = TypeVar("T")


def entries_of(path: Path | str, schema: str, key: str, parse: Callable[[object], T]) -> list[T]:
    """The list under `key` of a `schema` file at `path`, each entry parsed ([] when there is
    no file); RecordError saying why the file is not such a list, or which entry is bad (a
    ValueError from `parse`)."""
    try:
        data = of_schema(read_json(path), schema, path)
    except RecordMissing:
        return []
    entries = data.get(key)
    if not isinstance(entries, list):
        raise RecordError(path, f"{key} is {entries!r}, not a list")
    try:
        return [parse(entry) for entry in entries]
    except ValueError as exc:
        raise RecordError(path, str(exc)) from None


@dataclass(frozen=True)
class Outcome:
    """One test's entry: its status (one of `statuses()`), the cases it failed, the hints
    they fired."""

    status: str
    failed: tuple[str, ...] = ()
    hints: tuple[str, ...] = ()
    internal_errors: tuple[str, ...] = ()  # the checker's faults (status internal-error)

    @property
    def internal(self) -> bool:
        """Whether the checker itself failed in this test, not the student's code."""
        return self.status == internal_error()

    def to_json(self) -> dict:
        entry = {"passed": self.status == "passed", "status": self.status}
        entry |= {"failed": list(self.failed), "hints": list(self.hints)}
        if self.internal:
            entry["internal_errors"] = list(self.internal_errors)
        return entry


def statuses() -> tuple[str, str, str]:
    """A test's status: passed, failed, or internal-error when the checker itself failed."""
    return "passed", "failed", internal_error()


def internal_error() -> str:
    """`faults.INTERNAL_ERROR`, imported when first needed: faults imports torch, which the
    cohort report does not need to read sidecars."""
    from learning.workshops.checking.faults import INTERNAL_ERROR

    return INTERNAL_ERROR


@dataclass
class HintRecord:
    """A hint sidecar: each test's outcome by its key (`public:OP[:names]`, `hidden:X`)."""

    tests: dict[str, Outcome] = field(default_factory=dict)

    def save(self, path: Path | str) -> None:
        write_hints(path, {test: outcome.to_json() for test, outcome in self.tests.items()})


def write_hints(path: Path | str, tests: dict[str, dict]) -> None:
    """Write a hint sidecar of these entries (each an `Outcome.to_json()`)."""
    record = {"schema": HINTS_SCHEMA, "tests": tests}
    Path(path).write_text(json.dumps(record, indent=2) + "\n")


def load_hints(path: Path | str) -> HintRecord:
    """Read a hint sidecar; RecordError says why a file is not one."""
    data = of_schema(read_json(path), HINTS_SCHEMA, path)
    tests = data.get("tests")
    if not isinstance(tests, dict):
        raise RecordError(path, f"tests is {tests!r}, not an object of test entries")
    return HintRecord({test: outcome(entry, path, test) for test, entry in tests.items()})


def outcome(entry: object, path: Path | str, test: str) -> Outcome:
    """One test's entry of a hint sidecar; RecordError names the test and what is wrong."""
    if not isinstance(entry, dict):
        raise RecordError(path, f"test {test!r} is {entry!r}, not an object")
    status = entry.get("status")
    if status not in statuses():
        raise RecordError(path, f"test {test!r} has status {status!r}, not one of {statuses()}")
    passed = status == "passed"
    if entry.get("passed", passed) is not passed:
        raise RecordError(path, f"test {test!r} says passed {entry['passed']!r}, status {status}")
    lists = {name: entry.get(name, []) for name in LISTS}
    for name, value in lists.items():
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise RecordError(path, f"test {test!r}: {name} is {value!r}, not a list of strings")
    return Outcome(status, *(tuple(lists[name]) for name in LISTS))
