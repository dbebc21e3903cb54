"""`--remote`: the student's side of the class GPU queue, against a stand-in of the queue's HTTP
API on loopback (the spec's answers, scripted), checking that what it writes and prints is what
the local command writes and prints."""

from __future__ import annotations

import io
import json
import os
import shlex
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import nbformat
import pytest
from docs_commands import doc
from in_process import run_main

from grader import course
from learning.workshops import benchmark, check, remote
from learning.workshops.checking.child import child_env
from learning.workshops.measuring import results

REPO = Path(__file__).resolve().parents[1]
H200 = REPO / "learning" / "workshops" / "measuring" / "data" / "h200_i1.json"
TOKEN = "student-token-7"
JOB = "job-42"
OUTPUT = "results/local/i1.json"
PREFIX = "/i1"
"""The path the queue is served under, as behind the university's proxy."""
REMOTE_COMMANDS = [c for c in doc("queue.md").commands() if "--remote" in c]
"""The page's `--remote` commands, run verbatim here (test_docs leaves them to this file)."""


def status(state: str, phase: str, position: int | None = None, error: str | None = None):
    return {
        "id": JOB,
        "state": state,
        "position": position,
        "phase": phase,
        "phases": {},
        "error": error,
        "attempts": 1,
    }


QUEUED_THEN_DONE = [
    status("queued", "queued", 3),
    status("queued", "queued", 2),
    status("queued", "queued", 1),
    status("running", "checking"),
    status("running", "timing"),
    status("running", "signing"),
    status("done", "done"),
]
RECEIPT = {"schema": "i1-receipt/1", "job": JOB, "signature": "ab" * 32}


