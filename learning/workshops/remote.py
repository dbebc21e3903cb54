"""`--remote`: run a check or a benchmark on the course's GPU queue, and write what a local run
writes (docs/queue.md).

    python -m learning.workshops.benchmark --op strided_softmax --remote \
        --output results/local/i1.json
    python -m learning.workshops.check strided_softmax --remote

The queue's address and the student's token come from the handout file the instructor gives
out, `i1_queue.json` ({"url": ..., "token": ...}): `$I1_QUEUE` (its path), else in the folder
the command runs in, else in the bundle's root folder, else `~/.i1_queue.json`; `$I1_QUEUE_URL`
and `$I1_QUEUE_TOKEN` override its fields (both set: no file needed). The file is uploaded,
the job polled (`GET /api/jobs/{id}`) with its place in the queue and its phase on stderr (a
progress bar on a terminal, else one line per phase), then its result fetched. A benchmark's
results go to `--output` exactly as the local command writes them (section 7's plots and the
worksheet read them unchanged) and its table is printed; a check prints the local text (or,
with --json, the local JSON object) and exits with the job's status. The course's signed
receipt is saved beside the results (`<output>.receipt.json`), or at
`results/remote/<job>.json` for a check: the service's whole answer, result and receipt, so
that the course can verify it (`python -m grader.queue verify`); a student cannot.

Decided here, where the queue's design is silent: the options sent are the command's own, by
their long names, as the command line spells them; a dropped connection while waiting is
tried again (DROPS times, POLL_S apart) since the job stays queued, but never the upload,
which could queue it twice. Exit status, beyond the job's own: 2 when nothing ran (no handout
file, the queue unreachable or refusing), 1 for a job that failed (its cause is printed).
Only the standard library and tqdm: students install the `student` extra alone.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import shlex
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tqdm import tqdm

from learning.workshops.measuring.results import ResultsError, Row, from_json

HANDOUT = "i1_queue.json"
HOME_HANDOUT = Path("~/.i1_queue.json")
BUNDLE_ROOT = Path(__file__).resolve().parents[2]
"""The folder that holds `learning/`: the student bundle's root."""
ASK = (
    f"ask your instructor for your {HANDOUT} (the course queue's address and your token) and "
    "put it in this folder"
)
POLL_S = 2.0
"""Seconds between two looks at a waiting job."""
DROPS = 5
"""Looks in a row that may fail before the wait gives up."""
REQUEST_TIMEOUT_S = 60.0
RECEIPTS = Path("results") / "remote"
NOTHING_RAN = 2
JOB_FAILED = 1


class RemoteError(Exception):
    """Why the remote run stopped, in one line that ends with what to do."""


class Unreachable(RemoteError):
    """The queue did not answer."""


class JobFailed(RemoteError):
    """The job ran and failed; the message gives its cause."""


@dataclass(frozen=True)
class Queue:
    """Where the jobs go, with whose token, and where that was read."""

    url: str
    token: str
    source: str


@dataclass(frozen=True)
class Finished:
    """A finished job's answer: the result, the receipt, the command's exit status."""

    job: str
    answer: dict

    @property
    def result(self) -> dict:
        return self.answer.get("result") or {}

    @property
    def exit_status(self) -> int:
        return int(self.answer.get("exit_status", JOB_FAILED))


def handout_places(cwd: Path | None = None) -> list[Path]:
    """Where the handout file is looked for, in order, `$I1_QUEUE` first when set."""
    named = [Path(os.environ["I1_QUEUE"]).expanduser()] if os.environ.get("I1_QUEUE") else []
    here = (cwd or Path.cwd()) / HANDOUT
    return [*named, here, BUNDLE_ROOT / HANDOUT, HOME_HANDOUT.expanduser()]


