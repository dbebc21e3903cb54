"""An instructor's decisions on held grades, and whether a grade is released.

A grade is held when its grading record has holds (`grader.grading.grading_log.Hold`: a reading
of the source, or a kernel launch the clean room could not replay): its points are computed and
kept, but not released, until an instructor decides with `python -m grader.review`: accept
(release the computed grade), a penalty of P points, or an award of P points (cells that did not
pass because a launch could not be replayed), each with a reason. Values decide points; a guess
only decides what a person reads.

Decisions are instructor data in the course folder, `reviews/<assignment>/<student>.json`
(git-ignored), apart from the grading record, which each grading rewrites. Each names the
submission it was made for (the record's fingerprint, `submission_fingerprint`) and the holds it
saw. It stays in force while the grading record names that submission and finds no hold it did
not see: a regrade of the same submission keeps it (`grader.grading.released` puts its points
back), a changed submission or a new hold holds the grade again, and the old decision is shown
as one made earlier. Its points live in the gradebook (`grader.grading.released`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from grader.grading.grading_log import GradingRecord, Hold, read_record
from grader.terminal import visible
from learning.workshops.checking.sidecars import (
    RecordError,
    entries_of,
)

REVIEW_FOLDER = "reviews"
SCHEMA = "i1-review/1"
ACCEPT, PENALTY, AWARD = "accept", "penalty", "award"
VERDICTS = (ACCEPT, PENALTY, AWARD)
REPLAY = "replay"
"""The source of a hold whose cases did not pass because a launch could not be replayed: only
such a hold's cells may be awarded points."""


class ReviewError(Exception):
    """A decision was refused; the message says why and what to do."""


def hold_key(hold: Hold) -> tuple[str, str, str, int]:
    """What makes two holds the same finding: what found it, the rule, the cell, the line (not
    the words, which a new grader may put differently)."""
    return hold.source, hold.rule, hold.cell, hold.line


@dataclass(frozen=True)
class Decision:
    """One decision on one submission's held grade: accept, a penalty or an award of
    `points`, with the reviewer's `reason`."""

    submission: str  # the grading record's fingerprint of the submission decided on
    verdict: str  # one of VERDICTS
    points: float  # 0 for accept
    reason: str
    decided: str  # when, ISO 8601
    holds: tuple[Hold, ...] = ()  # the holds the reviewer saw

    @property
    def delta(self) -> float:
        """The points this decision adds to the computed grade (negative for a penalty)."""
        return {ACCEPT: 0.0, PENALTY: -self.points, AWARD: self.points}[self.verdict]

    def covers(self, holds: tuple[Hold, ...]) -> bool:
        """Did the reviewer see every one of `holds`?"""
        seen = {hold_key(h) for h in self.holds}
        return all(hold_key(h) in seen for h in holds)

    @property
    def what(self) -> str:
        """The verdict in words: "accepted", "a penalty of 3 points", "an award of 2 points"."""
        if self.verdict == ACCEPT:
            return "accepted as graded"
        article = "a" if self.verdict == PENALTY else "an"
        return f"{article} {self.verdict} of {self.points:g} point{'s' * (self.points != 1)}"

    def __str__(self) -> str:
        return f"{self.what}: {visible(self.reason)} (decided {self.decided[:16]})"

    def to_json(self) -> dict:
        return {
            "submission": self.submission,
            "verdict": self.verdict,
            "points": self.points,
            "reason": self.reason,
            "decided": self.decided,
            "holds": [h.to_json() for h in self.holds],
        }

    @classmethod
    def from_json(cls, data: object) -> Decision:
        """A decision as the file stores it; ValueError for anything else."""
        if not isinstance(data, dict):
            raise ValueError(f"a decision is a JSON object, not {type(data).__name__}")
        try:
            holds = tuple(Hold.from_json(h) for h in data.get("holds", []))
            decision = cls(**{**data, "holds": holds, "points": float(data.get("points", 0))})
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a decision: {exc}") from None
        texts = (decision.submission, decision.reason, decision.decided)
        if decision.verdict not in VERDICTS or not all(isinstance(t, str) for t in texts):
            raise ValueError(f"not a decision: verdict {decision.verdict!r} or its texts")
        return decision


