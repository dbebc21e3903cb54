"""The queue's jobs, kept in the course's gradebook database: a restart loses none.

Two tables of the queue's own beside nbgrader's, through SQLAlchemy Core: `i1_queue_jobs`
(one row per job: the upload, its state, phase starts, result and receipt) and
`i1_queue_names` (the board name each student chose), and a third, `i1_queue_workers` (each
worker's last claim or heartbeat, for /api/health: a queue whose workers stopped says so).

A job goes queued -> running (`claim`) -> done (`finish`) or failed (`fail`); a running job
whose worker stopped heart-beating goes back to queued once, then fails with the cause
(`requeue_stale`). The oldest queued job is claimed first (`created`, then id); a requeued job
keeps its place. `claim` is atomic on both databases: PostgreSQL locks the row it takes
(`SELECT ... FOR UPDATE SKIP LOCKED`, so two workers never wait on one row), SQLite takes it
with one `UPDATE ... WHERE state = 'queued'` whose row count says whether this worker won.
Bounds (size, rate, one job per student) are the service's (`grader.queue.service`).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

from sqlalchemy import (
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    and_,
    create_engine,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.exc import OperationalError, ProgrammingError

from grader.gradebook import database_url

QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
ACTIVE = (QUEUED, RUNNING)
MAX_ATTEMPTS = 2
"""A job runs at most twice: a worker that dies requeues it once, then it fails."""

metadata = MetaData()
jobs = Table(
    "i1_queue_jobs",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("student", String(128), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("op", String(64), nullable=False),
    Column("filename", String(256), nullable=False),
    Column("content", LargeBinary, nullable=False),
    Column("options", Text, nullable=False),
    Column("state", String(16), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("created", Float, nullable=False),
    Column("started", Float),
    Column("heartbeat", Float),
    Column("finished", Float),
    Column("worker", String(256)),
    Column("phases", Text, nullable=False),  # JSON [[phase, start time], ...]
    Column("error", Text),
    Column("result", Text),
    Column("receipt", Text),
    Column("exit_status", Integer),
    Index("i1_queue_jobs_state", "state", "created"),
    Index("i1_queue_jobs_student", "student", "created"),
)
names = Table(
    "i1_queue_names",
    metadata,
    Column("student", String(128), primary_key=True),
    Column("name", String(64)),
    Column("updated", Float, nullable=False),
)
workers = Table(
    "i1_queue_workers",
    metadata,
    Column("name", String(256), primary_key=True),
    Column("seen", Float, nullable=False),
)


class StoreError(Exception):
    """A job the caller named does not exist, or is not in the state the call needs."""


@dataclass(frozen=True)
class Job:
    """One job as the worker gets it: the upload and what to run it as."""

    id: str
    student: str
    kind: str
    op: str
    filename: str
    content: bytes
    options: dict
    state: str
    attempts: int
    created: float
    started: float | None
    worker: str | None


@dataclass(frozen=True)
class Outcome:
    """A finished job's answer: what the local command would have written, and its receipt."""

    job: Job
    result: dict
    receipt: dict
    exit_status: int
    finished: float