def find_queue(cwd: Path | None = None) -> Queue:
    """The queue to use: the first handout file found, its fields overridden by
    `$I1_QUEUE_URL` and `$I1_QUEUE_TOKEN`; RemoteError saying where it looked."""
    url, token = os.environ.get("I1_QUEUE_URL"), os.environ.get("I1_QUEUE_TOKEN")
    places = handout_places(cwd)
    found = next((p for p in places if p.is_file()), None)
    if found is None and not (url and token):
        if os.environ.get("I1_QUEUE"):
            raise RemoteError(f"I1_QUEUE names {places[0]}, which is no file; {ASK}")
        looked = ", ".join(str(p) for p in places)
        raise RemoteError(f"no {HANDOUT} found (looked in {looked}); {ASK}")
    fields = read_handout(found) if found else {}
    url, token = url or fields.get("url"), token or fields.get("token")
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        raise RemoteError(f"{found}: no queue address (url: https://...) in it; {ASK}")
    if not isinstance(token, str) or not token:
        raise RemoteError(f"{found}: no token in it; {ASK}")
    return Queue(url.rstrip("/"), token, str(found or "$I1_QUEUE_URL and $I1_QUEUE_TOKEN"))


def read_handout(path: Path) -> dict:
    """The handout file's object; RemoteError when it is not one."""
    try:
        fields = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RemoteError(f"{path} is not a queue handout file ({exc}); {ASK}") from None
    if not isinstance(fields, dict):
        raise RemoteError(f"{path} is not a queue handout file (not an object); {ASK}")
    return fields


class Client:
    """The queue's HTTP API, each answer a JSON object; HTTP refusals as RemoteError."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.queue.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.queue.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise RemoteError(self.refusal(exc)) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            why = getattr(exc, "reason", None) or exc.__class__.__name__
            raise Unreachable(
                f"cannot reach the course queue at {self.queue.url} ({why}); check your "
                "connection, or ask your instructor whether the queue is up"
            ) from None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise RemoteError(
                f"{self.queue.url} answered with something other than JSON: is the url in "
                f"{self.queue.source} the course queue's?"
            ) from None

    def refusal(self, exc: urllib.error.HTTPError) -> str:
        """The service's own line for an HTTP refusal, and when to try again."""
        try:
            said = json.loads(exc.read())
        except (json.JSONDecodeError, UnicodeDecodeError, OSError):
            said = {}
        said = said if isinstance(said, dict) else {}
        error = said.get("error") or f"HTTP {exc.code} {exc.reason}"
        line = f"the course queue refused: {error}"
        retry = said.get("retry_after_s") or exc.headers.get("Retry-After")
        if retry:
            return f"{line} (try again in {retry} s)"
        if exc.code == 401:
            return f"{line} (check the token in {self.queue.source}; {ASK})"
        return line


class Progress:
    """The job's place in the queue and its phase on `stream`: a tqdm bar on a terminal,
    else one line per phase."""

    def __init__(self, job: str, stream: TextIO) -> None:
        self.job, self.stream = job, stream
        self.bar: tqdm | None = None
        self.phase = ""

    def show(self, status: dict) -> None:
        state, position = status.get("state"), status.get("position")
        phase = "queued" if state == "queued" else str(status.get("phase") or state)
        text = f"queued, position {position}" if state == "queued" else f"{state}: {phase}"
        if self.stream.isatty():
            self.draw(text, state, position)
        elif phase != self.phase:
            print(f"remote: job {self.job} {text}", file=self.stream, flush=True)
        self.phase = phase

    def draw(self, text: str, state: str | None, position: int | None) -> None:
        """The bar: one step for each job ahead that leaves, one for running, one for done."""
        if self.bar is None:
            ahead = position if state == "queued" and position else 0
            self.bar = tqdm(total=ahead + 1, file=self.stream, unit="step", leave=False)
        done = {"queued": self.bar.total - 1 - (position or 0), "running": self.bar.total - 1}
        self.bar.update(done.get(str(state), self.bar.total) - self.bar.n)
        self.bar.set_description_str(f"job {self.job}: {text}")  # drawn at each look

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def submit(client: Client, kind: str, op: str, impl: Path, options: dict) -> dict:
    """Upload `impl` as a job; the service's answer ({"id", "state", "position"})."""
    body = {
        "kind": kind,
        "op": op,
        "filename": impl.name,
        "content_b64": base64.b64encode(impl.read_bytes()).decode("ascii"),
        "options": options,
    }
    return client.call("POST", "/api/jobs", body)


