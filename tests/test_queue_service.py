"""The class GPU queue's service (grader/queue/): its HTTP API on loopback, its bounds, the
store's jobs across a restart, stale workers, tokens and receipts. All on CPU; the worker's
part is a stand-in (tests/queue_server.py) that claims a job and finishes it."""

from __future__ import annotations

import base64
import csv
import json
import signal
import subprocess
import sys
import threading
import time

import pytest
import services
from in_process import run_main
from queue_server import NOTEBOOK, call, course, finish_job, job_request, serving, store

from grader import seeding
from grader.gradebook import open_gradebook
from grader.queue import cli, receipt, tokens
from grader.queue.service import KINDS, OPTIONS, Bounds
from grader.queue.store import Store, StoreError


@pytest.fixture
def root(tmp_path):
    return course(tmp_path / "course")


def test_a_missing_or_wrong_token_is_refused_with_401(root):
    """Is a submission without a token, or with a wrong one, refused with the token bound?"""
    with serving(root) as url:
        for token in (None, "tok-nobody"):
            status, answer, _ = call(url, "POST", "/api/jobs", token, job_request())
            assert status == 401
            assert answer["bound"] == "token"
            assert "Authorization: Bearer" in answer["error"]
        assert call(url, "GET", "/api/health")[0] == 200  # the one call without a token


def test_an_upload_over_the_size_bound_is_refused_with_413(root):
    """Is a notebook over the upload bound refused with 413, by its size and the next step,
    whether its body says so at once or only once read?"""
    big = json.dumps({"cells": [{"source": "x" * 30_000}]}).encode()
    request = job_request(content_b64=base64.b64encode(big).decode())
    with serving(root, Bounds(upload_mb=0.02)) as url:
        status, answer, _ = call(url, "POST", "/api/jobs", "tok-alice", request)
        assert status == 413
        assert answer["bound"] == "size"
        assert "over the 0.02 MB bound" in answer["error"]
        assert "Clear Outputs" in answer["error"]
        huge = json.dumps(job_request(content_b64="A" * 200_000)).encode()
        assert call(url, "POST", "/api/jobs", "tok-alice", raw=huge)[0] == 413
        small = job_request()
        assert call(url, "POST", "/api/jobs", "tok-alice", small)[0] == 202


@pytest.mark.parametrize(
    ("filename", "content"),
    [("answer.docx", b"PK\x03\x04"), ("strided_softmax.ipynb", b"not json"), ("x.ipynb", b"[]")],
)
def test_a_file_that_is_no_notebook_is_refused_with_415(root, filename, content):
    """Is an upload that is neither a notebook (JSON with cells) nor a .py file refused?"""
    request = job_request(filename=filename, content_b64=base64.b64encode(content).decode())
    with serving(root) as url:
        status, answer, _ = call(url, "POST", "/api/jobs", "tok-alice", request)
    assert status == 415
    assert answer["bound"] == "kind of file"
    assert filename in answer["error"]


def test_a_bad_kind_op_or_option_is_refused_with_422(root):
    """Is an unknown kind, op or option (a sandbox switch included) refused with 422?"""
    with serving(root) as url:
        for bad in (
            job_request(kind="train"),
            job_request(op="matmul"),
            job_request(options={"sandbox": "off"}),
            job_request(options={"hint": "yes"}),
            job_request(filename="../../etc/x.py"),
        ):
            status, answer, _ = call(url, "POST", "/api/jobs", "tok-alice", bad)
            assert (status, answer["bound"]) == (422, "request"), bad
        assert call(url, "GET", "/api/health")[1]["queued"] == 0


def test_a_flood_is_refused_with_429_and_when_to_retry(root):
    """Does a flood hit each bound in turn (one job per student, jobs per hour, queue
    length), each a 429 with its bound and a Retry-After header?"""
    bounds = Bounds(jobs_per_student=1, jobs_per_hour=2, queue_length=2)
    with serving(root, bounds) as url:
        assert call(url, "POST", "/api/jobs", "tok-alice", job_request())[0] == 202
        status, answer, headers = call(url, "POST", "/api/jobs", "tok-alice", job_request())
        assert (status, answer["bound"]) == (429, "one-job")
        assert int(headers["retry-after"]) == answer["retry_after_s"] > 0
        assert "position 1" in answer["error"]
        queue = store(root)
        finish_job(root, queue, {"ok": True})  # alice's job done: she may send another
        assert call(url, "POST", "/api/jobs", "tok-alice", job_request())[0] == 202
        finish_job(root, queue, {"ok": True})
        status, answer, headers = call(url, "POST", "/api/jobs", "tok-alice", job_request())
        assert (status, answer["bound"]) == (429, "rate")
        assert 3500 < int(headers["retry-after"]) <= 3600
        assert call(url, "POST", "/api/jobs", "tok-bob", job_request())[0] == 202
        assert call(url, "POST", "/api/jobs", "tok-carol", job_request())[0] == 202
        assert call(url, "POST", "/api/jobs", "tok-carol", job_request())[1]["bound"] == "one-job"
        queue.close()
    with serving(root, Bounds(queue_length=2)) as url:
        token = "tok-dave"
        known = tokens.load(root)
        known.students[tokens.token_hash(token)] = "dave"
        tokens.save(root, known)  # a token made while the service runs works at once
        status, answer, headers = call(url, "POST", "/api/jobs", token, job_request())
        assert (status, answer["bound"]) == (429, "queue-length")
        assert headers["retry-after"] == "60"