class StandIn:
    """The queue's API, scripted: the job's successive statuses, its answer, a refusal of the
    upload, GETs to drop without a reply; and what it was sent."""

    def __init__(self) -> None:
        self.statuses = list(QUEUED_THEN_DONE)
        self.answer: dict = {}
        self.refusal: tuple[int, dict] | None = None
        self.drops: set[int] = set()
        self.sent: list[dict] = []
        self.looks = 0

    def job_status(self) -> dict | None:
        """The next status, the last one repeated; None for a look to drop."""
        self.looks += 1
        if self.looks in self.drops:
            return None
        return self.statuses[min(self.looks, len(self.statuses)) - 1]


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def reply(self, code: int, body: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def authorized(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {TOKEN}":
            return True
        self.reply(401, {"error": "unknown token", "bound": "token", "retry_after_s": None})
        return False

    def do_POST(self) -> None:
        stand_in: StandIn = self.server.stand_in
        if self.path != f"{PREFIX}/api/jobs" or not self.authorized():
            return
        stand_in.sent.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        if stand_in.refusal:
            code, body = stand_in.refusal
            retry = body.get("retry_after_s")
            self.reply(code, body, {"Retry-After": str(retry)} if retry else None)
            return
        self.reply(202, {"id": JOB, "state": "queued", "position": 3})

    def do_GET(self) -> None:
        stand_in: StandIn = self.server.stand_in
        if not self.authorized():
            return
        if self.path == f"{PREFIX}/api/jobs/{JOB}":
            found = stand_in.job_status()
            if found is not None:  # else: closed without a reply, a dropped connection
                self.reply(200, found)
        elif self.path == f"{PREFIX}/api/jobs/{JOB}/result":
            self.reply(200, stand_in.answer)
        else:
            self.reply(404, {"error": "no such job", "bound": None, "retry_after_s": None})


@pytest.fixture
def stand_in():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.stand_in = StandIn()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.stand_in.url = f"http://127.0.0.1:{server.server_address[1]}{PREFIX}"
    yield server.stand_in
    server.shutdown()
    server.server_close()


@pytest.fixture
def folder(tmp_path, stand_in, monkeypatch) -> Path:
    """A student's folder: the notebook, and the handout file naming the stand-in."""
    for name in ("I1_QUEUE", "I1_QUEUE_URL", "I1_QUEUE_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(remote, "POLL_S", 0.01)
    work = tmp_path / "work"
    work.mkdir()
    (work / "strided_softmax.ipynb").write_text(SOLVED)
    handout = {"url": stand_in.url, "token": TOKEN}
    (work / remote.HANDOUT).write_text(json.dumps(handout))
    return work


SOLVED = nbformat.writes(course.solved_notebook(course.REPO))
BENCHMARK = ("--op", "strided_softmax", "--remote", "--output", OUTPUT)
CHECK = ("strided_softmax", "--remote", "--impl", "strided_softmax.ipynb")


def h200_answer() -> dict:
    return {"result": json.loads(H200.read_text()), "receipt": RECEIPT, "exit_status": 0}


def test_benchmark_writes_what_a_local_run_writes(folder, stand_in, tmp_path):
    """Does `benchmark --remote` write the job's results exactly as the local command writes
    a run (so the results loader reads it), print the same table and last line, save the
    answer as the receipt beside it, and send the notebook with the token?"""
    stand_in.answer = h200_answer()
    done = run_main(benchmark.main, BENCHMARK, folder)
    assert done.returncode == 0, done.stderr
    written = results.load(folder / OUTPUT)
    local = results.load(H200).save(tmp_path / "local.json")
    assert (folder / OUTPUT).read_text() == local.read_text()
    rows = len(written.rows)
    table = benchmark.format_table(written.rows)
    assert done.stdout == f"{table}\nWrote {rows} rows to {OUTPUT}.\n"
    receipt = json.loads((folder / f"{OUTPUT}.receipt.json").read_text())
    assert receipt == stand_in.answer
    (sent,) = stand_in.sent
    assert (sent["kind"], sent["op"], sent["filename"]) == (
        "benchmark",
        "strided_softmax",
        "strided_softmax.ipynb",
    )
    assert remote.base64.b64decode(sent["content_b64"]).decode() == SOLVED
    assert sent["options"]["output"] == OUTPUT and sent["options"]["warps"] == "4,8"


def test_waiting_says_each_phase_once_without_a_terminal(folder, stand_in):
    """Without a terminal, does the wait print one line per phase (the queue's position on the
    first), not one per look?"""
    stand_in.answer = h200_answer()
    done = run_main(benchmark.main, BENCHMARK, folder)
    lines = [line for line in done.stderr.splitlines() if line.startswith("remote: job")]
    assert lines == [
        f"remote: job {JOB} queued, position 3",
        f"remote: job {JOB} running: checking",
        f"remote: job {JOB} running: timing",
        f"remote: job {JOB} running: signing",
        f"remote: job {JOB} done: done",
    ]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_bar_shows_the_position_and_phase():
    """On a terminal, does a progress bar show the queue's position, then the phase, and
    fill as the job moves up and runs?"""
    screen = Terminal()
    progress = remote.Progress(JOB, screen)
    for each in QUEUED_THEN_DONE:
        progress.show(each)
    assert progress.bar.n == progress.bar.total == 4
    progress.close()
    drawn = screen.getvalue()
    assert "queued, position 3" in drawn and "running: timing" in drawn and "|" in drawn


@pytest.fixture(scope="module")
def local_check(tmp_path_factory) -> tuple[str, str]:
    """What `check strided_softmax --seed 5` prints here, as text and with --json."""
    work = tmp_path_factory.mktemp("local")
    impl = work / "strided_softmax.ipynb"
    impl.write_text(SOLVED)
    report = check.run_check("strided_softmax", impl, seed=5, shrink_failures=True)
    text = check.format_report(report, False) + check.drawn_line(report, None, None)
    return text, json.dumps({**report.to_json(), "picture": None}, indent=2)


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_check_prints_what_a_local_check_prints(folder, stand_in, local_check, as_json):
    """Does `check --remote` print the local check's text (or its --json object), exit with
    the job's status, and save the answer at results/remote/<job>.json?"""
    text, report = local_check
    result = {**json.loads(report), "stdout": text + "\n", "stderr": ""}
    stand_in.answer = {"result": result, "receipt": RECEIPT, "exit_status": 0}
    done = run_main(check.main, CHECK + (("--json",) if as_json else ()), folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (report if as_json else text) + "\n"
    saved = folder / "results" / "remote" / f"{JOB}.json"
    assert json.loads(saved.read_text()) == stand_in.answer
    assert stand_in.sent[0]["kind"] == "check" and stand_in.sent[0]["options"] == {"hint": False}


REFUSALS = {
    401: ({"error": "unknown token", "bound": "token", "retry_after_s": None}, "check the token"),
    413: (
        {
            "error": "the upload is 6.2 MB, over the 5 MB bound",
            "bound": "size",
            "retry_after_s": None,
        },
        "over the 5 MB bound",
    ),
    415: (
        {"error": "not a notebook or a .py file", "bound": "kind of file", "retry_after_s": None},
        "not a notebook",
    ),
    429: (
        {"error": "12 jobs this hour, the most per student", "bound": "rate", "retry_after_s": 840},
        "(try again in 840 s).",
    ),
}


@pytest.mark.parametrize("code", REFUSALS)
def test_a_refusal_is_the_services_line_and_when_to_retry(folder, stand_in, code):
    """Is a refused upload (token, size, kind of file, rate) one line, the service's own
    error with when to try again (or, for a token, where the token came from), exit 2,
    with nothing written?"""
    body, said = REFUSALS[code]
    if code == 401:
        (folder / remote.HANDOUT).write_text(json.dumps({"url": stand_in.url, "token": "old"}))
    else:
        stand_in.refusal = (code, body)
    done = run_main(benchmark.main, BENCHMARK, folder)
    assert done.returncode == 2
    assert done.stderr.startswith(f"benchmark: the course queue refused: {body['error']}")
    assert said in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    assert not (folder / "results").exists()


def test_a_failed_job_gives_its_cause(folder, stand_in):
    """Does a job that failed give its cause in one line, exit 1, with nothing written?"""
    cause = "the job ran past 600 s"
    stand_in.statuses = [status("running", "timing"), status("failed", "failed", error=cause)]
    done = run_main(benchmark.main, BENCHMARK, folder)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == f"benchmark: job {JOB} failed: {cause}."
    assert not (folder / "results").exists()


def test_a_worker_without_a_gpu_is_said_as_the_job_said_it(folder, stand_in):
    """Does a benchmark a CPU worker answered with exit 2 say that worker's line, exit 2, and
    write no results?"""
    error = {"error": "this worker has no GPU", "stdout": "benchmark: this worker has no GPU"}
    stand_in.answer = {"result": error, "receipt": RECEIPT, "exit_status": 2}
    done = run_main(benchmark.main, BENCHMARK, folder)
    assert (done.returncode, done.stderr.splitlines()[-1]) == (
        2,
        "benchmark: this worker has no GPU",
    )
    assert not (folder / OUTPUT).exists()


def test_a_dropped_connection_while_waiting_is_tried_again(folder, stand_in):
    """Does the wait survive the queue closing a connection without a reply (twice), and
    still write the results?"""
    stand_in.answer = h200_answer()
    stand_in.drops = {2, 3}
    done = run_main(benchmark.main, BENCHMARK, folder)
    assert done.returncode == 0, done.stderr
    assert results.load(folder / OUTPUT).rows


def test_a_queue_that_stays_away_is_one_line(folder, stand_in, monkeypatch):
    """When the queue stops answering while the job waits, does the wait give up after
    DROPS tries in one line that says the queue cannot be reached?"""
    stand_in.drops = set(range(2, 100))
    monkeypatch.setattr(remote, "DROPS", 2)
    done = run_main(benchmark.main, BENCHMARK, folder)
    assert done.returncode == 2
    assert "cannot reach the course queue" in done.stderr.splitlines()[-1]


def test_an_unreachable_queue_is_one_line(folder):
    """Does a handout file naming a port nobody listens on give one line naming the queue's
    address and what to do, exit 2?"""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    (folder / remote.HANDOUT).write_text(json.dumps({"url": url, "token": TOKEN}))
    done = run_main(check.main, CHECK, folder)
    assert done.returncode == 2
    assert done.stderr.startswith(f"check: cannot reach the course queue at {url} (")
    assert "ask your instructor whether the queue is up." in done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_no_handout_file_says_where_it_looked_and_what_to_ask_for(folder):
    """Without a handout file, does the command say in one line where it looked and to ask
    the instructor for i1_queue.json, exit 2?"""
    (folder / remote.HANDOUT).unlink()
    done = run_main(check.main, CHECK, folder)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert f"no i1_queue.json found (looked in {folder / remote.HANDOUT}, " in done.stderr
    assert ".i1_queue.json); ask your instructor for your i1_queue.json" in done.stderr


def test_the_environment_overrides_the_handout_file(folder, stand_in, monkeypatch):
    """Does $I1_QUEUE name the handout file, and do $I1_QUEUE_URL and $I1_QUEUE_TOKEN
    override its fields?"""
    moved = folder.parent / "elsewhere.json"
    (folder / remote.HANDOUT).rename(moved)
    monkeypatch.setenv("I1_QUEUE", str(moved))
    assert remote.find_queue(folder).url == stand_in.url
    monkeypatch.setenv("I1_QUEUE_TOKEN", "from-env")
    assert remote.find_queue(folder).token == "from-env"
    monkeypatch.setenv("I1_QUEUE", str(folder / "missing.json"))
    with pytest.raises(remote.RemoteError, match="I1_QUEUE names .*missing.json, which is no"):
        remote.find_queue(folder)


def test_without_a_gpu_the_benchmark_names_the_remote_command(folder):
    """Without a CUDA device, does the benchmark's one line end with the same command and
    --remote, and where the handout file goes?"""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    argv = ("--op", "strided_softmax", "--output", OUTPUT)
    done = run_main(benchmark.main, argv, folder)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith("benchmark: GPU timing needs a CUDA device")
    again = f"python -m learning.workshops.benchmark {' '.join(argv)} --remote"
    assert done.stderr.rstrip().endswith(
        f"run {again} (it reads the i1_queue.json your instructor hands out: put it in this "
        "folder)."
    )


@pytest.mark.parametrize("command", REMOTE_COMMANDS)
def test_each_remote_command_shown_runs_against_the_queue(command, folder, stand_in):
    """Does each `--remote` command docs/queue.md shows, run verbatim as a process in a
    student's folder, get its job done by the queue and write what the page says?"""
    stand_in.statuses = [status("done", "done")]  # the wait is tested above, at POLL_S
    if ".check " in command:
        text = "strided_softmax from strided_softmax.ipynb: 20 of 20 cases pass\nAll cases pass.\n"
        result = {"schema": "i1-check/2", "passed": True, "stdout": text, "stderr": ""}
        stand_in.answer = {"result": result, "receipt": RECEIPT, "exit_status": 0}
    else:
        stand_in.answer = h200_answer()
    argv = shlex.split(command)
    env = child_env() | {"HOME": os.environ["HOME"]}
    done = subprocess.run(
        [sys.executable, *argv[1:]], cwd=folder, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    if "--output" in argv:
        assert results.load(folder / argv[argv.index("--output") + 1]).rows
    else:
        assert done.stdout == text
    assert "remote: the course's receipt of job" in done.stderr