def wait(client: Client, job: str, progress: Progress) -> dict:
    """Look at the job every POLL_S until it is done or failed; its last status."""
    drops = 0
    while True:
        try:
            status = client.call("GET", f"/api/jobs/{job}")
        except Unreachable:
            drops += 1
            if drops > DROPS:
                raise
            time.sleep(POLL_S)
            continue
        drops = 0
        progress.show(status)
        if status.get("state") in ("done", "failed"):
            return status
        time.sleep(POLL_S)


def run(kind: str, op: str, impl: Path, options: dict) -> Finished:
    """Submit `impl` for a `kind` job, wait (its progress on stderr), and fetch its answer;
    RemoteError for a job that did not run or failed."""
    client = Client(find_queue())
    job = str(submit(client, kind, op, impl, options)["id"])
    progress = Progress(job, sys.stderr)
    try:
        status = wait(client, job, progress)
    except KeyboardInterrupt:
        raise RemoteError(f"stopped waiting; job {job} stays in the queue") from None
    finally:
        progress.close()
    if status["state"] == "failed":
        raise JobFailed(f"job {job} failed: {status.get('error') or 'no cause given'}")
    return Finished(job, client.call("GET", f"/api/jobs/{job}/result"))


def save_receipt(finished: Finished, path: Path) -> Path:
    """The service's whole answer, result and receipt, at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(finished.answer, indent=2) + "\n")
    return path


def refused(prog: str, exc: RemoteError) -> int:
    """Say why the remote run stopped, in one line; its exit status."""
    line = str(exc)
    print(f"{prog}: {line}{'' if line.endswith('.') else '.'}", file=sys.stderr)
    return JOB_FAILED if isinstance(exc, JobFailed) else NOTHING_RAN


def failure_line(prog: str, finished: Finished) -> str:
    """What a job that ran but did not succeed said, as its command says it here."""
    said = str(finished.result.get("error") or "").strip().removeprefix(f"{prog}: ")
    return said or f"job {finished.job} ended with exit status {finished.exit_status}"


def benchmark(
    op: str, impl: Path, output: Path, options: dict, table: Callable[[Sequence[Row]], str]
) -> int:
    """`benchmark --remote`: the results at `output` and the table, as a local run gives."""
    try:
        finished = run("benchmark", op, impl, {**options, "output": str(output)})
    except RemoteError as exc:
        return refused("benchmark", exc)
    if finished.exit_status != 0:
        print(f"benchmark: {failure_line('benchmark', finished)}", file=sys.stderr)
        return finished.exit_status
    try:
        results = from_json(finished.result, f"job {finished.job}'s results")
    except ResultsError as exc:
        return refused("benchmark", JobFailed(f"{exc}; tell your instructor"))
    path = results.save(output)
    receipt = save_receipt(finished, Path(f"{output}.receipt.json"))
    print(table(results.rows))
    print(f"Wrote {len(results.rows)} rows to {path}.")
    print(f"remote: the course's receipt of job {finished.job}: {receipt}", file=sys.stderr)
    return 0


def check(op: str, impl: Path, options: dict, as_json: bool) -> int:
    """`check --remote`: what the local check prints (its text, or with `as_json` its JSON
    report; its stderr on stderr) and its exit status."""
    try:
        finished = run("check", op, impl, options)
    except RemoteError as exc:
        return refused("check", exc)
    report = dict(finished.result)
    text, said = report.pop("stdout", ""), report.pop("stderr", "")
    print(said, end="", file=sys.stderr)
    if as_json and "schema" in report:  # else the check stopped before its report
        print(json.dumps(report, indent=2))
    else:
        print(text, end="")
    if not (text or said or "schema" in report):
        print(f"check: {failure_line('check', finished)}", file=sys.stderr)
    receipt = save_receipt(finished, RECEIPTS / f"{finished.job}.json")
    print(f"remote: the course's receipt of job {finished.job}: {receipt}", file=sys.stderr)
    return finished.exit_status


def next_step(command: str, argv: Sequence[str]) -> str:
    """The sentence that ends a no-GPU refusal: the same command, on the course's queue."""
    again = shlex.join([*command.split(), *argv, "--remote"])
    return (
        f"To time it on the course's GPU queue instead, run {again} (it reads the {HANDOUT} "
        "your instructor hands out: put it in this folder)."
    )