def test_a_restart_mid_queue_keeps_every_job_and_its_place(root):
    """Stopped and started again on the same database, does the service still have the
    queued jobs, each in its place, and the running one?"""
    with serving(root) as url:
        ids = [
            call(url, "POST", "/api/jobs", f"tok-{s}", job_request())[1]["id"]
            for s in ("alice", "bob", "carol")
        ]
        assert store(root).claim("stand-in").id == ids[0]
    with serving(root) as url:
        first = call(url, "GET", f"/api/jobs/{ids[0]}", "tok-alice")[1]
        second = call(url, "GET", f"/api/jobs/{ids[1]}", "tok-bob")[1]
        third = call(url, "GET", f"/api/jobs/{ids[2]}", "tok-carol")[1]
        health = call(url, "GET", "/api/health")[1]
    assert (first["state"], first["position"], first["attempts"]) == ("running", None, 1)
    assert (second["state"], second["position"]) == ("queued", 1)
    assert (third["state"], third["position"]) == ("queued", 2)
    assert (health["queued"], health["running"], health["workers"]) == (2, 1, ["stand-in"])


def test_another_students_job_is_404_like_an_unknown_one(root):
    """Does bob asking for alice's job, status or result, get the same 404 as an unknown id?"""
    with serving(root) as url:
        job = call(url, "POST", "/api/jobs", "tok-alice", job_request())[1]["id"]
        for path in (f"/api/jobs/{job}", f"/api/jobs/{job}/result"):
            status, answer, _ = call(url, "GET", path, "tok-bob")
            assert status == 404
            assert "you have no job" in answer["error"]
            assert "alice" not in json.dumps(answer)
        assert call(url, "GET", "/api/jobs/0123abcd", "tok-bob")[0] == 404
        assert call(url, "GET", f"/api/jobs/{job}", "tok-alice")[0] == 200


def test_a_result_is_409_until_done_then_the_signed_result(root):
    """Is the result 409 (with the place) while queued, then what the worker finished, with
    its receipt, and are the phases and their times shown on the way?"""
    result = {"op": "strided_softmax", "passed": 12, "stdout": "12 cases passed\n"}
    with serving(root) as url:
        job = call(url, "POST", "/api/jobs", "tok-alice", job_request())[1]["id"]
        status, answer, headers = call(url, "GET", f"/api/jobs/{job}/result", "tok-alice")
        assert (status, answer["state"]) == (409, "queued")
        assert "position 1" in answer["error"]
        assert "retry-after" in headers
        finish_job(root, store(root), result)
        status, done, _ = call(url, "GET", f"/api/jobs/{job}/result", "tok-alice")
        shown = call(url, "GET", f"/api/jobs/{job}", "tok-alice")[1]
    assert status == 200
    assert (done["result"], done["exit_status"]) == (result, 0)
    receipt.verify(root, done["result"], done["receipt"])
    assert (shown["state"], shown["phase"], shown["position"]) == ("done", "done", None)
    assert list(shown["phases"]) == ["queued", "running", "checking", "signing", "done"]


def test_a_stale_running_job_is_requeued_once_then_failed_with_its_cause(root):
    """Is a running job whose worker stopped heart-beating requeued by the service (its
    place kept), and failed with the cause the second time, never lost?"""
    queue = store(root)
    with serving(root, Bounds(stale_after_s=5), reap_every_s=0.1) as url:
        first = call(url, "POST", "/api/jobs", "tok-alice", job_request())[1]["id"]
        call(url, "POST", "/api/jobs", "tok-bob", job_request())
        queue.claim("dead-worker", now=time.time() - 60)
        shown = wait_for(url, first, "tok-alice", "queued")
        assert (shown["position"], shown["attempts"]) == (1, 1)
        assert "requeued once" in shown["error"]
        assert "dead-worker stopped answering" in shown["error"]
        assert queue.claim("dead-again", now=time.time() - 60).id == first
        shown = wait_for(url, first, "tok-alice", "failed")
        status, answer, _ = call(url, "GET", f"/api/jobs/{first}/result", "tok-alice")
    assert shown["attempts"] == 2
    assert "failed twice" in shown["error"]
    assert "dead-again stopped answering" in shown["error"]
    assert (status, answer["state"]) == (409, "failed")
    assert "dead-again" in answer["error"]
    queue.close()


