"""Autograde a cohort in parallel: N nbgrader worker processes share one gradebook.

    python -m grader.parallel i1_strided_softmax [--course PATH] [--workers N]
                              [--db URL] [--shard I/N] [--student S ...]

It prints a line per student: graded, or why not (the cause the export gives, from the
student's grading record) and where its grading log is, which keeps nbgrader's own log of
that run (`grader.grading.grading_log`). A course tied to other code is refused before
anything is graded (`grader.course_tie`).

Design. Each of N worker processes starts nbgrader's `autograde` app once, configured
exactly as the command line configures it (plus a gradebook URL with a busy timeout), and
then grades the students the parent hands it one at a time from a shared queue, running
the app's own converter for one `--student` at a time: the code path, and so the gradebook
rows, of a sequential `nbgrader autograde --force`, split by student. A student's kernel
runs in a process of its own, so a segfault fails that student alone; a worker that dies
itself fails only the student it held and is restarted for the next.

Rejected: one `nbgrader autograde --student S` process per student. Measured on the
14-student sample cohort on 2 shared cores, importing nbgrader and starting its app costs
about 3 CPU seconds a student, half of what grading one costs: two workers took 83 s (113
CPU seconds) where the sequential run took 80 s (74); with a worker per app, 60-67 s (75-80
CPU seconds), the same scores. Also rejected: grading into private copies of the course and
merging the grades back through nbgrader's API. The merge would be a second copy of all
that autograde writes (student, submission timestamp, each cell's auto score and
manual-grade flag, comments, late penalty, zeros for missing notebooks), kept in step with
nbgrader by hand, and the copies would spread the hidden tests into scratch folders.

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

More than one machine. `--shard I/N` grades shard I of N (counting from 1): of the
students to grade (every submission, or those named with --student, or those --changed
found), sorted by student id as Python sorts strings, the I-th, the I+N-th, and so on; the
N shards together take every student once. N machines that see the same
course folder (a shared filesystem) and the same PostgreSQL gradebook (`--db URL`, or
I1_GRADEBOOK_URL, or the course's `CourseDirectory.db_url`: `grader.gradebook.gradebook_url`)
grade one course into one gradebook; `scripts/slurm_autograde.sbatch` runs them as a Slurm
job array. SQLite's file locks are no use across machines, PostgreSQL's rows are: the shards
write disjoint students, and each shard opens the gradebook first under a PostgreSQL
advisory lock (`grader.gradebook.open_gradebook`), so shards started at once create its tables
once. Workers get the URL in their environment, not on their command line, where any user
of the machine could read its password.

GPU timing, one at a time per GPU: worker k is pinned to the k-th visible GPU, round
robin, with CUDA_VISIBLE_DEVICES, and gets I1_GPU_LOCK, the path of that GPU's lock file
in the course (`autograded/.gpu-<host>-<id>.lock`, named after the machine too, since a
course on a shared filesystem is graded from several: git-ignored, unseen by nbgrader's
globs).
Grading a submission holds that lock shared, from before its first sandbox starts to its
end; the hidden timing cell holds it exclusively while it times (`grader.gpu_lock`), so no
other submission's code runs on that GPU while a timing measures. Each worker also gets
I1_GPU_SHARERS, the number of workers on its GPU: a submission's sandboxes are held to that
share of the GPU's memory (`grader.isolation.gpu_memory`). Without a GPU none is set.
"""

from __future__ import annotations

import argparse
import glob
import io
import json
import logging
import os
import queue
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from grader.course import CourseError
from grader.course_folder import add_course_option, not_a_course
from grader.course_tie import CourseTieError, check_tie
from grader.gpu_lock import GPU_LOCK_ENV
from grader.gradebook import (
    GRADEBOOK_URL_ENV,
    GradebookError,
    add_gradebook_option,
    course_id,
    gradebook_url,
    open_gradebook,
    shown_url,
)
from grader.grading.grading_log import STOPPED, UNGRADABLE, GradingLog, record_paths
from grader.grading.readiness import add_unsafe_option, ready_to_grade
from grader.isolation.gpu_memory import SHARERS_ENV
from grader.isolation.limits import WORKERS_ENV
from grader.isolation.sandbox import SandboxUnavailable
from grader.terminal import visible
from learning.workshops.checking.child import child_env

BUSY_TIMEOUT_S = 60.0
"""How long a worker waits for SQLite's write lock before it gives up (default: 5 s)."""
RETRIES = 2
"""How many times a student whose run hit "database is locked" is graded again."""
LOG_CHARS = 20_000
"""How much of nbgrader's log of a failed run its grading log keeps (the end of it)."""
_LOCKED = "database is locked"
_DIED = "the worker process died"
_SERVE = "--serve"


class ParallelError(Exception):
    """The cohort cannot be graded at all (no such course, assignment or student)."""


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


