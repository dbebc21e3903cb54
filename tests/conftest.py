"""Test setup: Triton's interpreter without a GPU, a headless matplotlib, the repo importable."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("MPLBACKEND", "Agg")

TEST_SECRET = hashlib.sha256(b"i1 test course secret").hexdigest()
"""The course secret of every test (`grader.seeding`), in this process's environment, which
the nbgrader processes it starts inherit: derived here, so no committed file holds it, and
no test reads a course's own secret file unless it unsets I1_COURSE_SECRET."""
os.environ["I1_COURSE_SECRET"] = TEST_SECRET

from learning.workshops.contracts import select_mode  # noqa: E402

# Before any test module defines a @triton.jit kernel: without CUDA, kernels run on CPU tensors.
select_mode(verbose=False)


@pytest.fixture(scope="session")
def graded_sample_course(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample cohort (grader.sample_cohort), autograded once per test session."""
    from grader import course, sample_cohort

    root = tmp_path_factory.mktemp("sample")
    sample_cohort.build(root)
    course.autograde(root)
    return root
