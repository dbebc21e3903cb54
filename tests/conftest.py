"""Test setup: Triton's interpreter without a GPU, a headless matplotlib, the repo importable."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

pytest_plugins = ("file_budget",)  # --file-budget: the seconds per test file, at the end

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("MPLBACKEND", "Agg")

TEST_SECRET = hashlib.sha256(b"i1 test course secret").hexdigest()
"""The course secret of every test (`grader.seeding`), in this process's environment, which
the nbgrader processes it starts inherit: derived here, so no committed file holds it, and
no test reads a course's own secret file unless it unsets I1_COURSE_SECRET."""
os.environ["I1_COURSE_SECRET"] = TEST_SECRET
os.environ.pop("I1_GRADEBOOK_URL", None)  # an instructor's shared gradebook is never a test's

from learning.workshops.contracts import select_mode  # noqa: E402

# Before any test module defines a @triton.jit kernel: without CUDA, kernels run on CPU tensors.
select_mode(verbose=False)


@pytest.fixture(scope="session")
def shared_course(tmp_path_factory: pytest.TempPathFactory):
    """The course every end-to-end test reads (tests/shared_course.py), autograded once per
    test session: the sample cohort and the submissions the end-to-end tests need."""
    from shared_course import graded

    return graded(tmp_path_factory.mktemp("shared"))


@pytest.fixture(scope="session")
def graded_sample_course(shared_course) -> Path:
    """The folder of the shared course, which holds the sample cohort (grader.sample_cohort)."""
    return shared_course.root


SHARED = "shared_course"
"""The xdist group of every test that reads the shared course: one worker builds and grades
it once, the other workers run everything else meanwhile (`make test`: -n auto --dist
loadgroup)."""
GROUPS = {SHARED: SHARED, "exploit_course": "exploits"}
"""The xdist group of every test that needs each session-wide graded course (the attack
suite's: tests/exploits/conftest.py). xdist sends the groups out largest first, so these
two, the largest by far, start at once on two workers."""


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put every test that needs a graded course (GROUPS), directly or through a fixture, in
    that course's xdist group; then give each grouped test the `@group` suffix xdist's
    loadgroup schedules by. xdist writes that suffix to `item._nodeid`, which pytest with
    structured node ids (`item._id`) no longer reads: every group was spread over the
    workers, each building its own shared course (pytest-dev/pytest-xdist#1386)."""
    for item in items:
        for fixture, group in GROUPS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(group))
    if not getattr(config.option, "loadgroup", False):  # set in xdist's workers
        return
    for item in items:
        groups = {
            str(m.args[0] if m.args else m.kwargs.get("name", "default"))
            for m in item.iter_markers("xdist_group")
        }
        if groups and "@" not in item.nodeid and hasattr(item, "_id"):
            from _pytest.nodeid import NodeId

            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(sorted(groups))}")
