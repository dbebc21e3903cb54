"""One course graded by two shards at once into one PostgreSQL gradebook: the same rows and
scores as the sequential SQLite run of the same submissions.

A private PostgreSQL server (tests/services.py) is started for the module. A copy of the
sample cohort is built with I1_GRADEBOOK_URL naming a database on it, so that every nbgrader
step (generate_assignment, the due date, the roster) writes there, and keeps three
submissions: a late solution (full scores, a timestamp and a penalty), the untouched release
(zeros and comments) and the crasher (a failed student). (Partial scores are rows of the
same kind: tests/test_parallel.py grades a bug in parallel.) Two `python -m
grader.parallel --shard I/2 --db URL` processes grade it at the same time, as two machines
would, and the gradebook must equal, row for row, the shared course's (tests/shared_course.py:
the same submissions graded by nbgrader's own sequential `autograde` into SQLite).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import services
from test_parallel import copy_course, expected_counts, row_counts, rows

from grader import course, gradebook, parallel, recheck, sample_cohort
from learning.workshops.checking.child import child_env

pytestmark = [pytest.mark.nbgrader, pytest.mark.services]

KEPT = ("crasher", "late-solution", "untouched")
SHARDS = 2


@pytest.fixture(scope="module")
def server() -> Iterator[services.Postgres]:
    """A PostgreSQL server of this module's own; skips (fails in CI) without one."""
    with contextlib.ExitStack() as stack:
        try:
            found = stack.enter_context(services.postgres())
        except services.ServiceUnavailable as missing:
            services.unavailable(str(missing))
        yield found


@contextlib.contextmanager
def gradebook_env(url: str) -> Iterator[None]:
    """I1_GRADEBOOK_URL set to `url` for the block, in this process and those it starts."""
    before = os.environ.get(gradebook.GRADEBOOK_URL_ENV)
    os.environ[gradebook.GRADEBOOK_URL_ENV] = url
    try:
        yield
    finally:
        if before is None:
            del os.environ[gradebook.GRADEBOOK_URL_ENV]
        else:
            os.environ[gradebook.GRADEBOOK_URL_ENV] = before


def postgres_course(root: Path, url: str, keep: tuple[str, ...]) -> Path:
    """The sample cohort at `root`, its gradebook in the database at `url`, only `keep`
    submitted (the roster's student who sent nothing stays on the roster)."""
    build = root.parent / f"{root.name}-build"
    with gradebook_env(url):  # the course's nbgrader_config.py reads it
        sample_cohort.build(build)
    copy_course(build, root, keep)
    shutil.rmtree(build)
    return root


def shard_command(root: Path, url: str, index: int, count: int) -> list[str]:
    """`python -m grader.parallel` grading shard `index` of `count` into the gradebook at `url`."""
    return [
        *(sys.executable, "-m", "grader.parallel", course.ASSIGNMENT, "--course", str(root)),
        *(f"--shard={index}/{count}", "--db", url),
    ]


