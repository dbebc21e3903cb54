"""A queued job as a one-GPU Slurm job: the worker's side (`SlurmTarget`) and the node's.

    python -m grader.queue.slurm_job FOLDER        (on the node, as srun starts it)

The worker (`grader.queue.worker --slurm`) writes the job into FOLDER, `queue_jobs/<id>/`
in the course folder (which a Slurm cluster's nodes share, as grading's job array needs),
and runs `srun --gres=gpu:1 [--partition P] [--account A] --time T` of this module there. On
the node it runs the job as a local worker would (`grader.queue.runner.run_job`: the same
sandboxes, the node's GPU, which Slurm gives this job alone), says each phase on stdout
("phase: timing"), which the worker passes on to the store, and leaves the outcome (or the
cause of a failure) in FOLDER/outcome.json, which the worker reads and signs: the course's
secret stays with the worker. The node bounds the job's run itself (its cause reads as a
local one's); Slurm's --time is that bound and a minute, and the worker gives up on a srun
that has not answered within the bound and SLURM_WAIT_S (a busy partition), cancelling it.
"""

from __future__ import annotations

import base64
import json
import math
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from grader.queue.runner import JobFailed, Outcome, die_with_parent, run_job
from grader.queue.store import Job

JOBS = "queue_jobs"
"""The course folder's folder of jobs handed to Slurm (gone when each ends)."""
SLURM_WAIT_S = 1800.0
"""How long beyond the job's bound the worker waits for Slurm to start and end it."""
PHASE = "phase: "


@dataclass(frozen=True)
class SlurmTarget:
    """Where the worker's jobs run: srun with one GPU, on this partition and account."""

    partition: str | None = None
    account: str | None = None

    def argv(self, job: Job, folder: Path, time_limit_s: float) -> list[str]:
        """The srun command that runs `job` from `folder` on one GPU."""
        minutes = math.ceil(time_limit_s / 60) + 1
        argv = ["srun", "--gres=gpu:1", "--ntasks=1", f"--time={minutes}"]
        argv += [f"--job-name=i1-queue-{job.id[:12]}", f"--chdir={folder}"]
        argv += [f"--partition={self.partition}"] if self.partition else []
        argv += [f"--account={self.account}"] if self.account else []
        return argv + [sys.executable, "-m", "grader.queue.slurm_job", str(folder)]

    def run(
        self, root: Path, job: Job, on_phase: Callable[[str], None], time_limit_s: float
    ) -> Outcome:
        """`job` run by Slurm; JobFailed with the node's cause, or Slurm's."""
        folder = Path(root) / JOBS / job.id
        folder.mkdir(parents=True, exist_ok=True)
        try:
            write_job(folder, job, Path(root), time_limit_s)
            on_phase("allocating")
            said = _srun(self.argv(job, folder, time_limit_s), on_phase, time_limit_s)
            return read_outcome(folder, said)
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def _srun(argv: list[str], on_phase: Callable[[str], None], time_limit_s: float) -> str:
    """Run srun, passing each phase line on; what it said on stderr. JobFailed when it has
    not ended within the bound and SLURM_WAIT_S (cancelled)."""
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
    except FileNotFoundError:
        raise JobFailed("no Slurm here: srun is not on PATH of the worker") from None
    errors: list[str] = []
    reader = threading.Thread(target=lambda: errors.extend(process.stderr), daemon=True)
    reader.start()
    timer = threading.Timer(time_limit_s + SLURM_WAIT_S, process.terminate)
    timer.start()
    for line in process.stdout:
        if line.startswith(PHASE):
            on_phase(line.removeprefix(PHASE).strip())
    process.wait()
    waited = timer.is_alive()
    timer.cancel()
    reader.join()
    if not waited:
        raise JobFailed(f"Slurm did not run the job within {time_limit_s + SLURM_WAIT_S:g} s")
    return "".join(errors)


def write_job(folder: Path, job: Job, root: Path, time_limit_s: float) -> None:
    """The job as the node reads it: the upload base64, the course and the bound."""
    fields = {**asdict(job), "content": base64.b64encode(job.content).decode()}
    job_file = {"job": fields, "course": str(root), "time_limit_s": time_limit_s}
    (folder / "job.json").write_text(json.dumps(job_file))


def read_outcome(folder: Path, said: str) -> Outcome:
    """The node's outcome; JobFailed with its cause, or with Slurm's last line."""
    path = folder / "outcome.json"
    if not path.is_file():
        last = said.strip().splitlines()[-1:] or ["no outcome and nothing said"]
        raise JobFailed(f"the Slurm job ended without a result: {last[0]}")
    outcome = json.loads(path.read_text())
    if "failed" in outcome:
        raise JobFailed(outcome["failed"])
    return Outcome(outcome["result"], outcome["facts"], outcome["exit_status"])


def main(argv: list[str] | None = None) -> int:
    """On the node: run the job in FOLDER, leave its outcome there."""
    folder = Path((argv or sys.argv[1:])[0])
    given = json.loads((folder / "job.json").read_text())
    job = Job(**{**given["job"], "content": base64.b64decode(given["job"]["content"])})

    def say(phase: str) -> None:
        print(f"{PHASE}{phase}", flush=True)

    try:
        done = run_job(Path(given["course"]), job, say, given["time_limit_s"])
        outcome = {"result": done.result, "facts": done.facts, "exit_status": done.exit_status}
    except JobFailed as exc:
        outcome = {"failed": str(exc)}
    (folder / "outcome.json").write_text(json.dumps(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main())
