"""A grading log per student: what ran, which cells were restored, and why a submission could
not be graded.

Each autograde of a submission writes `<course>/grading_log/<assignment>/<student>.log` (for
people) and `<student>.json` (a `GradingRecord`, for the export and the cohort report). They
live outside `autograded/`, which nbgrader deletes when a student fails, and outside
`feedback/`. nbgrader's pre-convert hook starts the record, the preprocessors add what they
did, and the post-convert hook marks it graded. nbgrader has no hook for a submission it
fails, so whatever stops a grading records its cause first (`GradingLog.cause`): the record
is then "ungradable", finished, with what happened and what the instructor can do
(`what_to_do`). A record still "grading" afterwards means nbgrader stopped on that
submission for a reason nothing recorded (`STOPPED`).

A record also says which submission it graded (`submission`, a fingerprint of the notebooks
and `timestamp.txt` in `submitted/`), so that a resubmission collected since shows
(`changed_since_graded`: `grader.parallel --changed` grades those, the export and feedback
refuse to show the old grades for them), and the fingerprint of each hand-graded answer
(`answers`, `grader.grading.hand_grading`), carried from one grading to the next, so that a
hand grade stays exactly as long as the answer it graded. An instructor's review decision on a
held grade is kept apart (`grader.grading.decisions`); what it added to the gradebook in this
grading is recorded here (`adjusted`), so that a new decision replaces it. When the timing
cell found no CUDA device, the trusted side says so here (`timed_without_gpu`): the cell scored
0 and one regrade on a GPU mends it. A record written before that field reads as timed on a GPU.

`read_record` is the one loader: None when the student was never graded, `RecordError` naming
the file and what is wrong when the file is not a record; each caller decides what an
unreadable record means for it (`grader.outcome`: ungradable, and grade it again).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import nbformat

from grader.terminal import visible
from learning.workshops.checking.sidecars import RecordError, RecordMissing, of_schema, read_json

LOG_FOLDER = "grading_log"
SCHEMA = "i1-grading/1"
STOPPED = "grading stopped before it finished; nbgrader's log (.nbgrader.log) says where"
UNGRADABLE = "ungradable"
STATUSES = ("grading", "graded", UNGRADABLE)
FLAG_CHARS = 300
"""The longest line a hold is logged with."""
MAX_HOLDS = 50
"""Holds kept in a record: a hostile notebook can make thousands."""


@dataclass(frozen=True)
class Hold:
    """One reason a grade waits for an instructor's review before it is released.

    A hold never changes a point: the grading computes the points as it would without it,
    and `python -m grader.review` releases them, or adjusts them with a reason. `source`
    says what found it: "screen" (a reading of the source, `learning.workshops.screen`) or
    "replay" (the clean room could not replay a kernel launch, so the cases it concerns
    did not pass). `cells` names the test cells whose points it concerns (empty: the whole
    grade); `line` is 0 where no line is named."""

    source: str
    rule: str
    cell: str
    line: int
    text: str
    cells: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = f"cell {self.cell}" + (f", line {self.line}" if self.line else "")
        return f"{where}: {self.text} [{self.rule}]"

    def to_json(self) -> dict:
        return {**asdict(self), "cells": list(self.cells)}

    @classmethod
    def from_json(cls, data: object) -> Hold:
        """A hold as a record stores it; ValueError for anything else."""
        if not isinstance(data, dict):
            raise ValueError(f"a hold is a JSON object, not {type(data).__name__}")
        try:
            hold = cls(**{**data, "cells": tuple(data.get("cells", ()))})
        except TypeError as exc:
            raise ValueError(f"not a hold: {exc}") from None
        texts = (hold.source, hold.rule, hold.cell, hold.text, *hold.cells)
        if not all(isinstance(t, str) for t in texts) or not isinstance(hold.line, int):
            raise ValueError("a hold's fields have the wrong types")
        return hold


@dataclass
class GradingRecord:
    """One autograde of one submission. `status` is "graded", "ungradable" or, while it
    runs, "grading"; `cause` says why it could not be graded."""

    student: str
    assignment: str
    status: str = "grading"
    cause: str = ""
    restored: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)  # the screen's costs, in records before holds
    started: str = ""
    finished: str = ""
    lines: list[str] = field(default_factory=list)
    submission: str = ""  # submission_fingerprint of what was graded
    answers: dict[str, str] = field(default_factory=dict)  # hand-graded cell -> answer_hash
    holds: list[dict] = field(default_factory=list)  # Hold.to_json() of each, in order found
    adjusted: dict[str, float] = field(default_factory=dict)  # notebook:cell -> review points
    timed_without_gpu: bool = False  # the timing cell found no CUDA device, so scored 0

    @property
    def held(self) -> list[Hold]:
        """Why this grade waits for review (`Hold`s); empty when it does not."""
        return [Hold.from_json(h) for h in self.holds]

    @property
    def outcome(self) -> tuple[str, str]:
        """(status, cause) as the export reports it: a grading that never finished is
        ungradable, with the last cause recorded."""
        if self.status == "graded":
            return "graded", ""
        return "ungradable", self.cause or STOPPED


ADVICE = (
    (
        "invalid notebook",
        "the file in submitted/STUDENT/ASSIGNMENT/ is not a notebook Jupyter can open "
        "(truncated, or another file under its name): ask the student to submit the notebook "
        "again (`python -m grader.feedback` tells them why), then autograde with --changed",
    ),
    (
        "dead kernel",
        "ask for a resubmission that runs top to bottom (`python -m grader.feedback` tells the "
        "student why), then autograde with --changed; or grade it by hand outside nbgrader "
        "(the cell named above stopped the kernel and no cell after it ran): enter that score "
        "in the LMS, as the export leaves this one empty",
    ),
    (
        "timeout",
        "ask for a resubmission that finishes in time, or grade it by hand outside nbgrader "
        "and enter that score in the LMS; if it is only slow on this machine, raise "
        "c.Execute.timeout in nbgrader_config.py and grade it again "
        "(python -m grader.parallel ASSIGNMENT --student STUDENT)",
    ),
    (
        "submission refused",
        "ask the student to submit the notebook file itself, then autograde with --changed",
    ),
)
"""What the instructor can do about an ungradable submission, by the start of its cause."""
NOT_THE_STUDENTS = (
    "this is the grader's failure, not the submission's: fix the cause above, then grade it "
    "again (python -m grader.parallel ASSIGNMENT --student STUDENT)"
)


def what_to_do(cause: str, assignment: str, student: str) -> str:
    """What the instructor can do about a submission that `cause` made ungradable: ask for a
    resubmission, grade it by hand, or, where the grader failed, fix it and grade again."""
    advice = next((text for start, text in ADVICE if cause.startswith(start)), NOT_THE_STUDENTS)
    return advice.replace("ASSIGNMENT", assignment).replace("STUDENT", student)


def record_paths(root: Path, assignment: str, student: str) -> tuple[Path, Path]:
    """The log and the record of one student's grading in the course at `root`."""
    folder = Path(root) / LOG_FOLDER / assignment
    return folder / f"{student}.log", folder / f"{student}.json"