@dataclass(frozen=True)
class ParallelRun:
    """A parallel autograde: every student's run, those that failed, and the wall time."""

    runs: tuple[StudentRun, ...]
    failed: tuple[str, ...]
    wall_s: float
    workers: int
    shard: tuple[int, int] | None = None


def submitted_students(root: Path, assignment: str) -> list[str]:
    """Students with a notebook submitted for `assignment`, sorted as nbgrader does."""
    pattern = os.path.join(glob.escape(str(root)), "submitted", "*", glob.escape(assignment))
    return sorted(
        Path(folder).parent.name
        for folder in glob.glob(pattern)
        if glob.glob(os.path.join(glob.escape(folder), "*.ipynb"))
    )


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


def parse_shard(spec: str) -> tuple[int, int]:
    """`I/N` as (I, N): shard I of N, counting from 1. ValueError, in one line, otherwise."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", spec)
    index, count = map(int, match.groups()) if match else (0, 0)
    if not match or count < 1 or not 1 <= index <= count:
        raise ValueError(
            f"--shard takes I/N, shard I of N counting from 1 (1/2 and 2/2 on two machines), "
            f"got {spec!r}"
        )
    return index, count


def shard_of(students: Sequence[str], shard: tuple[int, int] | None) -> list[str]:
    """Shard I of N of `students`: sorted by student id, the I-th, the I+N-th, ... (from 1)."""
    if shard is None:
        return list(students)
    index, count = shard
    return sorted(students)[index - 1 :: count]


def select_students(
    root: Path,
    assignment: str,
    students: Sequence[str] | None = None,
    shard: tuple[int, int] | None = None,
) -> list[str]:
    """The students a run grades: `students` (default: every submission), then its shard.

    ParallelError when the course or a named student's submission is missing.
    """
    root = Path(root).resolve()
    problem = not_a_course(root)
    if problem:
        raise ParallelError(problem)
    available = submitted_students(root, assignment)
    chosen = available if students is None else list(dict.fromkeys(students))
    missing = sorted(set(chosen) - set(available))
    if missing:
        raise ParallelError(
            f"no submitted notebook for {', '.join(missing)} under {root / 'submitted'}: "
            f"check the names, or collect their submissions first"
        )
    return shard_of(chosen, shard)


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
        host = socket.gethostname().split(".")[0]
        name = f".gpu-{host}-{gpu}.lock".replace(os.sep, "_")
        env[GPU_LOCK_ENV] = str(root / "autograded" / name)
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


class _Worker:
    """The parent's handle on one worker process: hand it a student, read its reply."""

    def __init__(self, root: Path, assignment: str, url: str, slot: int, env: dict) -> None:
        self.command = [sys.executable, "-m", "grader.parallel", _SERVE, assignment]
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


def _prime_gradebook(url: str, course_id: str, assignment: str) -> None:
    """Create tables and the course row once, before workers race to; check the assignment."""
    from nbgrader.api import MissingEntry

    with open_gradebook(url, course_id) as gradebook:
        try:
            gradebook.find_assignment(assignment)
        except MissingEntry:
            raise ParallelError(
                f"assignment {assignment!r} is not in the gradebook ({shown_url(url)}): "
                f"run `nbgrader generate_assignment {assignment}` in the course first, "
                "with the same gradebook URL"
            ) from None


def _run_pool(
    workers: Sequence[_Worker], students: Sequence[str], progress: bool
) -> dict[str, StudentRun]:
    """Each worker takes the next student from one queue until none is left."""
    from tqdm import tqdm

    todo: queue.Queue[str] = queue.Queue()
    for student in students:
        todo.put(student)
    results: dict[str, StudentRun] = {}
    errors: list[BaseException] = []
    bar = tqdm(total=len(students), desc="autograde", unit="student", disable=not progress)

    def work(worker: _Worker) -> None:
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


