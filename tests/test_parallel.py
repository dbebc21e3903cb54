"""Parallel autograding: the same gradebook as a sequential run, and no rows lost to locking.

One sample cohort is built once; a copy of it is graded in parallel (two workers) and
compared with the shared course (tests/shared_course.py), which holds the same submissions
and is graded sequentially (`nbgrader autograde`), by four workers at once. The copy keeps
four submissions that
cover every way a submission is graded: a late solution (full marks, a timestamp and a
penalty), a bug (partial scores), the untouched release (zeros and "No response." comments,
on time) and the crasher (its kernel segfaults: a failed student); the roster student who
submitted nothing stays too. A probe beside them tells what its sandboxed kernel saw of its
worker's GPU and lock. (Writers at once on one gradebook, many more than four: the hammer
tests below.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import nbformat
import pytest
from in_process import run_main

from grader import autograde_workers, course, outcome, parallel, sample_cohort
from grader.gpu_lock import GPU_LOCK_ENV
from grader.gradebook import gradebook_url, open_gradebook

pytestmark = pytest.mark.nbgrader

KEPT = ("late-solution", "bug-ignores-column-stride", "untouched", "crasher")
WORKERS = 4
"""Workers of the parallel run: one for each kept submission; the probe waits for the first
free one."""
PROBE = "probe"
PROBE_CELL = """\
import json, os
print("ENV " + json.dumps({k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "I1_GPU_LOCK")}))
raise NotImplementedError()
"""
"""A solution cell that prints, from inside the sandboxed kernel, the GPU it was given and
whether it sees the worker's timing lock (it must not: the trusted side times)."""


@pytest.fixture(scope="module")
def cohort(tmp_path_factory) -> Path:
    """The sample cohort, built once; tests grade copies of it."""
    root = tmp_path_factory.mktemp("parallel") / "base"
    sample_cohort.build(root)
    return root


def copy_course(base: Path, root: Path, keep: tuple[str, ...]) -> Path:
    """A copy of the course at `base` whose only submissions are those of `keep`."""
    shutil.copytree(base, root)
    for folder in (root / "submitted").iterdir():
        if folder.name not in keep:
            shutil.rmtree(folder)
    return root


@pytest.fixture(scope="module")
def graded(cohort, shared_course, tmp_path_factory):
    """The kept submissions and the probe graded in parallel into a copy of the sample
    cohort, and the shared course, which holds the kept ones too, graded sequentially by
    nbgrader's own command. One GPU name for every worker: the sequential run had no
    other, so any timing is on the same device."""
    parallel_root = copy_course(cohort, tmp_path_factory.mktemp("graded") / "parallel", KEPT)
    probe = nbformat.read(parallel_root / "release" / course.ASSIGNMENT / course.NOTEBOOK, 4)
    for cell in probe.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "addresses":
            cell.source = PROBE_CELL
    course.submit(parallel_root, PROBE, probe)
    run = parallel.autograde_parallel(parallel_root, workers=WORKERS, gpus=["0"])
    return shared_course.root, shared_course.run, parallel_root, run


def gradebook(root: Path, url: str | None = None):
    """The course's gradebook, or the one at `url` (tests/test_postgres.py)."""
    return open_gradebook(gradebook_url(root, url))


def notebook_rows(notebook) -> tuple:
    """One submitted notebook as autograde leaves it: penalty, grades and comments by cell."""
    grades = sorted(
        (g.name, g.auto_score, g.manual_score, g.needs_manual_grade) for g in notebook.grades
    )
    comments = sorted((c.name, c.auto_comment, c.manual_comment) for c in notebook.comments)
    return notebook.name, notebook.late_submission_penalty, grades, comments


def rows(root: Path, students=(*KEPT, "no-submission"), url: str | None = None) -> dict:
    """Everything autograde writes per student of `students`, ids aside: timestamps,
    lateness, cells."""
    with gradebook(root, url) as book:
        return {
            student.id: sorted(
                (
                    submission.assignment.name,
                    str(submission.timestamp),
                    submission.total_seconds_late,
                    sorted(notebook_rows(n) for n in submission.notebooks),
                )
                for submission in student.submissions
            )
            for student in book.students
            if student.id in students
        }


