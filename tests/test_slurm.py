"""scripts/slurm_autograde.sbatch on a real Slurm cluster: a job array whose tasks grade one
shard each into one PostgreSQL gradebook, as GPU nodes would.

The module starts a private one-node Slurm cluster (munged, slurmctld, slurmd; two stand-in
GPUs, so the script's `--gres=gpu:1` is scheduled as written) and a private PostgreSQL
server (tests/services.py), builds a course whose gradebook is on that server
(tests/test_postgres.py) with two submissions, submits the unmodified script with `sbatch
--array=1-2 --wait` (only its CPU count and output file overridden on the command line),
and compares the gradebook with the shared course's sequential SQLite run. A second array
is submitted as the instructor guide says, from a course folder that `python -m
grader.make_course` made outside the repository, with the course's own copy of the script
and nothing set but the gradebook URL (SQLite: one node).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import services
from test_parallel import expected_counts, row_counts, rows
from test_postgres import postgres_course, server  # noqa: F401 - the server fixture

from grader import course, gradebook, make_course
from grader.seeding import new_secret

pytestmark = [pytest.mark.nbgrader, pytest.mark.services]

SCRIPT = course.REPO / "scripts" / "slurm_autograde.sbatch"
KEPT = ("solution", "untouched")


@pytest.fixture(scope="module")
def cluster() -> Iterator[services.Slurm]:
    """A one-node Slurm cluster of this module's own; skips (fails in CI) without Slurm."""
    with contextlib.ExitStack() as stack:
        try:
            found = stack.enter_context(services.slurm(gpus=2))
        except services.ServiceUnavailable as missing:
            services.unavailable(str(missing))
        yield found


@pytest.fixture(scope="module")
def job(cluster, server, shared_course, tmp_path_factory):  # noqa: F811 - server: a fixture
    """The kept submissions graded by a two-task array of the batch script."""
    url = server.create_database("slurm")
    folder = tmp_path_factory.mktemp("slurm")
    root = postgres_course(folder / "course", url, KEPT)
    env = dict(cluster.env, **{gradebook.GRADEBOOK_URL_ENV: url, "I1_COURSE": str(root)})
    env["I1_PYTHON"] = sys.executable  # the tests' Python, wherever its environment lives
    started = time.monotonic()
    done = cluster.run(
        *("sbatch", "--wait", "--array=1-2", "--cpus-per-task=1"),
        *(f"--output={folder}/task-%a.out", str(SCRIPT)),
        cwd=course.REPO,
        env=env,
        timeout=480,
    )
    wall_s = time.monotonic() - started
    outputs = {i: (folder / f"task-{i}.out").read_text() for i in (1, 2)}
    print(f"\nSlurm array of 2 into PostgreSQL: {wall_s:.1f} s wall for {len(KEPT)} submissions")
    return shared_course.root, root, url, done, outputs


def test_array_tasks_each_grade_their_shard(job):
    """Does the array finish with status 0, each task on a GPU of its own, saying which
    student its shard took?"""
    _, _, _, done, outputs = job
    assert done.returncode == 0, f"{done.stdout}{done.stderr}{outputs}"
    for task, student in ((1, "solution"), (2, "untouched")):
        out = outputs[task]
        assert f"shard {task}/2, GPUs " in out, out
        assert f"shard {task}/2 takes 1 of 2 students: {student}\n" in out, out
        assert f"shard {task}/2: 1 submissions, 0 failed" in out, out
    gpus = {out.split(", GPUs ")[1].split(",")[0] for out in outputs.values()}
    assert len(gpus) == 2 and "none" not in gpus


def test_slurm_gradebook_equals_sequential_sqlite(job):
    """Are the rows the array wrote to PostgreSQL those of the sequential SQLite run, with
    one submission and one row per cell each?"""
    sequential_root, root, url, _, _ = job
    students = (*KEPT, "no-submission")
    assert rows(root, students, url) == rows(sequential_root, students)
    assert row_counts(root, url) == expected_counts(root, KEPT, url)


@pytest.fixture(scope="module")
def course_job(cluster, tmp_path_factory):
    """The untouched release, submitted in a course made by make_course outside the
    repository, graded by `sbatch --array=1-2 scripts/slurm_autograde.sbatch` run there, as
    the guide says: no I1_COURSE, I1_REPO or I1_PYTHON; the gradebook the course's SQLite file."""
    folder = tmp_path_factory.mktemp("slurm-course")
    root = make_course.make_course(folder / "course")
    new_secret(root)
    course.nbgrader(root, "generate_assignment", course.ASSIGNMENT, "--force")
    course.submit_release(root, "untouched")
    unset = ("I1_COURSE", "I1_REPO", "I1_PYTHON", "PYTHONPATH")
    env = {k: v for k, v in cluster.env.items() if k not in unset}
    env[gradebook.GRADEBOOK_URL_ENV] = f"sqlite:///{root / 'gradebook.db'}"
    done = subprocess.run(
        ["sbatch", "--wait", "--array=1-2", "--cpus-per-task=1"]
        + [f"--output={folder}/task-%a.out", "scripts/slurm_autograde.sbatch"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=480,
    )
    outputs = {i: (folder / f"task-{i}.out").read_text() for i in (1, 2)}
    return root, done, outputs


def test_the_guides_sbatch_line_runs_from_a_course_folder(course_job):
    """From a course folder outside the repository, does the guide's sbatch line grade that
    course with the checkout it is tied to, each task taking its shard?"""
    root, done, outputs = course_job
    assert done.returncode == 0, f"{done.stdout}{done.stderr}{outputs}"
    for task, taken in ((1, "1 of 1 students: untouched"), (2, "0 of 1 students: none")):
        assert f"shard {task}/2, GPUs " in outputs[task] and f"course {root}\n" in outputs[task]
        assert f"shard {task}/2 takes {taken}\n" in outputs[task], outputs[task]
        assert "is tied to" not in outputs[task]
    assert "shard 1/2: 1 submissions, 0 failed" in outputs[1], outputs[1]
    assert (root / "autograded" / "untouched" / course.ASSIGNMENT / course.NOTEBOOK).is_file()


def test_script_refuses_to_run_without_a_gradebook_url(tmp_path):
    """Run outside Slurm or without I1_GRADEBOOK_URL, does the script stop with one line?"""
    env = {k: v for k, v in os.environ.items() if k != gradebook.GRADEBOOK_URL_ENV}
    bare = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True)
    assert bare.returncode != 0 and "run this with sbatch --array=1-N" in bare.stderr
    env.update(SLURM_ARRAY_TASK_ID="1", SLURM_SUBMIT_DIR=str(tmp_path))
    unset = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True)
    assert unset.returncode != 0 and unset.stderr.count("\n") == 1
    assert "set I1_GRADEBOOK_URL to the shared PostgreSQL gradebook" in unset.stderr