def read_record(root: Path, assignment: str, student: str) -> GradingRecord | None:
    """The student's last grading record; None when never graded; RecordError, naming the
    file and what is wrong, when the file is not a grading record."""
    path = record_paths(root, assignment, student)[1]
    try:
        data = of_schema(read_json(path), SCHEMA, path)
    except RecordMissing:
        return None
    return record_from_json({k: v for k, v in data.items() if k != "schema"}, path)


KINDS = {
    **dict.fromkeys(
        ("student", "assignment", "status", "cause", "started", "finished", "submission"),
        "a string",
    ),
    **dict.fromkeys(("restored", "flags", "lines"), "a list of strings"),
    "answers": "an object of strings",
    "adjusted": "an object of points",
    "holds": "a list of holds",
    "timed_without_gpu": "true or false",
}
"""What each field of a grading record must be, as stored."""


def record_from_json(data: dict, path: Path) -> GradingRecord:
    """A grading record from its fields, each checked; RecordError names the first that is
    wrong. Fields a record of an earlier version lacks take their defaults."""
    unexpected = sorted(set(data) - set(KINDS))
    if unexpected:
        raise RecordError(path, f"unexpected fields {unexpected}")
    missing = [name for name in ("student", "assignment") if name not in data]
    if missing:
        raise RecordError(path, f"missing {', '.join(missing)}")
    for name, value in data.items():
        if not _fits(KINDS[name], value):
            raise RecordError(path, f"{name} is {value!r}, not {KINDS[name]}")
    if data.get("status", "grading") not in STATUSES:
        raise RecordError(path, f"status is {data['status']!r}, not one of {STATUSES}")
    for number, hold in enumerate(data.get("holds", []), 1):
        try:
            Hold.from_json(hold)
        except ValueError as exc:
            raise RecordError(path, f"hold {number}: {exc}") from None
    return GradingRecord(**data)