def row_counts(root: Path, url: str | None = None) -> dict[str, Counter]:
    """Per table, how many rows each student has (submissions, notebooks, grades, comments)."""
    from sqlalchemy import text

    queries = {
        "submissions": "SELECT student_id FROM submitted_assignment",
        "notebooks": "SELECT a.student_id FROM submitted_notebook n "
        "JOIN submitted_assignment a ON n.assignment_id = a.id",
        "grades": "SELECT a.student_id FROM grade g JOIN submitted_notebook n "
        "ON g.notebook_id = n.id JOIN submitted_assignment a ON n.assignment_id = a.id",
        "comments": "SELECT a.student_id FROM comment c JOIN submitted_notebook n "
        "ON c.notebook_id = n.id JOIN submitted_assignment a ON n.assignment_id = a.id",
    }
    with gradebook(root, url) as book:
        return {
            table: Counter(row[0] for row in book.db.execute(text(sql)))
            for table, sql in queries.items()
        }


def expected_counts(root: Path, students, url: str | None = None) -> dict[str, Counter]:
    """One submission and notebook per student, one grade per grade cell, one comment per
    solution cell: what a complete autograde leaves."""
    with gradebook(root, url) as book:
        notebook = book.find_notebook(course.NOTEBOOK.removesuffix(".ipynb"), course.ASSIGNMENT)
        per_student = {
            "submissions": 1,
            "notebooks": 1,
            "grades": len(notebook.grade_cells),
            "comments": len(notebook.solution_cells),
        }
    return {table: Counter(dict.fromkeys(students, n)) for table, n in per_student.items()}


def test_parallel_scores_equal_sequential(graded):
    """Does every student get the same score in every cell as in a sequential run?"""
    sequential_root, _, parallel_root, _ = graded
    sequential = sorted(course.cell_scores(sequential_root), key=lambda c: (c.student, c.cell))
    in_parallel = sorted(course.cell_scores(parallel_root), key=lambda c: (c.student, c.cell))
    in_parallel = [c for c in in_parallel if c.student != PROBE]
    assert {c.student for c in in_parallel} == set(KEPT)
    assert in_parallel == [c for c in sequential if c.student in KEPT]


def test_parallel_fails_the_same_students(graded):
    """Is the crasher the one failed student in both runs, and everyone else graded?"""
    _, sequential, parallel_root, run = graded
    assert set(sequential.failed) & set(KEPT) == {"crasher"}
    assert run.failed == ("crasher",)
    assert [r.student for r in run.runs] == sorted((*KEPT, PROBE))
    for student in KEPT:
        notebook = parallel_root / "autograded" / student / course.ASSIGNMENT / course.NOTEBOOK
        assert notebook.exists() == (student != "crasher"), student


def test_a_failed_student_reads_in_one_line_with_its_grading_log(graded):
    """Is the crasher's failure one line of the report (its cause as the export gives it,
    and its grading log, which keeps nbgrader's log of the run), with no traceback?"""
    _, _, parallel_root, run = graded
    report = parallel._report(run)
    crasher = next(r for r in run.runs if r.student == "crasher")
    status, cause = outcome.submission_outcome(
        parallel_root, course.ASSIGNMENT, "crasher", parallel_root / "nowhere", ["none"]
    )
    assert (status, cause) == ("ungradable", crasher.cause) and cause.startswith("dead kernel")
    line = next(line for line in report.splitlines() if line.startswith("crasher"))
    assert line.endswith(f": {cause} (its log: {crasher.grading_log})")
    assert "Traceback" not in report and "nbgrader log" not in report
    assert len(report.splitlines()) == len(run.runs) + 2  # a line each, a blank, the totals
    assert "DeadKernelError" in crasher.grading_log.read_text()


def test_parallel_gradebook_equals_sequential(graded):
    """Beyond scores, are timestamps, late penalties, manual-grade flags and comments equal?"""
    sequential_root, _, parallel_root, _ = graded
    assert rows(parallel_root) == rows(sequential_root)
    seconds_late = {student: subs[0][2] for student, subs in rows(parallel_root).items() if subs}
    assert seconds_late["late-solution"] > 0 and seconds_late["untouched"] == 0


def test_parallel_leaves_no_missing_or_duplicate_rows(graded):
    """Does each graded student have one submission and one row per cell, no more, no less?"""
    _, _, parallel_root, run = graded
    assert row_counts(parallel_root) == expected_counts(parallel_root, (*KEPT, PROBE))
    with gradebook(parallel_root) as book:
        assert sorted(s.id for s in book.students) == sorted((*KEPT, PROBE, "no-submission"))
    assert [r.attempts for r in run.runs] == [1] * len(run.runs)
    assert not any("database is locked" in r.log for r in run.runs)