def autograde_parallel(
    root: Path,
    workers: int,
    students: Sequence[str] | None = None,
    *,
    assignment: str = "i1_strided_softmax",
    gpus: Sequence[str] | None = None,
    progress: bool = False,
    url: str | None = None,
    shard: tuple[int, int] | None = None,
) -> ParallelRun:
    """Autograde `students` (default: every submission) of the course at `root` in parallel.

    `gpus` overrides the visible GPUs (workers share them round robin). A student nbgrader
    cannot grade is listed in `failed`, as a sequential run would log it, never raised.
    `url` overrides the course's gradebook URL; `shard` (I, N) grades only shard I of N of
    the students (`shard_of`).
    """
    root = Path(root).resolve()
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}: pass --workers 2, say")
    students = select_students(root, assignment, students, shard)
    url, course = worker_gradebook(root, url)
    _prime_gradebook(url, course, assignment)
    (root / "autograded").mkdir(exist_ok=True)
    gpus = visible_gpus() if gpus is None else list(gpus)
    workers = min(workers, max(1, len(students)))
    threads = max(1, (os.cpu_count() or 1) // workers)
    pool = [
        _Worker(root, assignment, url, slot, worker_env(root, slot, gpus, threads, workers))
        for slot in range(workers)
    ]
    started = time.monotonic()
    results = _run_pool(pool, students, progress)
    wall_s = time.monotonic() - started
    runs = tuple(
        keep_failure(root, assignment, run) if run.failed else run
        for run in (results[student] for student in students)
    )
    failed = tuple(run.student for run in runs if run.failed)
    return ParallelRun(runs, failed, wall_s, workers, shard)


def _report(run: ParallelRun) -> str:
    """A line per student, a failed one with its cause and its grading log, then the totals:
    student ids and causes (the student's own output among them) with their control
    characters shown as escapes."""
    names = {r.student: visible(r.student) for r in run.runs}
    width = max(map(len, names.values()), default=7)
    lines = []
    for r in run.runs:
        status = "FAILED" if r.failed else "graded"
        retried = f", {r.attempts} attempts" if r.attempts > 1 else ""
        gpu = f", GPU {r.gpu}" if r.gpu is not None else ""
        line = f"{names[r.student]:<{width}}  {status}  {r.seconds:.0f} s{retried}{gpu}"
        if r.failed:
            line += f": {visible(r.cause)} (its log: {visible(str(r.grading_log))})"
        lines.append(line)
    shard = f"shard {run.shard[0]}/{run.shard[1]}: " if run.shard else ""
    lines.append(
        f"\n{shard}{len(run.runs)} submissions, {len(run.failed)} failed, "
        f"{run.workers} workers, {run.wall_s:.0f} s wall"
    )
    return "\n".join(lines)


def _taken(shard: tuple[int, int], taken: Sequence[str], of: int) -> str:
    """The line that says which students a shard took, of how many."""
    names = ", ".join(map(visible, taken)) if taken else "none"
    return f"shard {shard[0]}/{shard[1]} takes {len(taken)} of {of} students: {names}"


def _changed(course: Path, assignment: str, students: Sequence[str] | None) -> list[str]:
    """Of `students` (default: every submission), those not graded since they were collected
    (`grader.grading.grading_log.changed_since_graded`); says how many, on stderr."""
    from grader.grading.grading_log import changed_since_graded

    chosen = select_students(course, assignment, students)
    changed = [s for s in chosen if changed_since_graded(course, assignment, s)]
    names = ", ".join(map(visible, changed)) if changed else "nothing to grade"
    print(f"--changed: {len(changed)} of {len(chosen)} submissions: {names}", file=sys.stderr)
    return changed


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [_SERVE]:  # a worker process started by autograde_parallel
        return serve(*argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m grader.parallel", description=__doc__.splitlines()[0]
    )
    parser.add_argument("assignment", help="the assignment to autograde, e.g. i1_strided_softmax")
    add_course_option(parser)
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="nbgrader processes at once (default: the number of CPU cores)",
    )
    parser.add_argument("--student", action="append", help="grade only this student (repeat)")
    parser.add_argument(
        "--changed",
        action="store_true",
        help="grade only the submissions not graded since they were collected (new or "
        "resubmitted: their grading record names another submission, or there is none)",
    )
    add_gradebook_option(parser)
    parser.add_argument(
        "--shard",
        metavar="I/N",
        help="grade shard I of N (from 1): of the students to grade (every submission, or "
        "--student's, or --changed's) sorted by student id as text (10 before 9), the I-th, "
        "I+N-th, ...; N machines with --shard 1/N ... N/N grade every student once",
    )
    add_unsafe_option(parser)
    args = parser.parse_args(argv)
    course = Path(args.course)
    try:
        note = check_tie(course, "grader.parallel")
        if note:
            print(note, file=sys.stderr)
        if args.changed:
            args.student = _changed(course, args.assignment, args.student)
            if not args.student:
                return 0
        shard = parse_shard(args.shard) if args.shard is not None else None
        if shard is not None:  # which students this machine takes, before it grades them
            chosen = select_students(course, args.assignment, args.student)
            print(_taken(shard, shard_of(chosen, shard), len(chosen)), file=sys.stderr, flush=True)
        ready_to_grade(course, args.unsafe_no_sandbox)
        run = autograde_parallel(
            course,
            args.workers,
            args.student,
            assignment=args.assignment,
            progress=True,
            url=args.db,
            shard=shard,
        )
    except (
        ParallelError,
        CourseError,
        CourseTieError,
        GradebookError,
        ValueError,
        SandboxUnavailable,
    ) as error:
        print(f"parallel: {visible(error)}", file=sys.stderr)
        return 2
    print(_report(run))
    return 1 if run.failed else 0


if __name__ == "__main__":
    sys.exit(main())
