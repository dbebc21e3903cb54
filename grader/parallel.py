"""Autograde a cohort in parallel: N nbgrader worker processes share one gradebook.

    python -m grader.parallel i1_strided_softmax [--course PATH] [--workers N]
                              [--db URL] [--shard I/N] [--student S ...]

It prints a line per student: graded, or why not (the cause the export gives, from the
student's grading record) and where its grading log is, which keeps nbgrader's own log of
that run (`grader.grading.grading_log`). A course tied to other code is refused before
anything is graded (`grader.course_tie`).

Design. Each of N worker processes (`grader.autograde_workers`, which says how they share
the gradebook and the GPUs) starts nbgrader's `autograde` app once, configured
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
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grader.autograde_workers import (
    StudentRun,
    Worker,
    keep_failure,
    run_pool,
    visible_gpus,
    worker_env,
    worker_gradebook,
)
from grader.course import CourseError
from grader.course_folder import add_course_option, not_a_course
from grader.course_tie import CourseTieError, check_tie
from grader.gradebook import (
    GradebookError,
    add_gradebook_option,
    open_gradebook,
    shown_url,
)
from grader.grading.readiness import add_unsafe_option, ready_to_grade
from grader.isolation.sandbox import SandboxUnavailable
from grader.terminal import visible


class ParallelError(Exception):
    """The cohort cannot be graded at all (no such course, assignment or student)."""


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
        Worker(root, assignment, url, slot, worker_env(root, slot, gpus, threads, workers))
        for slot in range(workers)
    ]
    started = time.monotonic()
    results = run_pool(pool, students, progress)
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