@pytest.fixture(scope="module")
def sharded(server, shared_course, tmp_path_factory):
    """The kept submissions graded by two shards at once into one PostgreSQL gradebook; the
    shared course (sequential, SQLite) beside it; each shard's output, and the wall time."""
    url = server.create_database("sharded")
    root = postgres_course(tmp_path_factory.mktemp("postgres") / "course", url, KEPT)
    env = child_env()
    env.pop(gradebook.GRADEBOOK_URL_ENV, None)  # --db alone names the gradebook
    started = time.monotonic()
    shards = [
        subprocess.Popen(
            [*shard_command(root, url, i, SHARDS), "--workers", "1"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(1, SHARDS + 1)
    ]
    outputs = [(shard.communicate(), shard.returncode) for shard in shards]
    wall_s = time.monotonic() - started
    print(f"\n{SHARDS} shards into PostgreSQL: {wall_s:.1f} s wall for {len(KEPT)} submissions")
    return shared_course.root, root, url, outputs, wall_s


def test_shards_take_disjoint_students_and_say_which(sharded):
    """Does each shard name the students it took, every N-th of the sorted submissions, and
    fail (exit 1) only for the shard that held the crasher?"""
    _, _, _, outputs, _ = sharded
    taken = [parallel.shard_of(KEPT, (i, SHARDS)) for i in range(1, SHARDS + 1)]
    assert taken == [["crasher", "untouched"], ["late-solution"]]
    for i, (((stdout, stderr), code), students) in enumerate(zip(outputs, taken, strict=True), 1):
        count = len(students)
        line = f"shard {i}/{SHARDS} takes {count} of {len(KEPT)} students: {', '.join(students)}"
        assert stderr.startswith(line + "\n"), stderr
        assert code == (1 if "crasher" in students else 0), stdout + stderr
        failed = int("crasher" in students)
        assert f"shard {i}/{SHARDS}: {count} submissions, {failed} failed" in stdout


def test_postgres_gradebook_equals_sequential_sqlite(sharded):
    """Are timestamps, lateness, late penalties, every cell's scores, manual-grade flags and
    comments, and the roster student without a submission, what the sequential run wrote?"""
    sequential_root, root, url, _, _ = sharded
    students = (*KEPT, "no-submission")
    in_postgres = rows(root, students, url)
    assert set(in_postgres) == set(students)
    assert in_postgres == rows(sequential_root, students)
    assert in_postgres["late-solution"][0][2] > 0


def test_postgres_scores_equal_sequential_sqlite(sharded):
    """Does every kept student get the same score in every cell as in the sequential run?"""
    sequential_root, root, url, _, _ = sharded
    key = lambda c: (c.student, c.cell)  # noqa: E731
    in_postgres = sorted(course.cell_scores(root, url), key=key)
    sequential = sorted(course.cell_scores(sequential_root), key=key)
    assert {c.student for c in in_postgres} == set(KEPT)
    assert in_postgres == [c for c in sequential if c.student in KEPT]


def test_postgres_gradebook_has_no_missing_or_duplicate_rows(sharded):
    """One submission and one row per cell for each student, none twice, and nbgrader's
    version stamp (nbgrader runs `alembic` when it creates a gradebook)?"""
    from sqlalchemy import text

    _, root, url, _, _ = sharded
    assert row_counts(root, url) == expected_counts(root, KEPT, url)
    with gradebook.open_gradebook(url) as book:
        stamps = [row[0] for row in book.db.execute(text("SELECT * FROM alembic_version"))]
        assert len(stamps) == 1 and stamps[0]


def test_recheck_and_cohort_read_the_postgres_gradebook(sharded, capsys, monkeypatch):
    """Do the recheck (--db, one progress line per student on stderr) and the cohort report
    (I1_GRADEBOOK_URL, read through the course's config) see the PostgreSQL grades?"""
    from grader.cohort.gradebook import load_gradebook

    sequential_root, root, url, _, _ = sharded
    args = [course.ASSIGNMENT, "--course", str(root), "--db", url, "--student", "untouched"]
    assert recheck.main(args) == 0
    out, err = capsys.readouterr()
    assert out == "The gradebook and the recheck agree on every rechecked cell.\n"
    assert err.startswith("recheck [1/1] untouched: agrees (") and err.count("\n") == 1
    monkeypatch.setenv(gradebook.GRADEBOOK_URL_ENV, url)
    cells, students = load_gradebook(root, course.ASSIGNMENT)
    monkeypatch.delenv(gradebook.GRADEBOOK_URL_ENV)
    sequential_cells, sequential_students = load_gradebook(sequential_root, course.ASSIGNMENT)
    assert cells == sequential_cells

    def seen(records):  # how long the crasher's kernel took to die varies: not compared
        return {
            r.student: (
                *(r.submitted, r.autograded, r.late_seconds, r.grades),
                re.sub(r" \(after \d+ s\)", "", r.ungradable),
            )
            for r in records
            if r.student in (*KEPT, "no-submission")
        }

    assert seen(students) == seen(sequential_students)


OPEN = """\
import sys
from grader.gradebook import open_gradebook
open_gradebook(sys.argv[1], "i1-strided-softmax").close()
"""


def test_processes_creating_one_gradebook_at_once_do_not_race(server):
    """Do processes that open an empty PostgreSQL gradebook at the same moment (shards
    started together on several nodes) all succeed, with one set of tables, one course row
    and one version stamp? Without the advisory lock, nbgrader's CREATE TYPE/TABLE race."""
    from nbgrader.api import Course
    from sqlalchemy import text

    url = server.create_database("race")
    env = child_env()
    openers = [
        subprocess.Popen([sys.executable, "-c", OPEN, url], env=env, stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    errors = [opener.communicate()[1].decode() for opener in openers]
    assert [opener.returncode for opener in openers] == [0, 0, 0], errors
    with gradebook.open_gradebook(url, "i1-strided-softmax") as book:
        assert book.db.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1
        assert [c.id for c in book.db.query(Course)] == ["i1-strided-softmax"]


def test_a_plain_postgres_url_names_the_installed_driver():
    """Is a plain postgresql:// (or postgres://) URL given psycopg 3, the driver the course
    extra installs, and a connect timeout; are SQLite and named drivers left as they are?"""
    assert gradebook.database_url("postgres://u:p@h/db") == (
        f"postgresql+psycopg://u:p@h/db?connect_timeout={gradebook.CONNECT_TIMEOUT_S}"
    )
    assert gradebook.database_url("postgresql://h/db?sslmode=require").startswith(
        "postgresql+psycopg://h/db?sslmode=require&connect_timeout="
    )
    assert gradebook.database_url("postgresql+psycopg://h/db?connect_timeout=5").endswith("=5")
    assert gradebook.database_url("sqlite:////x/gradebook.db") == "sqlite:////x/gradebook.db"
    shown = gradebook.shown_url("postgresql+psycopg://u:secret@h/db")
    assert shown == "postgresql+psycopg://u:***@h/db"