def _fits(kind: str, value: object) -> bool:
    """Whether a field's stored `value` is of its `kind` (a value of `KINDS`)."""
    if kind == "a string":
        return isinstance(value, str)
    if kind == "true or false":
        return isinstance(value, bool)
    if kind in ("a list of strings", "a list of holds"):
        item = str if kind == "a list of strings" else dict
        return isinstance(value, list) and all(isinstance(v, item) for v in value)
    item = str if kind == "an object of strings" else (int, float)
    return isinstance(value, dict) and all(
        isinstance(v, item) and not isinstance(v, bool) for v in value.values()
    )


def _now() -> str:
    return datetime.now(UTC).astimezone().isoformat(timespec="milliseconds")


class GradingLog:
    """The log of one student's grading, rewritten on every change."""

    def __init__(self, root: Path, assignment: str, student: str) -> None:
        self.paths = record_paths(root, assignment, student)
        self.unreadable = ""  # why the record on disk could not be read: it is started afresh
        try:
            self.record = read_record(root, assignment, student)
        except RecordError as exc:
            self.record, self.unreadable = None, exc.reason
        self.record = self.record or GradingRecord(student, assignment)

    def begin(self) -> GradingLog:
        """Start a fresh record (an earlier grading's is replaced; only the fingerprints of
        the hand-graded answers carry over, until this grading records its own)."""
        old = self.record
        self.record = GradingRecord(
            old.student, old.assignment, started=_now(), answers=dict(old.answers)
        )
        self.say(f"autograding {self.record.assignment} for {self.record.student}")
        if self.unreadable:
            self.say(
                f"the last grading record was unreadable ({self.unreadable}): replaced; its "
                "hand grades are kept for review, as no record of their answers was read"
            )
        return self

    def say(self, line: str) -> None:
        """Add one line to the log."""
        self.record.lines.append(f"{_now()}  {line}")
        self._write()

    def grading(self, fingerprint: str) -> None:
        """Record which submission this grading grades (`submission_fingerprint`)."""
        self.record.submission = fingerprint
        self._write()

    def answered(self, answers: dict[str, str]) -> None:
        """Record the fingerprints of the hand-graded answers this grading saw."""
        self.record.answers = dict(answers)
        self._write()

    def cause(self, cause: str) -> None:
        """Record why this grading stops: the submission is ungradable, now, and the log says
        what the instructor can do. Every caller stops the grading next (an exception nbgrader
        logs); should one finish anyway, `finish` marks it graded. The last cause counts."""
        self.record.status, self.record.cause, self.record.finished = UNGRADABLE, cause, _now()
        self.say(f"problem: {cause}")
        self.say(f"what to do: {what_to_do(cause, self.record.assignment, self.record.student)}")

    def restored(self, cells: Iterable[str]) -> None:
        """Record the grade cells put back from the course's source."""
        cells = list(cells)
        self.record.restored = cells
        if cells:
            self.say("restored from the course's source: " + "; ".join(cells))

    def hold(self, holds: Iterable[Hold]) -> None:
        """Add reasons to hold this grade for review (`Hold`), each once, at most MAX_HOLDS."""
        known = {json.dumps(h, sort_keys=True) for h in self.record.holds}
        added = []
        for hold in holds:
            data = hold.to_json()
            key = json.dumps(data, sort_keys=True)
            if key in known:
                continue
            known.add(key)
            if len(self.record.holds) < MAX_HOLDS:
                self.record.holds.append(data)
                added.append(hold)
        for hold in added:
            self.record.lines.append(f"{_now()}  held for review: {str(hold)[:FLAG_CHARS]}")
        if added:
            self._write()

    def reviewed(self, adjusted: dict[str, float], line: str) -> None:
        """Record the points a review decision added to each cell in the gradebook
        (`grader.grading.released`), replacing any earlier decision's, and say why."""
        self.record.adjusted = dict(adjusted)
        self.say(line)

    def timed_without_gpu(self) -> None:
        """The timing cell found no CUDA device: it scored 0, and a regrade on a GPU mends it."""
        self.record.timed_without_gpu = True
        self.say("timed without a GPU: the timing cell found no CUDA device and scored 0")

    def finish(self) -> None:
        """nbgrader graded the submission."""
        self.record.status, self.record.cause, self.record.finished = "graded", "", _now()
        self.say("graded")

    def _write(self) -> None:
        log, data = self.paths
        log.parent.mkdir(parents=True, exist_ok=True)
        record = {"schema": SCHEMA, **asdict(self.record)}
        _replace(data, json.dumps(record, indent=2) + "\n")
        if self.record.finished or self.record.cause:  # a cause stops the grading
            status, cause = self.record.outcome
            head = f"status: {status}" + (f" ({cause})" if cause else "")
        else:
            head = "status: grading"
        # for people, who `cat` it: what a student's code said, control characters escaped
        _replace(log, visible("\n".join([head, *self.record.lines]), newlines=True) + "\n")


