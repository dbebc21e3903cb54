"""The worker processes of `grader.parallel`: each one nbgrader autograde app, grading the
students the parent hands it one at a time, and the parent's handle on it.

    python -m grader.autograde_workers ASSIGNMENT   (started by grader.parallel; students on stdin)

The shared SQLite gradebook:

- nbgrader opens it briefly (when a student starts, and to save scores once the notebook
  has run) and commits small transactions, which SQLite serializes with file locks. A
  writer that finds the file locked waits for the busy timeout, 5 s by default, then
  fails with "database is locked" and its student with it. Measured with 24 processes
  writing through nbgrader's API on 2 cores: the default timeout lost rows, 0.5 s lost
  more. Workers get the gradebook URL with `?timeout=60` (SQLAlchemy's pysqlite dialect
  passes it to `sqlite3.connect`), with which the same 24 writers lost none. pysqlite
  starts a transaction at its first write, so no connection holds a read lock while it
  waits for the write lock: the one case in which SQLite fails at once instead of waiting.
- WAL mode is not used: it is a lasting property of the database file, and a copy of
  `gradebook.db` taken without its `-wal` file silently lacks the latest grades.
- A student whose run still reports "database is locked" is graded again, up to RETRIES
  times: `--force` regrades from scratch and every autograde write is an update-or-create,
  so a rerun leaves the rows of one clean run.
- Before the workers start, the parent opens the gradebook once, so that its tables and
  course row exist (no two workers race to create them), and checks that the assignment
  is in it.

GPU timing, one at a time per GPU: worker k is pinned to the k-th visible GPU, round
robin, with CUDA_VISIBLE_DEVICES, and gets I1_GPU_LOCK, the path of that GPU's lock file
in the course (`grader.gpu_lock.lock_file`: named after the machine too, since a
course on a shared filesystem is graded from several: git-ignored, unseen by nbgrader's
globs).
Grading a submission holds that lock shared, from before its first sandbox starts to its
end; the hidden timing cell holds it exclusively while it times (`grader.gpu_lock`), so no
other submission's code runs on that GPU while a timing measures. Each worker also gets
I1_GPU_SHARERS, the number of workers on its GPU: a submission's sandboxes are held to that
share of the GPU's memory (`grader.isolation.gpu_memory`). Without a GPU none is set.
"""

from __future__ import annotations

import glob
import io
import json
import logging
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from grader.gpu_lock import GPU_LOCK_ENV, lock_file
from grader.gradebook import GRADEBOOK_URL_ENV, course_id, gradebook_url
from grader.grading.grading_log import STOPPED, UNGRADABLE, GradingLog, record_paths
from grader.isolation.gpu_memory import SHARERS_ENV
from grader.isolation.limits import WORKERS_ENV
from learning.workshops.checking.child import child_env

BUSY_TIMEOUT_S = 60.0
"""How long a worker waits for SQLite's write lock before it gives up (default: 5 s)."""
RETRIES = 2
"""How many times a student whose run hit "database is locked" is graded again."""
LOG_CHARS = 20_000
"""How much of nbgrader's log of a failed run its grading log keeps (the end of it)."""
_LOCKED = "database is locked"
_DIED = "the worker process died"


@dataclass(frozen=True)
class StudentRun:
    """One student's autograde, after any retries: graded, or failed with nbgrader's log,
    the cause (in one line, as the export gives it) and the grading log that keeps both."""

    student: str
    graded: bool
    attempts: int
    seconds: float
    worker: int
    gpu: str | None
    log: str
    cause: str = ""
    grading_log: Path | None = None

    @property
    def failed(self) -> bool:
        """nbgrader could not grade this submission (its kernel died, say)."""
        return not self.graded


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them; [] without CUDA."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    named = os.environ.get("CUDA_VISIBLE_DEVICES")
    if named is not None:
        return [name.strip() for name in named.split(",") if name.strip()][:count]
    return [str(index) for index in range(count)]