def wait_for(url: str, job: str, token: str, state: str) -> dict:
    for _ in range(100):
        shown = call(url, "GET", f"/api/jobs/{job}", token)[1]
        if shown["state"] == state:
            return shown
        time.sleep(0.05)
    raise AssertionError(f"job {job} never became {state}: {shown}")


def test_a_live_worker_keeps_its_job(root):
    """Does a job whose worker beats its heart stay running however long it runs?"""
    queue = store(root)
    job = queue.submit("alice", "check", "strided_softmax", "a.ipynb", NOTEBOOK, {}, now=0)
    queue.claim("alive", now=0)
    for beat in range(0, 1000, 50):
        queue.heartbeat(job.id, now=beat)
        assert queue.requeue_stale(120, now=beat + 60) == []
    assert queue.status(job.id)["state"] == "running"


def test_a_worker_thought_dead_cannot_overwrite_its_requeued_job(root):
    """When a slow worker's job was requeued and another worker took it, are the slow one's
    phase, result and failure refused, and only the holder's recorded?"""
    queue = store(root)
    job = queue.submit("alice", "check", "strided_softmax", "a.ipynb", NOTEBOOK, {}, now=0)
    queue.claim("slow", now=0)
    assert queue.requeue_stale(120, now=300) == [job.id]
    queue.claim("fresh", now=301)
    for late in (
        lambda: queue.phase(job.id, "checking", worker="slow"),
        lambda: queue.finish(job.id, {"late": True}, {}, 0, worker="slow"),
        lambda: queue.fail(job.id, "late", worker="slow"),
    ):
        with pytest.raises(StoreError, match="no longer slow's"):
            late()
    queue.finish(job.id, {"ok": True}, {}, 0, worker="fresh")
    assert queue.status(job.id)["state"] == "done"
    with pytest.raises(StoreError, match="not running"):
        queue.fail(job.id, "late", worker="slow")
    assert queue.status(job.id)["state"] == "done"
    queue.close()


def test_two_workers_never_claim_one_job(root):
    """Do workers claiming at once, in threads, each get other jobs, none left behind?"""
    claimed_by_all(store(root))


def claimed_by_all(queue: Store, jobs: int = 40, workers: int = 4) -> None:
    for n in range(jobs):
        queue.submit(f"s{n}", "check", "strided_softmax", "a.ipynb", NOTEBOOK, {})
    claimed: list[str] = []

    def work(name: str) -> None:
        while (job := queue.claim(name)) is not None:
            claimed.append(job.id)

    threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(claimed) == len(set(claimed)) == jobs
    assert queue.counts()["running"] == jobs


@pytest.mark.services
def test_two_workers_never_claim_one_job_on_postgresql(tmp_path):
    """On PostgreSQL (FOR UPDATE SKIP LOCKED), do workers claiming at once get other jobs?"""
    try:
        server = services.postgres()
        running = server.__enter__()
    except services.ServiceUnavailable as missing:
        services.unavailable(str(missing))
    try:
        claimed_by_all(Store(running.create_database("queue")))
    finally:
        server.__exit__(None, None, None)


def test_verify_accepts_a_signed_result_and_refuses_an_edited_one(root, tmp_path):
    """Does `grader.queue verify` hold a signed result, and refuse it once its result, or its
    receipt, was edited, in one line each?"""
    result = {"schema": "i1-benchmark/1", "rows": [{"variant": "direct", "median_ms": 0.5}]}
    facts = {"job": "j1", "student": "alice", "kind": "benchmark", "op": "strided_softmax"}
    signed = receipt.sign(root, {**facts, "gpu": {"name": "NVIDIA H100"}}, result)
    path = tmp_path / "i1.json"
    path.write_text(json.dumps({**result, "receipt": signed}))
    held = run_main(cli.main, ("verify", str(path)), cwd=root)
    assert held.returncode == 0, held.stderr
    assert "job j1 of alice" in held.stdout
    edits = {
        "faster.json": {**result, "rows": [{"variant": "direct", "median_ms": 0.1}]},
        "gpu.json": {**result, "receipt": {**signed, "gpu": {"name": "NVIDIA B200"}}},
        "answer.json": {"result": result, "receipt": {**signed, "student": "bob"}},
    }
    edits["faster.json"]["receipt"] = signed
    for name, edited in edits.items():
        (tmp_path / name).write_text(json.dumps(edited))
        refused = run_main(cli.main, ("verify", str(tmp_path / name), "--course", str(root)))
        assert refused.returncode == 1, name
        assert len(refused.stderr.strip().splitlines()) == 1
        assert ("result was edited" in refused.stderr) == (name == "faster.json")