def test_each_kernel_sees_its_workers_gpu_and_not_its_lock(graded):
    """Does the probe's sandboxed kernel see the GPU its worker was given (round robin:
    test_gpu_workers_take_one_gpu_each), and not the worker's timing lock?"""
    _, _, parallel_root, run = graded
    path = parallel_root / "autograded" / PROBE / course.ASSIGNMENT / course.NOTEBOOK
    printed = "".join(
        o.get("text", "") for c in nbformat.read(path, 4).cells for o in c.get("outputs", [])
    )
    seen = json.loads(printed.split("ENV ", 1)[1].splitlines()[0])
    given = next(r for r in run.runs if r.student == PROBE)
    assert seen == {"CUDA_VISIBLE_DEVICES": given.gpu, "I1_GPU_LOCK": None} and given.gpu == "0"


def test_gpu_workers_take_one_gpu_each(tmp_path, monkeypatch):
    """Is each worker pinned to one GPU, round robin, with that GPU's own lock file?"""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv(GPU_LOCK_ENV, raising=False)
    envs = [autograde_workers.worker_env(tmp_path, slot, ["0", "1"], 1) for slot in range(4)]
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["0", "1", "0", "1"]
    locks = [e[GPU_LOCK_ENV] for e in envs]
    assert locks[0] == locks[2] != locks[1] == locks[3]
    assert all(Path(lock).parent == tmp_path / "autograded" for lock in locks)
    bare = autograde_workers.worker_env(tmp_path, 0, [], 1)
    assert "CUDA_VISIBLE_DEVICES" not in bare and GPU_LOCK_ENV not in bare


HOLD = """\
import sys, time
from grader.gpu_lock import gpu_lock
with gpu_lock():
    start = time.monotonic()
    time.sleep(0.5)
    print(start, time.monotonic())
"""
MEET = """\
import sys, time
from pathlib import Path
from grader.gpu_lock import gpu_lock
mine, other = Path(sys.argv[1]), Path(sys.argv[2])
with gpu_lock(shared=True):
    mine.touch()
    deadline = time.monotonic() + 60
    while not other.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    print(other.exists())
"""


def run_holders(lock: Path, *scripts: list[str]) -> list[str]:
    """Processes that each run a script holding I1_GPU_LOCK at `lock`: their outputs."""
    env = dict(os.environ, PYTHONPATH=str(course.REPO), **{GPU_LOCK_ENV: str(lock)})
    holders = [
        subprocess.Popen(
            [sys.executable, "-c", *script], env=env, stdout=subprocess.PIPE, text=True
        )
        for script in scripts
    ]
    outputs = [p.communicate()[0] for p in holders]
    assert all(p.returncode == 0 for p in holders)
    return outputs


def test_gpu_lock_lets_one_process_time_at_a_time(tmp_path):
    """Do two processes timing on the same GPU hold its lock one after the other?"""
    outputs = run_holders(tmp_path / "gpu.lock", [HOLD], [HOLD])
    first, second = sorted(tuple(map(float, out.split())) for out in outputs)
    assert first[1] <= second[0]


def test_shared_gpu_lock_holders_overlap(tmp_path):
    """Can two shared holders (correctness work, say) hold the GPU lock at the same time?"""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    outputs = run_holders(tmp_path / "gpu.lock", [MEET, a, b], [MEET, b, a])
    assert [out.strip() for out in outputs] == ["True", "True"]


HAMMER = """\
import sys, time
from pathlib import Path
from nbgrader.api import Gradebook
url, who, rounds, ready, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), *map(Path, sys.argv[4:])
ready.touch()
while not go.exists():  # every writer starts at once, imports done
    time.sleep(0.01)
errors = 0
for r in range(rounds):
    student = f"{who}-{r}"
    try:
        with Gradebook(url) as book:  # as autograde starts a student
            book.update_or_create_student(student)
            book.update_or_create_submission(
                "i1_strided_softmax", student, timestamp="2026-12-01 12:00:00 UTC")
        with Gradebook(url) as book:  # as SaveAutoGrades ends one: a commit per cell
            notebook = book.find_submission_notebook(
                "strided_softmax", "i1_strided_softmax", student)
            for grade in notebook.grades:
                grade.auto_score = grade.max_score
                book.db.commit()
    except Exception as error:
        errors += 1
        print(type(error).__name__, error, file=sys.stderr)
print(errors)
"""
WRITERS = 6
ROUNDS = 3