def worker_gradebook(root: Path, url: str | None = None) -> tuple[str, str]:
    """The gradebook URL the workers use, and the course id.

    The URL is `grader.gradebook.gradebook_url`'s (`url`, else the course's config, else the
    SQLite file); a SQLite URL without a timeout of its own gets BUSY_TIMEOUT_S.
    """
    url = gradebook_url(root, url)
    if url.startswith("sqlite:") and "timeout=" not in url:
        url += ("&" if "?" in url else "?") + f"timeout={BUSY_TIMEOUT_S:g}"
    return url, course_id(root)


def worker_env(
    root: Path, slot: int, gpus: Sequence[str], threads: int | None, workers: int = 1
) -> dict[str, str]:
    """The environment of worker `slot` of `workers`: the repo importable, its GPU and that
    GPU's lock, and the worker count, from which each sandbox's share of the machine's memory
    and cores is derived (I1_GRADING_WORKERS, `grader.isolation.limits`)."""
    env = child_env()
    env[WORKERS_ENV] = str(max(1, workers))
    if threads is not None and "OMP_NUM_THREADS" not in os.environ:
        env["OMP_NUM_THREADS"] = str(threads)
    if gpus:
        gpu = gpus[slot % len(gpus)]
        env["CUDA_VISIBLE_DEVICES"] = gpu
        env[GPU_LOCK_ENV] = str(lock_file(root, gpu))
        sharers = sum(1 for s in range(max(1, workers)) if s % len(gpus) == slot % len(gpus))
        env[SHARERS_ENV] = str(sharers)  # each one's share of its memory (gpu_memory)
    return env


def serve(assignment: str, url: str | None = None) -> int:
    """Worker side: autograde each student named on stdin; answer one JSON line each.

    Runs what `nbgrader autograde ASSIGNMENT --force --student S` runs, one app for all,
    into the gradebook at `url` (default: I1_GRADEBOOK_URL, which the parent sets).
    """
    url = url or os.environ[GRADEBOOK_URL_ENV]
    from nbgrader.apps.nbgraderapp import NbGraderApp
    from nbgrader.converters import Autograde, NbGraderException

    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever else prints goes to the worker's stderr, not into the replies
    nbgrader = NbGraderApp.instance()
    nbgrader.initialize(["autograde", assignment, "--force", f"--CourseDirectory.db_url={url}"])
    app = nbgrader.subapp
    for line in sys.stdin:
        student = line.rstrip("\n")
        started = time.monotonic()
        captured = io.StringIO()
        handler = logging.StreamHandler(captured)
        handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
        handler.setLevel(app.log_level)  # as on nbgrader's console: INFO unless --debug
        app.log.addHandler(handler)
        app.coursedir.assignment_id = assignment
        app.coursedir.student_id = glob.escape(student)
        try:
            Autograde(coursedir=app.coursedir, parent=app).start()
            graded = True
        except NbGraderException:  # nbgrader logged why
            graded = False
        except Exception:
            captured.write(traceback.format_exc())
            graded = False
        finally:
            app.log.removeHandler(handler)
        reply = {"graded": graded, "seconds": time.monotonic() - started}
        replies.write(json.dumps({**reply, "log": captured.getvalue()}) + "\n")
    return 0


