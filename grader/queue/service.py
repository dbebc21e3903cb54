"""The queue's HTTP service: students submit a notebook, poll its job, fetch its result.

`make_app(course_root, bounds)` is a Starlette (ASGI) app, served by uvicorn
(`python -m grader.queue serve`); its jobs live in the course's gradebook database
(`grader.queue.store`), so a restart loses none. Every /api call but /api/health carries
`Authorization: Bearer <token>` (`grader.queue.tokens`; the tokens file is read again when it
changes, so a token made while the service runs works at once). Every refusal is one line
with the bound it hit and when to retry: {"error", "bound", "retry_after_s"}, and a
`Retry-After` header on 429. A job of another student answers 404, as an unknown one does.

Run one service process per course: the one-job and rate bounds are checked and the job
inserted under a lock of this process. The kinds, ops and options it accepts are listed here
(`KINDS`, `OPTIONS`; tests/test_queue_service.py ties them to the commands'), so a worker never
gets an option the student's own command would not take, and never `--sandbox`.
A reaper thread sends running jobs whose worker stopped heart-beating back to the queue once,
then fails them (`Store.requeue_stale`).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import math
import threading
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route

from grader.gradebook import gradebook_url
from grader.queue import board, tokens
from grader.queue.runner import BENCHMARK_OPTIONS, CHECK_OPTIONS
from grader.queue.store import FAILED, QUEUED, RUNNING, Store

CHECK_OPS = (
    "strided_softmax",
    "softmax_kernel",
    "copy_rows",
    "strided_softmax_",
    "strided_softmax_backward",
)
TIMED_OPS = ("strided_softmax", "strided_softmax_backward")
KINDS = {"check": CHECK_OPS, "benchmark": TIMED_OPS}
"""The ops each kind of job takes: the check's and the benchmark's own."""
OPTIONS = {
    "check": {**CHECK_OPTIONS, "json": bool},
    "benchmark": {**BENCHMARK_OPTIONS, "output": str},
}
"""The options of the student's command a job may carry, with their types: those the worker
passes on (`runner`), and where the student's side writes the result and how it prints it."""
POLL_S = 15
"""How soon a student whose job is still queued or running is told to ask again."""


@dataclass(frozen=True)
class Bounds:
    """What one student, and the class, may ask of the queue (each a flag of `serve`)."""

    upload_mb: float = field(default=5.0, metadata={"help": "largest upload, in MB"})
    jobs_per_student: int = field(
        default=1, metadata={"help": "jobs one student may have queued or running"}
    )
    jobs_per_hour: int = field(
        default=12, metadata={"help": "jobs one student may submit per hour"}
    )
    queue_length: int = field(default=200, metadata={"help": "jobs queued at once, all students"})
    job_time_s: int = field(
        default=600, metadata={"help": "seconds a job may run (the worker kills it then)"}
    )
    stale_after_s: int = field(
        default=120,
        metadata={"help": "seconds without a heartbeat before a running job is requeued"},
    )

    @property
    def upload_bytes(self) -> int:
        return int(self.upload_mb * 1_000_000)


BOUND_FIELDS = tuple(fields(Bounds))


class Refusal(Exception):
    """An answer other than success: its status, one line, the bound and when to retry."""

    def __init__(
        self, status: int, error: str, bound: str | None, retry_after_s: int | None = None, **more
    ):
        super().__init__(error)
        self.status, self.error, self.bound, self.retry_after_s = (
            status,
            error,
            bound,
            retry_after_s,
        )
        self.more = more

    def response(self) -> JSONResponse:
        body = {"error": self.error, "bound": self.bound, "retry_after_s": self.retry_after_s}
        body |= self.more
        headers = {} if self.retry_after_s is None else {"Retry-After": str(self.retry_after_s)}
        return JSONResponse(body, status_code=self.status, headers=headers)


class TokenFile:
    """The course's tokens, read again whenever queue_tokens.json changes."""

    def __init__(self, course_root: Path):
        self.path = Path(course_root) / tokens.TOKENS_FILE
        self.root = Path(course_root)
        self.stamp: tuple | None = None
        self.tokens = tokens.Tokens()

    def current(self) -> tokens.Tokens:
        try:
            stat = self.path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        except FileNotFoundError:
            stamp = None
        if stamp != self.stamp:
            self.tokens, self.stamp = tokens.load(self.root), stamp
        return self.tokens


def bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class Queue:
    """The service's handlers over one course's store."""

    def __init__(self, course_root: Path, bounds: Bounds, store: Store, clock):
        self.root, self.bounds, self.store, self.clock = Path(course_root), bounds, store, clock
        self.tokens = TokenFile(course_root)
        self.admitting = threading.Lock()

    def student(self, request: Request) -> str:
        student = self.tokens.current().student(bearer(request))
        if student is None:
            raise Refusal(
                401,
                "no valid token: send the token of your i1_queue.json as "
                "`Authorization: Bearer TOKEN` (ask your instructor if you have none)",
                "token",
            )
        return student

    def instructor(self, request: Request) -> None:
        if not self.tokens.current().is_instructor(bearer(request)):
            raise Refusal(
                401,
                "the instructor's view needs the instructor's token as `Authorization: Bearer "
                "TOKEN` (python -m grader.queue tokens --instructor makes one)",
                "token",
            )

    async def submit(self, request: Request) -> JSONResponse:
        student = self.student(request)
        body = await self.read_body(request)
        kind, op, filename, content, options = self.parse(body)
        job = await run_in_threadpool(self.admit, student, kind, op, filename, content, options)
        position = await run_in_threadpool(self.store.position, job.id)
        return JSONResponse({"id": job.id, "state": job.state, "position": position}, 202)

    async def read_body(self, request: Request) -> bytes:
        limit = math.ceil(self.bounds.upload_bytes * 4 / 3) + 65_536  # base64 in JSON
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise self.too_large(int(declared) * 3 // 4)
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise self.too_large(len(body) * 3 // 4)
        return bytes(body)

    def too_large(self, size: int) -> Refusal:
        return Refusal(
            413,
            f"the upload is {size / 1e6:.1f} MB, over the {self.bounds.upload_mb:g} MB bound: "
            "clear the notebook's outputs (Edit > Clear Outputs of All Cells), save, and send "
            "it again",
            "size",
        )

    def parse(self, body: bytes) -> tuple[str, str, str, bytes, dict]:
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if not isinstance(request, dict):
            raise Refusal(422, "the request is not a JSON object: send it with --remote", "request")
        kind, op = request.get("kind"), request.get("op")
        if kind not in KINDS:
            raise Refusal(422, f"unknown kind {kind!r}: send check or benchmark", "request")
        if op not in KINDS[kind]:
            raise Refusal(
                422, f"unknown op {op!r} for {kind}: choose {', '.join(KINDS[kind])}", "request"
            )
        options = self.checked_options(kind, request.get("options") or {})
        filename = request.get("filename")
        if not isinstance(filename, str) or not filename or Path(filename).name != filename:
            raise Refusal(422, "filename must be the file's own name, without folders", "request")
        try:
            content = base64.b64decode(request.get("content_b64") or "", validate=True)
        except (binascii.Error, ValueError, TypeError):
            raise Refusal(
                422, "content_b64 is not base64: send it with --remote", "request"
            ) from None
        if len(content) > self.bounds.upload_bytes:
            raise self.too_large(len(content))
        if not self.readable(filename, content):
            raise Refusal(
                415,
                f"{filename} is not a notebook (.ipynb, JSON with cells) or a .py file: send "
                "the notebook you work in, or the .py file that defines the function",
                "kind of file",
            )
        return kind, op, filename, content, options

    @staticmethod
    def checked_options(kind: str, options: object) -> dict:
        allowed = OPTIONS[kind]
        if not isinstance(options, dict):
            raise Refusal(422, "options must be a JSON object", "request")
        for name, value in options.items():
            wanted = allowed.get(name)
            wrong_type = wanted is not None and (
                not isinstance(value, wanted) or (wanted is int and isinstance(value, bool))
            )
            if wanted is None or wrong_type or (isinstance(value, str) and len(value) > 300):
                raise Refusal(
                    422,
                    f"option {name}={value!r} is not one {kind} takes remotely: "
                    f"{', '.join(f'{n} ({t.__name__})' for n, t in allowed.items())}",
                    "request",
                )
        return options

    @staticmethod
    def readable(filename: str, content: bytes) -> bool:
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError:
            return False
        if filename.endswith(".py"):
            return True
        if not filename.endswith(".ipynb"):
            return False
        try:
            notebook = json.loads(text)
        except ValueError:
            return False
        return isinstance(notebook, dict) and isinstance(notebook.get("cells"), list)

    def admit(self, student, kind, op, filename, content, options):
        """The new job, once the student's and the class's bounds allow it."""
        with self.admitting:
            now = self.clock()
            active = self.store.active(student)
            if len(active) >= self.bounds.jobs_per_student:
                job = active[0]
                place = self.store.position(job.id)
                where = f"position {place}" if place else job.state
                raise Refusal(
                    429,
                    f"you already have job {job.id} {job.state} ({where}): one job per student "
                    f"at a time; wait for its result, then submit again",
                    "one-job",
                    POLL_S,
                )
            recent = self.store.created_since(student, now - 3600)
            if len(recent) >= self.bounds.jobs_per_hour:
                wait = max(1, math.ceil(recent[0] + 3600 - now))
                raise Refusal(
                    429,
                    f"you submitted {len(recent)} jobs in the last hour, the bound is "
                    f"{self.bounds.jobs_per_hour}: retry in {wait} s",
                    "rate",
                    wait,
                )
            queued = self.store.counts()[QUEUED]
            if queued >= self.bounds.queue_length:
                raise Refusal(
                    429,
                    f"the queue is full ({queued} jobs, the bound is {self.bounds.queue_length}): "
                    "retry in a minute",
                    "queue-length",
                    60,
                )
            return self.store.submit(student, kind, op, filename, content, options, now=now)

    def own_job(self, request: Request):
        student = self.student(request)
        job_id = request.path_params["job_id"]
        job = self.store.job(job_id)
        if job is None or job.student != student:
            raise Refusal(
                404, f"you have no job {job_id}: use the id your submission answered", None
            )
        return job

    async def job_status(self, request: Request) -> JSONResponse:
        job = await run_in_threadpool(self.own_job, request)
        return JSONResponse(await run_in_threadpool(self.store.status, job.id, self.clock()))

    async def job_result(self, request: Request) -> JSONResponse:
        job = await run_in_threadpool(self.own_job, request)
        outcome = await run_in_threadpool(self.store.outcome, job.id)
        if outcome is not None:
            return JSONResponse(
                {
                    "result": outcome.result,
                    "receipt": outcome.receipt,
                    "exit_status": outcome.exit_status,
                }
            )
        status = await run_in_threadpool(self.store.status, job.id, self.clock())
        if status["state"] == FAILED:
            error, retry = f"job {job.id} failed: {status['error']}", None
        else:
            where = f"position {status['position']}" if status["state"] == QUEUED else "running"
            error, retry = f"job {job.id} is not done yet ({where}): ask again", POLL_S
        return Refusal(409, error, None, retry, state=status["state"]).response()

    async def health(self, request: Request) -> JSONResponse:
        counts = await run_in_threadpool(self.store.counts)
        since = self.clock() - self.bounds.stale_after_s
        seen = await run_in_threadpool(self.store.workers_seen, since)
        return JSONResponse(
            {"ok": True, "queued": counts[QUEUED], "running": counts[RUNNING], "workers": seen}
        )

    def board_data(self, request: Request) -> dict:
        roster = None
        if request.query_params.get("view") == "instructor":
            self.instructor(request)
            roster = tokens.roster(self.root)
        return board.board(self.root, self.store, roster)

    async def board_json(self, request: Request) -> JSONResponse:
        if not self.tokens.current().is_instructor(bearer(request)):
            self.student(request)
        return JSONResponse(await run_in_threadpool(self.board_data, request))

    async def board_page(self, request: Request) -> HTMLResponse:
        data = await run_in_threadpool(self.board_data, request)
        return HTMLResponse(board.render(data))

    async def name(self, request: Request) -> JSONResponse:
        student = self.student(request)
        try:
            wanted = json.loads(await self.read_body(request))["name"]
        except (ValueError, KeyError, TypeError):
            raise Refusal(422, 'send {"name": "..."} or {"name": null}', "request") from None
        if wanted is not None:
            if not isinstance(wanted, str):
                raise Refusal(422, "the name must be a string, or null for anonymous", "request")
            wanted = wanted.strip()
            taken = await run_in_threadpool(self.store.names)
            problem = board.name_problem(wanted, student, taken)
            if problem:
                raise Refusal(422, problem, "name")
        await run_in_threadpool(self.store.set_name, student, wanted, self.clock())
        return JSONResponse({"name": wanted})

    def reap(self) -> None:
        self.store.requeue_stale(self.bounds.stale_after_s, now=self.clock())


def make_app(
    course_root: Path,
    bounds: Bounds | None = None,
    store: Store | None = None,
    clock=time.time,
    reap_every_s: float | None = None,
) -> Starlette:
    """The service of the course at `course_root` (its gradebook's store unless `store`);
    stale jobs are reaped every `reap_every_s` (default: a quarter of the stale bound)."""
    bounds = bounds or Bounds()
    store = store or Store(gradebook_url(Path(course_root)))
    queue = Queue(course_root, bounds, store, clock)
    every = reap_every_s or bounds.stale_after_s / 4

    @contextlib.asynccontextmanager
    async def lifespan(app):
        stop = threading.Event()

        def reaper() -> None:
            while not stop.wait(every):
                with contextlib.suppress(SQLAlchemyError):
                    queue.reap()

        thread = threading.Thread(target=reaper, name="i1-queue-reaper", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    async def refused(request: Request, exc: Refusal) -> JSONResponse:
        return exc.response()

    async def database_down(request: Request, exc: SQLAlchemyError) -> JSONResponse:
        error = "the queue's database is not answering: retry in a minute"
        return Refusal(503, error, "database", 60).response()

    async def tokens_unreadable(request: Request, exc: tokens.TokenError) -> JSONResponse:
        return Refusal(503, f"the queue cannot read its tokens: {exc}", "token", 60).response()

    app = Starlette(
        routes=[
            Route("/api/jobs", queue.submit, methods=["POST"]),
            Route("/api/jobs/{job_id}", queue.job_status, methods=["GET"]),
            Route("/api/jobs/{job_id}/result", queue.job_result, methods=["GET"]),
            Route("/api/health", queue.health, methods=["GET"]),
            Route("/api/board", queue.board_json, methods=["GET"]),
            Route("/api/name", queue.name, methods=["PUT"]),
            Route("/board", queue.board_page, methods=["GET"]),
        ],
        exception_handlers={
            Refusal: refused,
            SQLAlchemyError: database_down,
            tokens.TokenError: tokens_unreadable,
        },
        lifespan=lifespan,
    )
    app.state.queue = queue
    return app
