"""The queue's service on loopback for a test: uvicorn in a thread, talked to with urllib.

`serving(root, bounds)` starts `grader.queue.service.make_app` on a free port and stops it on
exit; `call` sends one request as the student's side does (urllib, JSON, a Bearer token) and
returns the status, the decoded answer and the headers (names in lower case), refusals
included. `course(folder)`
makes a course folder outside the repository with a secret and the given students' tokens;
`finish_job` is the worker's part, a stand-in that signs a fake result as the worker would.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import uvicorn

from grader import seeding
from grader.gradebook import gradebook_url
from grader.queue import receipt, tokens
from grader.queue.service import Bounds, make_app
from grader.queue.store import Store

NOTEBOOK = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()


def course(folder: Path, students: tuple[str, ...] = ("alice", "bob", "carol")) -> Path:
    """A course folder with a secret, and the token `tok-<student>` of each student."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "nbgrader_config.py").write_text("c = get_config()\n")
    seeding.new_secret(folder)
    known = tokens.Tokens({tokens.token_hash(f"tok-{s}"): s for s in students})
    known.instructor = tokens.token_hash("tok-instructor")
    tokens.save(folder, known)
    return folder


def store(root: Path) -> Store:
    return Store(gradebook_url(root))


@contextlib.contextmanager
def serving(root: Path, bounds: Bounds | None = None, **options) -> Iterator[str]:
    """The service of `root` on a free loopback port, for the block; its base URL."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    app = make_app(root, bounds or Bounds(), **options)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the queue's service did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(20)
        listener.close()
        app.state.queue.store.close()


def call(
    url: str,
    method: str,
    path: str,
    token: str | None = None,
    body: object = None,
    raw: bytes | None = None,
) -> tuple[int, object, dict]:
    """One request as the student's side sends it: (status, decoded answer, headers)."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=20) as answer:
            status, text, got = answer.status, answer.read(), dict(answer.headers)
    except urllib.error.HTTPError as refused:
        status, text, got = refused.code, refused.read(), dict(refused.headers)
    got = {name.lower(): value for name, value in got.items()}
    try:
        return status, json.loads(text), got
    except ValueError:
        return status, text.decode(), got


def job_request(op: str = "strided_softmax", kind: str = "check", **more) -> dict:
    import base64

    return {
        "kind": kind,
        "op": op,
        "filename": f"{op}.ipynb",
        "content_b64": base64.b64encode(NOTEBOOK).decode(),
        "options": {},
        **more,
    }


def finish_job(root: Path, queue: Store, result: dict, worker: str = "stand-in", **facts) -> str:
    """The worker's part for the oldest queued job: claim, phases, sign, finish; its id."""
    job = queue.claim(worker)
    queue.phase(job.id, "checking")
    queue.phase(job.id, "signing")
    known = {"job": job.id, "student": job.student, "kind": job.kind, "op": job.op, "gpu": None}
    signed = receipt.sign(root, {**known, **facts}, result)
    queue.finish(job.id, result, signed, 0)
    return job.id