@dataclass(frozen=True)
class Review:
    """Where one student's grade stands: the holds of its last grading, the decision in
    force for it (None: none is), and the last decision no longer in force (`earlier`: made
    for another submission, or before a hold it did not see)."""

    holds: tuple[Hold, ...] = ()
    decision: Decision | None = None
    earlier: Decision | None = None
    submission: str = ""  # the fingerprint of the submission the record graded
    unreadable: str = ""  # why the decisions file could not be read ("" when it could)

    @property
    def held(self) -> bool:
        """Is the grade held: holds that no decision in force covers?"""
        return bool(self.holds) and self.decision is None

    def released(self, computed: float) -> float | None:
        """The score released to the student: None while held, else `computed` (the
        gradebook's, which holds the decision's points)."""
        return None if self.held else computed

    def words(self) -> str:
        """Where the review stands, in one line for the export and the cohort report."""
        if self.decision is not None:
            return f"reviewed: {self.decision}"
        if not self.holds:
            return ""
        if self.unreadable:
            return f"held: the decisions could not be read ({self.unreadable})"
        if self.earlier is None:
            return "held: not decided yet"
        return f"{self.earlier_words()}; held again"

    def earlier_words(self) -> str:
        """Why the last decision is not in force, with what it was."""
        decision = self.earlier
        if decision is None:
            return ""
        if decision.submission == self.submission:
            return f"decided before the grading found a new reason ({decision})"
        return f"decided for an earlier submission ({decision})"


def review_path(root: Path, assignment: str, student: str) -> Path:
    """The decisions file of one student's assignment in the course at `root`."""
    return Path(root) / REVIEW_FOLDER / assignment / f"{student}.json"


def read_decisions(root: Path, assignment: str, student: str) -> list[Decision]:
    """Every decision on the student's assignment, oldest first ([] when none); RecordError
    says why a file is not a decisions file."""
    return entries_of(
        review_path(root, assignment, student), SCHEMA, "decisions", Decision.from_json
    )


def add_decision(root: Path, assignment: str, student: str, decision: Decision) -> None:
    """Add `decision` to the student's decisions file: the latest for a submission rules."""
    path = review_path(root, assignment, student)
    decisions = [*read_decisions(root, assignment, student), decision]
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"schema": SCHEMA, "decisions": [d.to_json() for d in decisions]}
    part = path.with_name(f".{path.name}.part")
    part.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(part, path)


def decided_now(record: GradingRecord, verdict: str, points: float, reason: str) -> Decision:
    """A decision on the grading `record` graded, made now."""
    now = datetime.now(UTC).astimezone().isoformat(timespec="seconds")
    return Decision(record.submission, verdict, points, reason, now, tuple(record.held))


def review_of(root: Path, assignment: str, student: str) -> Review:
    """Where the student's grade stands, from their last grading record and decisions."""
    record = read_record(root, assignment, student)
    return review_of_record(root, record) if record else Review()


def review_of_record(root: Path, record: GradingRecord) -> Review:
    """Where the grade of the grading `record` stands: the latest decision for its submission
    is in force when it saw every hold the record has."""
    holds = tuple(record.held)
    try:
        decisions = read_decisions(root, record.assignment, record.student)
    except RecordError as exc:
        return Review(holds, unreadable=exc.reason, submission=record.submission)
    mine = [d for d in decisions if d.submission == record.submission]
    if mine and mine[-1].covers(holds):
        return Review(holds, mine[-1], submission=record.submission)
    earlier = decisions[-1] if decisions else None
    return Review(holds, earlier=earlier, submission=record.submission)