def hammer(root: Path, url: str, writers: int = WRITERS) -> tuple[int, str]:
    """`writers` processes write students through nbgrader's API at once: errors, stderr."""
    go = root / "go"
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                HAMMER,
                url,
                f"w{i}",
                str(ROUNDS),
                str(root / f"ready{i}"),
                str(go),
            ],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(writers)
    ]
    deadline = time.monotonic() + 300
    while not all((root / f"ready{i}").exists() for i in range(writers)):
        assert time.monotonic() < deadline, "the writers did not start within 5 minutes"
        time.sleep(0.05)
    go.touch()
    outputs = [w.communicate() for w in processes]
    return sum(int(out.split()[-1]) for out, _ in outputs), "".join(err for _, err in outputs)


def test_gradebook_writers_without_busy_timeout_collide(cohort, tmp_path):
    """Does the hammer really contend: without a busy timeout, are writes refused as locked?"""
    root = copy_course(cohort, tmp_path / "course", ())
    errors, stderr = hammer(root, f"sqlite:///{root / 'gradebook.db'}?timeout=0", writers=3)
    assert errors > 0
    assert "database is locked" in stderr


def test_gradebook_writers_with_worker_url_lose_nothing(cohort, tmp_path):
    """With the workers' gradebook URL, do concurrent writers finish without lost rows?"""
    root = copy_course(cohort, tmp_path / "course", ())
    url, _ = autograde_workers.worker_gradebook(root)
    errors, stderr = hammer(root, url)
    assert (errors, "database is locked" in stderr) == (0, False)
    students = [f"w{i}-{r}" for i in range(WRITERS) for r in range(ROUNDS)]
    counts = row_counts(root)
    assert counts["submissions"] == Counter(dict.fromkeys(students, 1))
    assert counts["grades"] == expected_counts(root, students)["grades"]
    with gradebook(root) as book:
        for student in students:
            notebook = book.find_submission_notebook("strided_softmax", course.ASSIGNMENT, student)
            assert all(g.auto_score == g.max_score for g in notebook.grades), student


FAKE_WORKER = """\
import json, os, sys
from pathlib import Path
for line in sys.stdin:
    student = line.rstrip("\\n")
    if student == "kills-its-worker":
        os._exit(3)
    tries = Path(student + ".tries")
    tries.write_text(str(int(tries.read_text()) + 1) if tries.exists() else "1")
    locked = student == "locked-once" and tries.read_text() == "1"
    log = "sqlite3.OperationalError: database is locked" if locked else "graded"
    print(json.dumps({"graded": not locked, "seconds": 0.0, "log": log}), flush=True)
"""
"""Stands in for `python -m grader.autograde_workers`: same protocol, scripted outcomes."""


def fake_worker(tmp_path: Path) -> autograde_workers.Worker:
    worker = autograde_workers.Worker(tmp_path, course.ASSIGNMENT, "sqlite://", 0, dict(os.environ))
    worker.command = [sys.executable, "-c", FAKE_WORKER]
    return worker


def test_a_dead_worker_fails_only_its_student(tmp_path):
    """When a worker process dies, is only its student failed, and the next one graded?"""
    worker = fake_worker(tmp_path)
    try:
        runs = [worker.grade(s) for s in ("first", "kills-its-worker", "after")]
    finally:
        worker.close()
    assert [r.graded for r in runs] == [True, False, True]
    assert "worker process died (exit status 3) while grading kills-its-worker" in runs[1].log


def test_a_locked_gradebook_regrades_the_student(tmp_path):
    """Is a student whose run hit "database is locked" graded again, and counted twice?"""
    worker = fake_worker(tmp_path)
    try:
        run = worker.grade("locked-once")
    finally:
        worker.close()
    assert (run.graded, run.attempts) == (True, 2)


def cli(*args: str) -> subprocess.CompletedProcess:
    """`python -m grader.parallel` run in this process."""
    return run_main(parallel.main, args)


