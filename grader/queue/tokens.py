"""The queue's tokens: one per roster student, one for the instructor, kept only as hashes.

    python -m grader.queue tokens --course DIR [--url URL]     # students without a token
    python -m grader.queue tokens --course DIR --student S     # make, or replace, S's token
    python -m grader.queue tokens --course DIR --instructor    # the instructor's (the board's view)

`queue_tokens.json` (in the course folder, git-ignored student data, mode 0600) maps the
sha256 of each token to its student; the tokens themselves are printed and written once to
`queue_tokens.csv` (student_id,token) for the LMS, never kept in the course. With `--url`,
each student also gets the handout the student's `--remote` reads,
`reports/queue/<student>/i1_queue.json` ({"url", "token"}). The roster is nbgrader's
(`nbgrader db student import roster.csv`); a rerun makes tokens only for students who have
none, so a student added mid-term gets one and nobody else's changes.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import MetaData, Table, create_engine, select
from sqlalchemy.exc import NoSuchTableError

from grader.gradebook import database_url, gradebook_url

TOKENS_FILE = "queue_tokens.json"
CSV_FILE = "queue_tokens.csv"
SCHEMA = "i1-queue-tokens/1"
HANDOUT = "i1_queue.json"
HANDOUTS = Path("reports") / "queue"
INSTRUCTOR = "instructor"


class TokenError(Exception):
    """The tokens cannot be made or read; the one-line message says what to do."""


@dataclass
class Tokens:
    """Who each token's hash belongs to."""

    students: dict[str, str] = field(default_factory=dict)  # sha256 hex -> student id
    instructor: str | None = None  # sha256 hex

    def student(self, token: str | None) -> str | None:
        """The student whose token this is; None for no token or an unknown one."""
        return self.students.get(token_hash(token)) if token else None

    def is_instructor(self, token: str | None) -> bool:
        return bool(token) and self.instructor is not None and token_hash(token) == self.instructor


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def load(course_root: Path) -> Tokens:
    """The course's tokens; none when it has no tokens file yet."""
    path = Path(course_root) / TOKENS_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return Tokens()
    except (OSError, ValueError) as exc:
        raise TokenError(f"cannot read {path} ({exc}): make it again with `tokens`") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise TokenError(f"{path} is not a queue tokens file ({SCHEMA}): make it again")
    return Tokens(dict(data.get("tokens", {})), data.get(INSTRUCTOR))


def save(course_root: Path, tokens: Tokens) -> Path:
    """Write the hashes, readable by their owner alone."""
    path = Path(course_root) / TOKENS_FILE
    data = {"schema": SCHEMA, "tokens": tokens.students}
    if tokens.instructor:
        data[INSTRUCTOR] = tokens.instructor
    fresh = path.with_name(f".{path.name}.{os.getpid()}.new")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
    os.replace(fresh, path)
    return path


def roster(course_root: Path, url: str | None = None) -> dict[str, str]:
    """Each roster student's id and name ("First Last", or "" when the roster has none),
    read from nbgrader's `student` table; empty when the gradebook has no roster yet."""
    engine = create_engine(database_url(url or gradebook_url(Path(course_root))))
    try:
        student = Table("student", MetaData(), autoload_with=engine)
        with engine.connect() as connection:
            rows = connection.execute(
                select(student.c.id, student.c.first_name, student.c.last_name)
            ).all()
    except NoSuchTableError:
        return {}
    finally:
        engine.dispose()
    return {row.id: " ".join(n for n in (row.first_name, row.last_name) if n) for row in rows}


def make(
    course_root: Path, students: list[str] | None = None, url: str | None = None
) -> dict[str, str]:
    """New tokens (student -> token) for `students` (replacing theirs), or for every roster
    student without one; the hashes saved, the CSV (and, with the service's `url`, the
    handouts) written."""
    root = Path(course_root)
    known = roster(root)
    if not known:
        raise TokenError(
            "the roster is empty: import it first (nbgrader db student import roster.csv)"
        )
    for student in students or []:
        if student not in known:
            raise TokenError(
                f"{student} is not on the roster: add them first "
                f"(nbgrader db student add {student} --first-name ... --last-name ...)"
            )
    tokens = load(root)
    holders = set(tokens.students.values())
    chosen = students or [s for s in sorted(known) if s not in holders]
    made = {student: secrets.token_urlsafe(24) for student in chosen}
    tokens.students = {h: s for h, s in tokens.students.items() if s not in made}
    tokens.students.update({token_hash(t): s for s, t in made.items()})
    save(root, tokens)
    write_csv(root / CSV_FILE, made)
    if url:
        for student, token in made.items():
            write_handout(root / HANDOUTS / student / HANDOUT, url, token)
    return made


def make_instructor(course_root: Path) -> str:
    """A new instructor token (the old one stops working)."""
    tokens = load(Path(course_root))
    token = secrets.token_urlsafe(24)
    tokens.instructor = token_hash(token)
    save(Path(course_root), tokens)
    return token


def write_csv(path: Path, made: dict[str, str]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student_id", "token"])
        writer.writerows(sorted(made.items()))


def write_handout(path: Path, url: str, token: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"url": url, "token": token}, handle, indent=1)