class Worker:
    """The parent's handle on one worker process: hand it a student, read its reply."""

    def __init__(self, root: Path, assignment: str, url: str, slot: int, env: dict) -> None:
        self.command = [sys.executable, "-m", "grader.autograde_workers", assignment]
        # the URL in the environment (I1_GRADEBOOK_URL), not on the command line: `ps` shows
        # a command line to every user of the machine, password and all
        self.root, self.slot, self.env = root, slot, {**env, GRADEBOOK_URL_ENV: url}
        self.process: subprocess.Popen | None = None
        self.stderr = tempfile.TemporaryFile()

    def grade_once(self, student: str) -> tuple[bool, float, str]:
        """Grade `student` once: (graded, seconds, log). A dead worker fails its student."""
        if self.process is None:
            self.process = subprocess.Popen(
                self.command,
                cwd=self.root,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.stderr,
                text=True,
            )
        started = time.monotonic()
        try:
            self.process.stdin.write(student + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        except BrokenPipeError:
            line = ""
        if line:
            reply = json.loads(line)
            return reply["graded"], reply["seconds"], reply["log"]
        code = self.process.wait()
        self.process = None  # the next student gets a fresh worker
        self.stderr.seek(0)
        tail = self.stderr.read()[-4000:].decode(errors="replace")
        log = f"{_DIED} (exit status {code}) while grading {student}:\n{tail}"
        return False, time.monotonic() - started, log

    def grade(self, student: str) -> StudentRun:
        """Grade `student`, again if the gradebook was locked (RETRIES times at most)."""
        logs: list[str] = []
        seconds = 0.0
        while True:
            graded, spent, log = self.grade_once(student)
            logs.append(log)
            seconds += spent
            if graded or _LOCKED not in log or len(logs) > RETRIES:
                break
        gpu = self.env.get("CUDA_VISIBLE_DEVICES") if GPU_LOCK_ENV in self.env else None
        return StudentRun(student, graded, len(logs), seconds, self.slot, gpu, "\n".join(logs))

    def close(self) -> None:
        """Let the worker finish (end of its input) and wait for it."""
        if self.process is not None:
            self.process.stdin.close()
            self.process.wait()
            self.process = None
        self.stderr.close()


def unrecorded_cause(log: str) -> str:
    """Why a run stopped that recorded no cause of its own: the worker's death, else
    nbgrader's last error, else STOPPED."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    if log.startswith(_DIED):
        return lines[0].removesuffix(":")
    errors = [line.removeprefix("[ERROR]").strip() for line in lines if line.startswith("[ERROR]")]
    return errors[-1] if errors else STOPPED


def keep_failure(root: Path, assignment: str, run: StudentRun) -> StudentRun:
    """Put nbgrader's log of a failed run into the student's grading log and, where the
    grading recorded no cause (a dead worker, an error nothing caught), `unrecorded_cause`
    as its cause; `run` with that cause, in one line, and where the grading log is."""
    log = GradingLog(root, assignment, run.student)
    if log.record.status != UNGRADABLE:
        log.cause(unrecorded_cause(run.log))
    log.say(
        f"nbgrader's log of this run (its last {LOG_CHARS} characters):\n" + run.log[-LOG_CHARS:]
    )
    cause = " ".join(log.record.outcome[1].split())
    return replace(run, cause=cause, grading_log=record_paths(root, assignment, run.student)[0])


def run_pool(
    workers: Sequence[Worker], students: Sequence[str], progress: bool
) -> dict[str, StudentRun]:
    """Each worker takes the next student from one queue until none is left."""
    from tqdm import tqdm

    todo: queue.Queue[str] = queue.Queue()
    for student in students:
        todo.put(student)
    results: dict[str, StudentRun] = {}
    errors: list[BaseException] = []
    bar = tqdm(total=len(students), desc="autograde", unit="student", disable=not progress)

    def work(worker: Worker) -> None:
        try:
            while not errors:
                try:
                    student = todo.get_nowait()
                except queue.Empty:
                    return
                results[student] = worker.grade(student)
                bar.update()
        except BaseException as error:  # re-raised below, in the caller's thread
            errors.append(error)
        finally:
            worker.close()

    threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    except BaseException as interrupt:  # Ctrl-C: no worker takes another student
        errors.append(interrupt)
        raise
    finally:
        bar.close()
    if errors:
        raise errors[0]
    return results


if __name__ == "__main__":
    sys.exit(serve(*sys.argv[1:]))