class Store:
    """The queue's tables in the database at `url` (created when absent)."""

    def __init__(self, url: str):
        url = database_url(url)
        sqlite = url.startswith("sqlite")
        self.postgres = url.startswith("postgresql")
        # SQLite: one file shared by threads (the service's and its workers'); wait for a
        # writer (nbgrader's, another worker's) instead of failing at once
        connect = {"check_same_thread": False, "timeout": 30} if sqlite else {}
        self.engine = create_engine(url, connect_args=connect)
        try:
            metadata.create_all(self.engine)
        except (OperationalError, ProgrammingError):  # another process created them first
            metadata.create_all(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    def submit(self, student, kind, op, filename, content, options, now=None) -> Job:
        """A new queued job; the service has checked its bounds."""
        now = _now(now)
        row = {
            "id": uuid.uuid4().hex,
            "student": student,
            "kind": kind,
            "op": op,
            "filename": filename,
            "content": bytes(content),
            "options": json.dumps(options, sort_keys=True),
            "state": QUEUED,
            "attempts": 0,
            "created": now,
            "phases": json.dumps([[QUEUED, now]]),
        }
        with self.engine.begin() as connection:
            connection.execute(jobs.insert().values(**row))
        return self.job(row["id"])

    def claim(self, worker: str, now=None) -> Job | None:
        """The oldest queued job, now running on `worker` (attempts + 1); None when none is
        queued. Two workers never get the same job."""
        now = _now(now)
        self._seen(worker, now)
        oldest = select(jobs.c.id, jobs.c.phases).where(jobs.c.state == QUEUED)
        oldest = oldest.order_by(jobs.c.created, jobs.c.id).limit(1)
        if self.postgres:  # the row stays locked until this transaction ends; others skip it
            oldest = oldest.with_for_update(skip_locked=True)
        for _ in range(20):  # SQLite: another worker may take the oldest between the two steps
            with self.engine.begin() as connection:
                found = connection.execute(oldest).first()
                if found is None:
                    return None
                taken = connection.execute(
                    update(jobs)
                    .where(and_(jobs.c.id == found.id, jobs.c.state == QUEUED))
                    .values(
                        state=RUNNING,
                        attempts=jobs.c.attempts + 1,
                        started=now,
                        heartbeat=now,
                        worker=worker,
                        phases=_add_phase(found.phases, RUNNING, now),
                    )
                )
                if taken.rowcount == 1:
                    break
        else:
            return None
        return self.job(found.id)

    def phase(self, job_id: str, phase: str, now=None, worker: str | None = None) -> None:
        """Record that the running job `job_id` starts `phase` now (its phase times); with
        `worker`, StoreError unless that worker still holds it."""
        now = _now(now)
        with self.engine.begin() as connection:
            phases = self._running_phases(connection, job_id, worker)
            connection.execute(
                update(jobs)
                .where(jobs.c.id == job_id)
                .values(phases=_add_phase(phases, phase, now), heartbeat=now)
            )

    def heartbeat(self, job_id: str, now=None) -> None:
        """The running job's worker is alive (`requeue_stale` leaves the job alone)."""
        now = _now(now)
        with self.engine.begin() as connection:
            name = connection.execute(select(jobs.c.worker).where(jobs.c.id == job_id)).scalar()
            connection.execute(
                update(jobs)
                .where(and_(jobs.c.id == job_id, jobs.c.state == RUNNING))
                .values(heartbeat=now)
            )
        if name:
            self._seen(name, now)

    def finish(
        self,
        job_id: str,
        result: dict,
        receipt: dict,
        exit_status: int,
        now=None,
        worker: str | None = None,
    ):
        """The running job is done: its result, receipt and the local command's exit status;
        with `worker`, StoreError unless that worker still holds it (one that was thought
        dead, its job requeued, cannot overwrite what another worker does with it)."""
        now = _now(now)
        with self.engine.begin() as connection:
            phases = self._running_phases(connection, job_id, worker)
            connection.execute(
                update(jobs)
                .where(jobs.c.id == job_id)
                .values(
                    state=DONE,
                    finished=now,
                    phases=_add_phase(phases, DONE, now),
                    result=json.dumps(result),
                    receipt=json.dumps(receipt),
                    exit_status=int(exit_status),
                )
            )

    def fail(self, job_id: str, cause: str, now=None, worker: str | None = None) -> None:
        """The job failed; `cause` is the one line its student reads. With `worker`,
        StoreError unless that worker still holds it, as for `finish`."""
        now = _now(now)
        with self.engine.begin() as connection:
            if worker is not None:
                phases = self._running_phases(connection, job_id, worker)
            else:
                phases = connection.execute(
                    select(jobs.c.phases).where(jobs.c.id == job_id)
                ).scalar()
            if phases is None:
                raise StoreError(f"no job {job_id}")
            connection.execute(
                update(jobs)
                .where(jobs.c.id == job_id)
                .values(
                    state=FAILED, finished=now, error=cause, phases=_add_phase(phases, FAILED, now)
                )
            )

    def requeue_stale(self, older_than_s: float, now=None) -> list[str]:
        """Running jobs with no heartbeat for `older_than_s`: back to queued (their place
        kept) when they have run once, else failed with the cause. Their ids."""
        now = _now(now)
        stale = select(jobs).where(
            and_(jobs.c.state == RUNNING, jobs.c.heartbeat < now - older_than_s)
        )
        touched = []
        with self.engine.begin() as connection:
            for job in connection.execute(stale).all():
                silent = round(now - job.heartbeat)
                cause = f"its worker {job.worker} stopped answering (no heartbeat for {silent} s)"
                if job.attempts < MAX_ATTEMPTS:
                    values = {
                        "state": QUEUED,
                        "worker": None,
                        "started": None,
                        "heartbeat": None,
                        "error": f"requeued once: {cause}",
                        "phases": _add_phase(job.phases, QUEUED, now),
                    }
                else:
                    values = {
                        "state": FAILED,
                        "finished": now,
                        "error": f"the job failed twice: {cause}; submit it again",
                        "phases": _add_phase(job.phases, FAILED, now),
                    }
                changed = connection.execute(
                    update(jobs)
                    .where(
                        and_(
                            jobs.c.id == job.id,
                            jobs.c.state == RUNNING,
                            jobs.c.heartbeat == job.heartbeat,
                        )
                    )
                    .values(**values)
                )
                if changed.rowcount == 1:
                    touched.append(job.id)
        return touched

    def job(self, job_id: str) -> Job | None:
        """The job `job_id`; None when there is none."""
        with self.engine.connect() as connection:
            row = connection.execute(select(jobs).where(jobs.c.id == job_id)).first()
        return None if row is None else _job(row)

    def position(self, job_id: str) -> int | None:
        """The queued job's place (1 = next); None when it is not queued."""
        with self.engine.connect() as connection:
            row = connection.execute(
                select(jobs.c.state, jobs.c.created).where(jobs.c.id == job_id)
            ).first()
            if row is None or row.state != QUEUED:
                return None
            ahead = connection.execute(
                select(func.count()).where(
                    and_(
                        jobs.c.state == QUEUED,
                        or_(
                            jobs.c.created < row.created,
                            and_(jobs.c.created == row.created, jobs.c.id < job_id),
                        ),
                    )
                )
            ).scalar()
        return ahead + 1

    def status(self, job_id: str, now=None) -> dict:
        """The job as GET /api/jobs/{id} shows it: state, place, phase and phase times."""
        with self.engine.connect() as connection:
            row = connection.execute(select(jobs).where(jobs.c.id == job_id)).first()
        if row is None:
            raise StoreError(f"no job {job_id}")
        phases = json.loads(row.phases)
        return {
            "id": row.id,
            "state": row.state,
            "position": self.position(job_id),
            "phase": phases[-1][0],
            "phases": _durations(phases, row.finished or _now(now)),
            "error": row.error,
            "attempts": row.attempts,
        }

    def outcome(self, job_id: str) -> Outcome | None:
        """The done job's result and receipt; None while it is not done."""
        with self.engine.connect() as connection:
            row = connection.execute(select(jobs).where(jobs.c.id == job_id)).first()
        if row is None or row.state != DONE:
            return None
        return _outcome(row)

    def outcomes(self, kind: str) -> list[Outcome]:
        """Every done job of `kind`, oldest first (the board reads them)."""
        query = select(jobs).where(and_(jobs.c.state == DONE, jobs.c.kind == kind))
        with self.engine.connect() as connection:
            rows = connection.execute(query.order_by(jobs.c.finished)).all()
        return [_outcome(row) for row in rows]

    def active(self, student: str) -> list[Job]:
        """The student's queued and running jobs."""
        query = select(jobs).where(and_(jobs.c.student == student, jobs.c.state.in_(ACTIVE)))
        with self.engine.connect() as connection:
            return [_job(row) for row in connection.execute(query.order_by(jobs.c.created))]

    def created_since(self, student: str, since: float) -> list[float]:
        """When each of the student's jobs submitted since `since` was, oldest first."""
        query = select(jobs.c.created).where(
            and_(jobs.c.student == student, jobs.c.created >= since)
        )
        with self.engine.connect() as connection:
            return list(connection.execute(query.order_by(jobs.c.created)).scalars())

    def counts(self) -> dict[str, int]:
        """How many jobs are in each state."""
        query = select(jobs.c.state, func.count()).group_by(jobs.c.state)
        with self.engine.connect() as connection:
            found = dict(connection.execute(query).all())
        return {state: found.get(state, 0) for state in (QUEUED, RUNNING, DONE, FAILED)}

    def workers_seen(self, since: float) -> list[str]:
        """The workers that claimed or heart-beat since `since`."""
        query = select(workers.c.name).where(workers.c.seen >= since).order_by(workers.c.name)
        with self.engine.connect() as connection:
            return list(connection.execute(query).scalars())

    def set_name(self, student: str, name: str | None, now=None) -> None:
        """The board name `student` chose (None: anonymous)."""
        with self.engine.begin() as connection:
            connection.execute(names.delete().where(names.c.student == student))
            connection.execute(names.insert().values(student=student, name=name, updated=_now(now)))

    def names(self) -> dict[str, str]:
        """Each student's chosen board name (students who chose none are absent)."""
        query = select(names.c.student, names.c.name).where(names.c.name.is_not(None))
        with self.engine.connect() as connection:
            return dict(connection.execute(query).all())

    def _seen(self, worker: str, now: float) -> None:
        with self.engine.begin() as connection:
            if (
                connection.execute(
                    update(workers).where(workers.c.name == worker).values(seen=now)
                ).rowcount
                == 0
            ):
                connection.execute(workers.insert().values(name=worker, seen=now))

    def _running_phases(self, connection, job_id: str, worker: str | None = None) -> str:
        """The phases of the running job `job_id` (held by `worker`, when given)."""
        row = connection.execute(
            select(jobs.c.state, jobs.c.phases, jobs.c.worker).where(jobs.c.id == job_id)
        ).first()
        if row is None or row.state != RUNNING:
            raise StoreError(f"job {job_id} is not running ({row.state if row else 'no such job'})")
        if worker is not None and row.worker != worker:
            raise StoreError(f"job {job_id} is no longer {worker}'s (it was requeued)")
        return row.phases


def _now(now: float | None) -> float:
    return time.time() if now is None else float(now)


def _add_phase(phases: str, phase: str, now: float) -> str:
    return json.dumps([*json.loads(phases), [phase, now]])


def _durations(phases: list, end: float) -> dict[str, float]:
    """Seconds spent in each phase (a phase entered twice, e.g. queued again, adds up)."""
    spent: dict[str, float] = {}
    for (name, start), (_, until) in zip(phases, [*phases[1:], [None, end]], strict=True):
        spent[name] = round(spent.get(name, 0.0) + max(0.0, until - start), 3)
    return spent


def _job(row) -> Job:
    return Job(
        id=row.id,
        student=row.student,
        kind=row.kind,
        op=row.op,
        filename=row.filename,
        content=bytes(row.content),
        options=json.loads(row.options),
        state=row.state,
        attempts=row.attempts,
        created=row.created,
        started=row.started,
        worker=row.worker,
    )


def _outcome(row) -> Outcome:
    return Outcome(
        _job(row), json.loads(row.result), json.loads(row.receipt), row.exit_status, row.finished
    )