def test_a_receipt_of_another_course_is_refused(root, tmp_path, monkeypatch):
    """Does a receipt signed by another course's secret fail this course's check?"""
    monkeypatch.delenv(seeding.ENV)  # each course's own secret file
    other = course(tmp_path / "other")
    signed = receipt.sign(other, {"job": "j1"}, {"ok": True})
    with pytest.raises(receipt.ReceiptError, match="signed by another course"):
        receipt.verify(root, {"ok": True}, signed)


@pytest.fixture(scope="module")
def roster_course(tmp_path_factory):
    """A course with a roster of two students in nbgrader's gradebook, and no tokens."""
    root = tmp_path_factory.mktemp("roster") / "course"
    course(root, students=())
    (root / tokens.TOKENS_FILE).unlink()
    with open_gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        gradebook.add_student("12345", first_name="Ada", last_name="Lovelace")
        gradebook.add_student("23456", first_name="Alan", last_name="Turing")
    return root


def test_tokens_are_made_per_roster_student_and_kept_only_hashed(roster_course):
    """Does `tokens` make one token per roster student for the LMS, keep only their hashes,
    make none again on a rerun, and replace one with --student?"""
    root = roster_course
    made = run_main(cli.main, ("tokens", "--url", "https://gpu.example.edu/i1"), cwd=root)
    assert made.returncode == 0, made.stderr
    assert "2 token(s) written" in made.stdout
    rows = list(csv.DictReader((root / tokens.CSV_FILE).open()))
    assert [r["student_id"] for r in rows] == ["12345", "23456"]
    kept = (root / tokens.TOKENS_FILE).read_text()
    assert all(r["token"] not in kept for r in rows)
    assert oct((root / tokens.TOKENS_FILE).stat().st_mode & 0o777) == "0o600"
    assert tokens.load(root).student(rows[0]["token"]) == "12345"
    handout = json.loads((root / tokens.HANDOUTS / "23456" / tokens.HANDOUT).read_text())
    assert handout == {"url": "https://gpu.example.edu/i1", "token": rows[1]["token"]}
    again = run_main(cli.main, ("tokens",), cwd=root)
    assert "every roster student has a token already" in again.stdout
    replaced = run_main(cli.main, ("tokens", "--student", "12345"), cwd=root)
    new = replaced.stdout.split("12345: ")[1].split()[0]
    assert tokens.load(root).student(new) == "12345"
    assert tokens.load(root).student(rows[0]["token"]) is None
    assert tokens.load(root).student(rows[1]["token"]) == "23456"
    stranger = run_main(cli.main, ("tokens", "--student", "99999"), cwd=root)
    assert stranger.returncode == 2
    assert "99999 is not on the roster" in stranger.stderr


def test_every_command_refuses_a_folder_that_is_no_course(tmp_path):
    """Does each queue command, run outside a course, say so in one line and exit 2?"""
    for args in (("tokens",), ("serve",), ("board", "--out", "b.html"), ("verify", "x.json")):
        done = run_main(cli.main, args, cwd=tmp_path)
        assert done.returncode == 2
        assert "is not a course: it has no nbgrader_config.py" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_the_service_takes_the_ops_and_options_the_commands_and_worker_take():
    """Are the service's kinds the check's and the benchmark's ops, and its options those
    the worker passes on (plus the ones only the student's side reads)?"""
    from learning.workshops.checking.suites import OPS
    from learning.workshops.measuring.sweep import TIMED_OPS

    assert KINDS == {"check": tuple(OPS), "benchmark": tuple(TIMED_OPS)}
    runner = pytest.importorskip("grader.queue.runner")
    local = set(runner.LOCAL_ONLY)
    assert set(OPTIONS["check"]) - local == set(runner.CHECK_OPTIONS)
    assert set(OPTIONS["benchmark"]) - local == set(runner.BENCHMARK_OPTIONS)


def test_serve_answers_on_its_port_until_stopped(root):
    """Does `python -m grader.queue serve` serve the course's queue on the port it is given,
    say where, and stop on SIGINT with status 0?"""
    port = services.free_port()
    argv = [sys.executable, "-m", "grader.queue", "serve", "--workers", "0", "--port", str(port)]
    server = subprocess.Popen(argv, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        for _ in range(200):
            try:
                health = call(f"http://127.0.0.1:{port}", "GET", "/api/health")
                break
            except OSError:
                time.sleep(0.05)
        assert health[:2] == (200, {"ok": True, "queued": 0, "running": 0, "workers": []})
    finally:
        server.send_signal(signal.SIGINT)
        out = server.communicate(timeout=30)[0].decode()
    assert server.returncode == 0, out
    assert f"the queue of {root} on http://127.0.0.1:{port}, 0 local worker(s)" in out