def _replace(path: Path, text: str) -> None:
    """Write `text` to `path` whole: a reader never sees half a file."""
    part = path.with_name(f".{path.name}.part")
    part.write_text(text)
    os.replace(part, path)


SUBMISSION_FILES = ("*.ipynb", "timestamp.txt")
"""What a submission's fingerprint covers: its notebooks and its submission time."""


def submission_fingerprint(folder: Path) -> str:
    """A sha256 of the notebooks and `timestamp.txt` in a `submitted/<student>/<assignment>`
    folder (names and bytes); "" when it has none of them. Nothing is followed."""
    digest = hashlib.sha256()
    found = False
    for pattern in SUBMISSION_FILES:
        for path in sorted(Path(folder).glob(pattern)):
            if path.is_file() and not path.is_symlink():
                found = True
                digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest() if found else ""


def changed_since_graded(root: Path, assignment: str, student: str) -> bool:
    """Whether the student's submission in `submitted/` is not the one their last grading
    record graded (no record, an unreadable one, one from before fingerprints, or a
    resubmission)."""
    try:
        record = read_record(root, assignment, student)
    except RecordError:  # grading it again writes a record that reads
        return True
    folder = Path(root) / "submitted" / student / assignment
    return record is None or record.submission != submission_fingerprint(folder)


def unreadable_notebook(path: str) -> str | None:
    """Why nbgrader cannot read the notebook at `path`, or None when it can."""
    try:
        nbformat.read(path, as_version=4)
    except Exception as exc:  # nbformat raises many kinds for a broken file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"invalid notebook {Path(path).name}: {first[:200]}"
    return None


def convert_hooks(root: Path) -> tuple[Callable, Callable]:
    """nbgrader's pre- and post-convert hooks for autograde in the course at `root`."""

    def started(notebooks: list[str], **_) -> None:
        log = _log(notebooks).begin()
        log.grading(submission_fingerprint(Path(notebooks[0]).parent))
        for path in notebooks:
            problem = unreadable_notebook(path)
            if problem:
                log.cause(problem)

    def finished(notebooks: list[str], **_) -> None:
        _log(notebooks).finish()

    def _log(notebooks: list[str]) -> GradingLog:
        # nbgrader passes the command's ids ("*" for every student); the notebooks' paths,
        # <step>/<student>/<assignment>/<notebook>.ipynb, name the one being graded.
        folder = Path(notebooks[0]).parent
        return GradingLog(root, folder.name, folder.parent.name)

    return started, finished


def log_for(config, resources: dict) -> GradingLog | None:
    """The grading log of the notebook a preprocessor is working on, or None outside an
    autograde (no student in `resources`)."""
    info = resources.get("nbgrader", {})
    if not info.get("student") or not info.get("assignment"):
        return None
    return GradingLog(course_root(config), info["assignment"], info["student"])


def course_root(config) -> Path:
    """The course folder nbgrader is working in: its `CourseDirectory.root`, else here."""
    return Path(config.get("CourseDirectory", {}).get("root") or os.getcwd())
