"""nbgrader configuration for the I1 course; the course directory is this repository."""

from pathlib import Path

from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    IgnorePattern,
    LimitOutput,
    SaveAutoGrades,
)

from grader.sandbox import SandboxedExecute
from grader.trusted import GradeHiddenCells

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.root = str(Path(__file__).resolve().parent)
c.CourseDirectory.course_id = "i1-strided-softmax"

# Triton's first compile and its CPU interpreter both outlast nbgrader's 30 s default.
c.Execute.timeout = 600
c.Execute.startup_timeout = 120

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# Grading: the student's notebook runs in a bubblewrap sandbox with its hidden regions cut out
# (it reaches nothing but a scratch copy of its own folder); the hidden and timing cells are
# then graded here, outside it, and scored from what this side wrote. See grader/sandbox.py and
# grader/trusted.py. Without bubblewrap grading refuses to run; I1_UNSAFE_NO_SANDBOX=1
# (--unsafe-no-sandbox on the grader commands) runs student code unsandboxed, loudly.
c.Autograde.autograde_preprocessors = [
    SandboxedExecute,
    GradeHiddenCells,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]
