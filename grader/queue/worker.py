"""The queue's worker: claim the oldest job, run it, sign its receipt, finish it; again.

    python -m grader.queue worker --course DIR [--once] [--slurm [--partition P] [--account A]]

Each job runs here (`grader.queue.runner`: the check in its sandbox, the benchmark in
grading's, under this GPU's lock) or, with --slurm, as a one-GPU Slurm job
(`grader.queue.slurm_job`, `--gres=gpu:1`, the partition and account from the flags, else
$I1_QUEUE_PARTITION and $I1_QUEUE_ACCOUNT). While a job runs the worker beats its heart every
HEARTBEAT_S; a worker that starts, or finds the queue empty, first sends back to the queue
every running job whose worker has not beaten for STALE_S (once; the second time the job
fails with the cause), so a worker killed mid-job loses no job for good. A job that runs
past its bound (--job-time, 600 s) is killed with everything it started and fails with "the
job ran past 600 s". Every job ends in one line on stdout.

`start_workers(root, n, slurm)` starts n worker processes beside the service, each on a GPU
of this machine in turn (CUDA_VISIBLE_DEVICES) with that GPU's lock file, the same one
grading uses (`grader.autograde_workers.worker_env`): queue jobs and a grading's timing never
share a GPU. Processes, not threads: a job's environment is its worker's, and a killed one is a dead
worker the others requeue after. A worker process that dies is started again (at most RESTARTS
times in RESTART_WINDOW_S).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader.course_folder import add_course_option, not_a_course
from grader.gpu_lock import GPU_LOCK_ENV, lock_file
from grader.gradebook import gradebook_url
from grader.periodic import Periodic
from grader.queue import receipt
from grader.queue.runner import JOB_TIME_S, JobFailed, Outcome, run_job
from grader.queue.store import Job, Store, StoreError

HEARTBEAT_S = 10.0
STALE_S = 60.0
"""A running job whose worker has not beaten its heart for this long is requeued: six missed
beats, so a busy database or a slow claim never takes a live worker's job."""
POLL_S = 1.0
"""How long an idle worker waits before it looks for a job again."""
PARTITION_ENV, ACCOUNT_ENV = "I1_QUEUE_PARTITION", "I1_QUEUE_ACCOUNT"


@dataclass
class Worker:
    """One worker of the course's queue: its store, its name and how it runs a job."""

    root: Path
    store: Store
    run: Callable[[Path, Job, Callable[[str], None], float], Outcome] = run_job
    job_time_s: float = JOB_TIME_S
    heartbeat_s: float = HEARTBEAT_S
    stale_s: float = STALE_S
    name: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    say: Callable[[str], None] = field(default=lambda line: print(line, flush=True))

    def requeue_stale(self) -> None:
        for job_id in self.store.requeue_stale(self.stale_s):
            self.say(f"worker {self.name}: job {job_id}'s worker stopped; requeued or failed")

    def once(self) -> bool:
        """Claim and run one job; False when none is queued."""
        job = self.store.claim(self.name)
        if job is None:
            return False
        started = time.monotonic()
        with Heartbeat(self.store, job.id, self.heartbeat_s):
            try:
                outcome = self.run(self.root, job, self._phase(job.id), self.job_time_s)
            except JobFailed as exc:
                return self._failed(job, str(exc))
            except Exception as exc:  # the worker's own fault: the job fails, the worker lives
                return self._failed(job, f"the worker failed: {type(exc).__name__}: {exc}")
        self._phase(job.id)("signing")
        signed = receipt.sign(self.root, outcome.facts, outcome.result)
        try:
            self.store.finish(job.id, outcome.result, signed, outcome.exit_status, worker=self.name)
        except StoreError as exc:  # requeued meanwhile: the job is another worker's now
            self.say(f"{self._job_words(job)} not recorded: {exc}")
            return True
        took = time.monotonic() - started
        self.say(f"{self._job_words(job)} done, exit status {outcome.exit_status}, {took:.1f} s")
        return True

    def loop(self, once: bool = False, stop: threading.Event | None = None) -> None:
        """Run jobs until `stop` is set (with `once`: until none is queued)."""
        stop = stop or threading.Event()
        self.requeue_stale()
        while not stop.is_set():
            if self.once():
                continue
            if once:
                return
            self.requeue_stale()
            stop.wait(POLL_S)

    def _phase(self, job_id: str) -> Callable[[str], None]:
        def record(phase: str) -> None:
            try:
                self.store.phase(job_id, phase, worker=self.name)
            except StoreError:  # requeued meanwhile: its phases are no longer ours to tell
                pass

        return record

    def _failed(self, job: Job, cause: str) -> bool:
        line = cause.splitlines()[0] if cause else "the job failed"
        try:
            self.store.fail(job.id, line, worker=self.name)
        except StoreError as exc:  # requeued meanwhile: the job is another worker's now
            self.say(f"{self._job_words(job)} not recorded: {exc}")
            return True
        self.say(f"{self._job_words(job)} failed: {cause}")
        return True

    def _job_words(self, job: Job) -> str:
        return f"worker {self.name}: job {job.id} ({job.kind} {job.op}, {job.student})"


class Heartbeat(Periodic):
    """Beat `job_id`'s heart every `every_s` in a thread while the block runs."""

    def __init__(self, store: Store, job_id: str, every_s: float) -> None:
        super().__init__(every_s)
        self.store, self.job_id = store, job_id

    def tick(self) -> None:
        try:
            self.store.heartbeat(self.job_id)
        except Exception:  # a busy database now: the next beat tries again
            pass


