"""The class GPU queue's worker (grader.queue.worker, runner, slurm_job): jobs run as the
student's own command would run them, bounded, sandboxed, signed, and none lost to a dead
worker. On the CPU: checks run in Triton's interpreter, benchmarks answer "no GPU"."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from grader import autograde_workers, course
from grader.gpu_lock import GPU_LOCK_ENV
from grader.gradebook import gradebook_url
from grader.isolation.cpu_share import descendants
from grader.queue import board, receipt
from grader.queue import worker as worker_module
from grader.queue.runner import NO_GPU, JobFailed, options_argv, run_job, upload_name
from grader.queue.slurm_job import JOBS, SlurmTarget
from grader.queue.store import DONE, FAILED, RUNNING, Store
from grader.queue.verified_timing import SHAPES
from grader.queue.worker import Worker, gpu_lock_env
from grader.seeding import course_secret, new_secret

OP = "strided_softmax"
REFERENCE = (course.REPO / "grader" / "reference.py").read_bytes()
SLEEPS = b"import time\ntime.sleep(600)\n"
"""A .py whose import never ends: the job hangs in the check's loading."""
QUIET = []


@pytest.fixture
def course_root(tmp_path: Path) -> Path:
    """A course folder outside the repository: its config and a secret to sign with."""
    root = tmp_path / "course"
    root.mkdir()
    shutil.copy(course.REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    new_secret(root)
    return root


@pytest.fixture
def store(course_root: Path):
    found = Store(gradebook_url(course_root))
    yield found
    found.close()


def worker(root: Path, store: Store, **kw) -> Worker:
    return Worker(root, store, say=QUIET.append, **kw)


def submit(store: Store, kind: str, content: bytes, filename: str = f"{OP}.py", **options):
    return store.submit("s1", kind, OP, filename, content, options)


def local_check(folder: Path, seed: int) -> dict:
    """What `python -m learning.workshops.check OP --json` prints, run where the student is."""
    (folder / f"{OP}.py").write_bytes(REFERENCE)
    done = subprocess.run(
        [sys.executable, "-m", "learning.workshops.check", OP, "--json", "--seed", str(seed)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_check_job_returns_the_local_checks_json(course_root, store, tmp_path):
    """Does a check job of the reference give the JSON the local `check --json` prints (but
    the time the file was saved), its text, exit status 0 and a receipt the course verifies?"""
    job = submit(store, "check", REFERENCE, seed=11)
    assert worker(course_root, store).once()
    done = store.outcome(job.id)
    student = tmp_path / "student"
    student.mkdir()
    local = local_check(student, 11)
    result = dict(done.result)
    text, said = result.pop("stdout"), result.pop("stderr")
    assert done.exit_status == 0 and said == ""
    assert {**result, "saved": None} == {**local, "saved": None}
    assert result["passed"] and result["sandboxed"] and result["mode"] == "interpreter"
    assert text.startswith(f"{OP} from {OP}.py, saved ") and "20 of 20 cases pass" in text
    receipt.verify(course_root, done.result, done.receipt)
    facts = done.receipt
    assert (facts["kind"], facts["gpu"], facts["copy_roof"], facts["reference"]) == (
        "check",
        None,
        None,
        None,
    )
    assert set(facts["phases"]) == {"queued", "checking"} and facts["phases"]["checking"] > 1
    assert store.status(job.id)["phase"] == DONE


def test_benchmark_job_on_a_cpu_worker_says_it_has_no_gpu(course_root, store):
    """Does a benchmark job on a worker without CUDA finish with exit status 2 and "this
    worker has no GPU", with no timing in its result or its receipt?"""
    job = submit(store, "benchmark", REFERENCE, reps=5)
    assert worker(course_root, store).once()
    done = store.outcome(job.id)
    assert done.exit_status == 2
    assert done.result == {"error": NO_GPU, "stdout": f"benchmark: {NO_GPU}"}
    assert done.receipt["gpu"] is None and done.receipt["copy_roof"] is None
    assert done.receipt["reference"] is None
    receipt.verify(course_root, done.result, done.receipt)


def test_a_hanging_job_is_killed_at_its_bound(course_root, store):
    """Does a job whose import never ends fail with "the job ran past 4 s" near the bound,
    with every process it started gone?"""
    before = set(descendants(os.getpid()))
    job = submit(store, "check", SLEEPS)
    started = time.monotonic()
    assert worker(course_root, store, job_time_s=4).once()
    took = time.monotonic() - started
    status = store.status(job.id)
    assert (status["state"], status["error"]) == (FAILED, "the job ran past 4 s")
    assert 4 <= took < 15, took
    assert set(descendants(os.getpid())) <= before


def start_worker(root: Path, *extra: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "grader.queue.worker", "--course", str(root), *extra]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(store: Store, job_id: str, state: str, attempts: int, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = store.status(job_id)
        if (status["state"], status["attempts"]) == (state, attempts):
            return status
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} never {state} at attempt {attempts}: {status}")


def killed(process: subprocess.Popen) -> None:
    """Kill a worker with SIGKILL, as a crash would; its job's processes die with it."""
    job_processes = set(descendants(process.pid))
    process.send_signal(signal.SIGKILL)
    process.communicate()
    deadline = time.monotonic() + 10
    while set(descendants(os.getpid())) & job_processes and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not set(descendants(os.getpid())) & job_processes


def test_a_dead_workers_job_is_requeued_once_then_failed(course_root, store):
    """Killed mid-job, does a worker's job go back to the queue when the next worker starts,
    run again, and fail with the cause when that worker dies too?"""
    job = submit(store, "check", SLEEPS)
    first = start_worker(course_root)
    wait_for(store, job.id, RUNNING, 1)
    killed(first)
    time.sleep(1.5)
    second = start_worker(course_root, "--stale-after", "1")
    wait_for(store, job.id, RUNNING, 2)
    assert "requeued once" in store.status(job.id)["error"]
    killed(second)
    time.sleep(1.5)
    third = start_worker(course_root, "--stale-after", "1", "--once")
    said, _ = third.communicate(timeout=60)
    assert third.returncode == 0, said
    status = store.status(job.id)
    assert status["state"] == FAILED and status["attempts"] == 2
    assert (
        status["error"].startswith("the job failed twice: its worker ")
        and "heartbeat" in (status["error"])
    )


HOSTILE_SECRET_PROBES = "def _checks_copy"
"""Where tests/exploits/payloads.PROBES' one-line probes end (the rest forks and fills)."""


def hostile_upload(root: Path) -> bytes:
    """The exploit suite's probes (read the secret and the gradebook, write into the course,
    import the grader, reach the network) at the top of the reference."""
    sys.path.insert(0, str(course.REPO / "tests" / "exploits"))
    try:
        from payloads import PROBES
    finally:
        sys.path.pop(0)
    probes = PROBES.split(HOSTILE_SECRET_PROBES)[0]
    for mark, value in (("@COURSE@", root), ("@REPO@", course.REPO), ("@OTHER@", "s2")):
        probes = probes.replace(mark, str(value))
    return probes.replace("@PORT@", "9").encode() + b"\n" + REFERENCE


def test_a_hostile_upload_reaches_nothing_and_the_worker_goes_on(course_root, store):
    """Does a check of an upload that tries to read the course's secret and gradebook and to
    write into the course get its answer (the reference's cases pass, the screen lists the
    probes), with the secret in no
    result, nothing written, and the worker taking the next job?"""
    secret = course_secret(course_root)
    job = submit(store, "check", hostile_upload(course_root))
    nxt = store.submit("s2", "benchmark", OP, f"{OP}.py", REFERENCE, {})
    serving = worker(course_root, store)
    assert serving.once() and serving.once()
    done = store.outcome(job.id)
    assert done.exit_status == 0 and done.result["passed"]
    assert done.result["screen"]["findings"]  # the lines grading would hold for review
    assert secret not in json.dumps(done.result) and secret not in json.dumps(done.receipt)
    assert not (course_root / "pwned.txt").exists()
    assert not (course.REPO / "grader" / "pwned.py").exists()
    assert store.outcome(nxt.id).exit_status == 2


def test_options_are_passed_as_the_commands_own_and_no_others():
    """Are a job's options its command's flags (`--name=value`, so no value reads as another
    flag; output and json left to the student's side), and is an unknown option refused?"""
    allowed = {"hint": bool, "seed": int}
    assert options_argv({"hint": True, "seed": 3, "json": True}, allowed) == ["--hint", "--seed=3"]
    assert options_argv({"hint": False}, allowed) == []
    with pytest.raises(JobFailed, match="option impl='/etc/passwd' is not one the queue runs"):
        options_argv({"impl": "/etc/passwd"}, allowed)
    with pytest.raises(JobFailed, match="option seed='--impl=x'"):
        options_argv({"seed": "--impl=x"}, allowed)


def test_an_uploads_name_is_never_a_path():
    """Is the upload written under its own base name, and a strange one replaced?"""
    assert upload_name("../../course_secret.py", OP) == "course_secret.py"
    assert upload_name("work.ipynb", OP) == "work.ipynb"
    assert upload_name("notes.txt", OP) == f"{OP}.ipynb"
    assert upload_name("-rf.py", OP) == f"{OP}.ipynb"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_benchmark_job_on_a_gpu_times_in_the_sandbox(course_root, store):
    """On a GPU: does a benchmark job of the reference write the results a local run writes
    (its rows checked), with the GPU, the copy roof, PyTorch's softmax and the course's own
    timing of both shapes, every output right, in its receipt?"""
    options = {"shapes": "2048x2048", "modes": "warm", "reps": 10}
    job = submit(store, "benchmark", REFERENCE, **options)
    started = time.monotonic()
    assert worker(course_root, store).once()
    took = time.monotonic() - started
    done = store.outcome(job.id)
    assert done is not None, store.status(job.id)
    assert done.exit_status == 0, done.result
    rows = done.result["rows"]
    assert {r["variant"] for r in rows} >= {"direct", "copy", "torch_softmax", "roof"}
    assert all(r["checked"] for r in rows)
    facts = done.receipt
    assert facts["gpu"]["name"] and facts["copy_roof"]["variant"] == "roof"
    assert facts["reference"]["variant"] == "torch_softmax"
    verified = facts["verified"]
    assert verified["error"] == "" and verified["device"], verified
    assert [(s["rows"], s["cols"]) for s in verified["shapes"]] == list(SHAPES)
    assert all(s["correct"] and not s["reason"] for s in verified["shapes"]), verified
    receipt.verify(course_root, done.result, done.receipt)
    print(f"\nbenchmark job on {facts['gpu']['name']}: {took:.1f} s, phases {facts['phases']}")
    print(f"verified: {[(s['rows'], s['cols'], round(s['ratio'], 3)) for s in verified['shapes']]}")


BENDS_THE_CLOCK = (
    REFERENCE
    + b"""
import torch
torch.cuda.Event.elapsed_time = lambda self, end: 1e-4  # every timed call "took" 0.1 us
"""
)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_job_that_bends_its_own_clock_does_not_bend_the_board(course_root, store):
    """On a GPU: an upload that rewrites the CUDA events' clock in its own process makes its
    results say what it likes; does the course's timing, the only one the board reads,
    still find the reference's own speed (a ratio near 1)?"""
    job = submit(store, "benchmark", BENDS_THE_CLOCK, shapes="2048x2048", modes="warm", reps=10)
    assert worker(course_root, store).once()
    done = store.outcome(job.id)
    assert done is not None, store.status(job.id)
    claimed = [r["median_ms"] for r in done.result.get("rows", []) if r["variant"] == "direct"]
    assert not claimed or min(claimed) < 0.001, claimed  # the bent clock, in its own results
    verified = done.receipt["verified"]
    assert all(0.8 < s["ratio"] < 1.25 and s["correct"] for s in verified["shapes"]), verified
    assert 0.8 < board.figures(verified)["ratio_to_reference"] < 1.25


def test_run_job_refuses_an_unknown_kind(course_root):
    """Does a job of a kind the queue does not run fail with a line that names the kinds?"""
    job = type("Job", (), {"kind": "grade", "op": OP, "filename": "x.py"})()
    with pytest.raises(JobFailed, match="unknown kind of job 'grade': choose check or benchmark"):
        run_job(course_root, job, QUIET.append)


@pytest.fixture(scope="module")
def cluster():
    """A one-node Slurm cluster of this module's own (tests/services.py, as test_slurm's);
    skips without Slurm."""
    import services

    with contextlib.ExitStack() as stack:
        try:
            found = stack.enter_context(services.slurm(gpus=1))
        except services.ServiceUnavailable as missing:
            services.unavailable(str(missing))
        yield found


@pytest.mark.services
def test_slurm_worker_runs_a_check_job_as_a_one_gpu_slurm_job(
    cluster, course_root, store, monkeypatch
):
    """With --slurm, does a check job run as a Slurm job (srun --gres=gpu:1) and come back
    passed and signed, its phases told through srun, its job folder gone?"""
    job = submit(store, "check", REFERENCE, seed=5)
    for name in ("SLURM_CONF", "PATH"):
        monkeypatch.setenv(name, cluster.env[name])
    assert worker(course_root, store, run=SlurmTarget().run).once()
    done = store.outcome(job.id)
    assert done is not None, store.status(job.id)
    assert done.exit_status == 0 and done.result["passed"] and done.result["seed"] == 5
    receipt.verify(course_root, done.result, done.receipt)
    assert {"allocating", "checking", "signing"} <= set(store.status(job.id)["phases"])
    assert not (course_root / JOBS / job.id).exists()


def test_a_queue_worker_takes_the_lock_grading_takes_on_its_gpu(tmp_path, monkeypatch):
    """On a machine with a GPU, does a queue worker started without a lock hold the very lock
    file grading's worker on that GPU holds, so a queue job never runs beside a timing?"""
    monkeypatch.setattr(autograde_workers, "visible_gpus", lambda: ["0"])
    queue = gpu_lock_env(tmp_path, {})[GPU_LOCK_ENV]
    grading = autograde_workers.worker_env(tmp_path, 0, ["0"], 1)[GPU_LOCK_ENV]
    assert queue == grading and Path(queue).parent.is_dir()


def test_a_worker_process_that_dies_is_started_again_within_its_restarts(tmp_path, monkeypatch):
    """Does the service start a dead worker process again, and stop after RESTARTS deaths in
    the window, saying so, rather than start a broken one in a loop?"""
    monkeypatch.setattr(worker_module, "RESTARTS", 2)
    starts = tmp_path / "starts"
    dies = [sys.executable, "-c", f"open({str(starts)!r}, 'a').write('x')"]
    lives = [sys.executable, "-c", "import time; time.sleep(600)"]
    said: list[str] = []
    workers = worker_module.Workers(
        [(dies, dict(os.environ)), (lives, dict(os.environ))], 0.1, said.append
    )
    try:
        first = workers.processes[1].pid
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any("not started again" in s for s in said):
            time.sleep(0.1)
        while time.monotonic() < deadline and workers.processes[1].pid == first:
            time.sleep(0.1)
        assert starts.read_text() == "xxx"  # the first start and two restarts
        assert workers.processes[1].pid != first and workers.processes[1].poll() is None
    finally:
        workers.stop()
    assert any("queue worker 0 exited 3 times in 300 s (last status 0)" in s for s in said), said
    assert "queue worker 1 exited with status -9: started again" in said