def test_a_notebook_that_is_not_json_fails_in_one_line(cohort, tmp_path):
    """Run from a course folder outside the repository, does a submission that is not JSON
    fail with exit 1 and one line saying why (the export's cause) and where its grading log
    is, which keeps nbgrader's log of the run?"""
    root = copy_course(cohort, tmp_path / "course", ())
    course.submit(root, "not-json", nbformat.v4.new_notebook()).write_text("{not json")
    done = run_main(parallel.main, (course.ASSIGNMENT, "--workers", "1"), cwd=root)
    assert done.returncode == 1, done.stderr
    log = root / "grading_log" / course.ASSIGNMENT / "not-json.log"
    _, cause = outcome.submission_outcome(root, course.ASSIGNMENT, "not-json", root, ["none"])
    assert cause.startswith("invalid notebook")
    lines = done.stdout.splitlines()
    assert lines[0].startswith("not-json  FAILED  ")
    assert lines[0].endswith(f" s: {cause} (its log: {log})")
    assert len(lines) == 3 and lines[1] == ""
    assert lines[2].startswith("1 submissions, 1 failed, 1 workers")
    assert "nbgrader's log of this run" in log.read_text()


def test_cli_refuses_an_unknown_student(cohort):
    """Does the CLI name a student with no submission, and exit 2 before grading anyone?"""
    done = cli(course.ASSIGNMENT, "--course", str(cohort), "--student", "nobody")
    assert done.returncode == 2
    assert "no submitted notebook for nobody" in done.stderr


def test_cli_refuses_zero_workers(cohort):
    """Does the CLI say how many workers to ask for when given zero?"""
    done = cli(course.ASSIGNMENT, "--course", str(cohort), "--workers", "0")
    assert done.returncode == 2
    assert "workers must be at least 1, got 0" in done.stderr


def test_shards_take_every_student_once():
    """Do N shards split the sorted students disjointly, every N-th from shard I's I-th, and
    together take each student once, in any order the students are given?"""
    students = [f"s{i:02d}" for i in range(7)]
    shards = [parallel.shard_of(students[::-1], (i, 3)) for i in (1, 2, 3)]
    assert shards == [["s00", "s03", "s06"], ["s01", "s04"], ["s02", "s05"]]
    assert sorted(sum(shards, [])) == students
    assert parallel.shard_of(students[:1], (2, 2)) == []
    assert parallel.shard_of(students, None) == students


BAD_SHARDS = ("0/2", "3/2", "1/0", "2", "a/b", "-1/2", "1/2/3", "")


def test_bad_shards_are_refused():
    """Is every malformed or out-of-range I/N refused with what I/N means, and a good one
    read as (I, N)?"""
    for spec in BAD_SHARDS:
        with pytest.raises(ValueError) as refused:
            parallel.parse_shard(spec)
        assert str(refused.value) == (
            f"--shard takes I/N, shard I of N counting from 1 (1/2 and 2/2 on two machines), "
            f"got {spec!r}"
        )
    assert parallel.parse_shard(" 2/3 ") == (2, 3)


def test_cli_refuses_a_bad_shard(cohort):
    """Does the CLI give that one line for a bad --shard, and exit 2 at once?"""
    done = cli(course.ASSIGNMENT, "--course", str(cohort), "--shard=-1/2")
    assert done.returncode == 2
    assert done.stderr == (
        "parallel: --shard takes I/N, shard I of N counting from 1 (1/2 and 2/2 on two "
        "machines), got '-1/2'\n"
    )


def test_cli_says_which_students_a_shard_takes(cohort):
    """Does a shard name the students it took, and an empty shard say why it grades none?
    (Checked on a course whose gradebook lacks the assignment, so nothing is graded.)"""
    done = cli("nope", "--course", str(cohort), "--shard", "1/1")
    assert done.returncode == 2
    assert done.stderr.startswith("shard 1/1 takes 0 of 0 students: none\n")
    submitted = parallel.submitted_students(cohort, course.ASSIGNMENT)
    taken = parallel.select_students(cohort, course.ASSIGNMENT, None, (2, 5))
    assert taken == sorted(submitted)[1::5] and len(taken) == 3
    line = parallel._taken((2, 5), taken, len(submitted))
    assert line == f"shard 2/5 takes 3 of {len(submitted)} students: {', '.join(taken)}"


def test_cli_refuses_an_unreachable_database(cohort):
    """Does a gradebook URL that no server answers give one line, without its password?"""
    url = f"postgresql://grader:hunter2@127.0.0.1:{free_port()}/i1"
    done = cli(course.ASSIGNMENT, "--course", str(cohort), "--db", url)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("parallel: cannot open the gradebook postgresql+psycopg://")
    assert "Connection refused" in done.stderr and "hunter2" not in done.stderr


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