def gpu_lock_env(root: Path, env: dict[str, str]) -> dict[str, str]:
    """`env` with this worker's GPU lock (grading's lock file for the GPU it uses) where the
    machine has a GPU and none is named yet; the lock's folder made."""
    from grader.autograde_workers import visible_gpus

    if GPU_LOCK_ENV in env or not (gpus := visible_gpus()):
        return env
    lock = lock_file(root, gpus[0])
    lock.parent.mkdir(parents=True, exist_ok=True)
    return {**env, GPU_LOCK_ENV: str(lock)}


RESTARTS = 5
RESTART_WINDOW_S = 300.0
"""A worker process that dies is started again, up to RESTARTS times in RESTART_WINDOW_S; one
that dies more often than that (a broken environment, say) is left dead, with a line that
says so, rather than started in a loop."""
WATCH_S = 1.0
"""How often `Workers` looks for a dead worker process."""


class Workers(Periodic):
    """The worker processes `start_workers` started, each started again when it dies (a job it
    held goes back to the queue once its heartbeat is stale); `stop` ends them."""

    def __init__(
        self,
        commands: list[tuple[list[str], dict[str, str]]],
        watch_s: float = WATCH_S,
        say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
    ) -> None:
        super().__init__(watch_s)
        self.commands, self.say = commands, say
        self.processes = [self._start(command) for command in commands]
        self._deaths: list[list[float]] = [[] for _ in commands]
        self._given_up: set[int] = set()
        self.start()

    def tick(self) -> None:
        """Start again each worker process that has exited, within its restarts."""
        now = time.monotonic()
        for slot, process in enumerate(self.processes):
            status = process.poll()
            if status is None or slot in self._given_up:
                continue
            deaths = [t for t in self._deaths[slot] if now - t < RESTART_WINDOW_S] + [now]
            self._deaths[slot] = deaths
            if len(deaths) > RESTARTS:
                self._given_up.add(slot)
                self.say(
                    f"queue worker {slot} exited {len(deaths)} times in {RESTART_WINDOW_S:g} s "
                    f"(last status {status}): not started again; its output above says why, "
                    "and the service starts it again when restarted"
                )
                continue
            self.say(f"queue worker {slot} exited with status {status}: started again")
            self.processes[slot] = self._start(self.commands[slot])

    def stop(self, wait_s: float = 10.0) -> None:
        super().stop()
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(wait_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    @staticmethod
    def _start(command: tuple[list[str], dict[str, str]]) -> subprocess.Popen:
        argv, env = command
        return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)


def start_workers(root: Path, n: int, slurm: bool = False, job_time_s: float = JOB_TIME_S):
    """Start `n` worker processes for the course at `root` (each with --slurm if `slurm`),
    each started again if it dies; locally, worker i runs on this machine's GPU i mod the
    GPUs, with its lock."""
    from grader.autograde_workers import visible_gpus, worker_env

    root = Path(root).resolve()
    gpus = [] if slurm else visible_gpus()
    commands = []
    for slot in range(n):
        env = worker_env(root, slot, gpus, None, n)
        if GPU_LOCK_ENV in env:
            Path(env[GPU_LOCK_ENV]).parent.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "grader.queue.worker", "--course", str(root)]
        argv += ["--job-time", f"{job_time_s:g}"] + (["--slurm"] if slurm else [])
        commands.append((argv, env))
    return Workers(commands)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m grader.queue worker", description=__doc__.splitlines()[0]
    )
    add_course_option(parser)
    parser.add_argument("--once", action="store_true", help="stop when no job is queued")
    parser.add_argument(
        "--job-time",
        type=float,
        default=JOB_TIME_S,
        help="seconds a job may run before it is killed and failed (%(default)g)",
    )
    parser.add_argument(
        "--stale-after",
        type=float,
        default=STALE_S,
        help="seconds without a heartbeat after which a running job's worker counts as dead "
        "and the job is requeued (%(default)g)",
    )
    parser.add_argument(
        "--slurm", action="store_true", help="run each job as a one-GPU Slurm job (srun)"
    )
    parser.add_argument(
        "--partition",
        default=os.environ.get(PARTITION_ENV),
        help=f"the Slurm partition (default: ${PARTITION_ENV}, else Slurm's default)",
    )
    parser.add_argument(
        "--account",
        default=os.environ.get(ACCOUNT_ENV),
        help=f"the Slurm account (default: ${ACCOUNT_ENV}, else Slurm's default)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the worker until stopped (with --once, until the queue is empty); 2 when the
    folder is no course."""
    args = build_parser().parse_args(argv)
    root = Path(args.course).resolve()
    if problem := not_a_course(root):
        print(f"worker: {problem}", file=sys.stderr)
        return 2
    if args.slurm:
        from grader.queue.slurm_job import SlurmTarget

        run = SlurmTarget(args.partition, args.account).run
    else:
        os.environ.update(gpu_lock_env(root, dict(os.environ)))
        run = run_job
    store = Store(gradebook_url(root))
    worker = Worker(root, store, run, args.job_time, stale_s=args.stale_after)
    print(f"worker {worker.name}: serving the queue of {root}", flush=True)
    try:
        worker.loop(once=args.once)
    except KeyboardInterrupt:
        return 0
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
