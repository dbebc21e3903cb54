"""nbgrader configuration for the I1 course; the course directory is this repository."""

import os
import warnings
from importlib.resources import files
from pathlib import Path

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearOutput,
    DeduplicateIds,
    GetGrades,
    IgnorePattern,
    LimitOutput,
    OverwriteKernelspec,
    SaveAutoGrades,
)
from sqlalchemy.exc import SAWarning

from grader.course_tie import refuse_other_code
from grader.grading.ahead import StartChecksAhead
from grader.grading.execute import SandboxedExecute
from grader.grading.extra_credit import AwardExtraCredit
from grader.grading.feedback import StudentFeedback
from grader.grading.fresh_start import start_regrades_fresh
from grader.grading.grading_log import convert_hooks
from grader.grading.hand_grading import KeepHandGrades, NotGradedYet
from grader.grading.inert_html import InertHTMLExporter
from grader.grading.released import KeepReviewDecisions
from grader.grading.restore import RestoreGradeCells
from grader.grading.review_note import ReviewNote
from grader.grading.submission_files import refuse_irregular_submissions
from grader.grading.trusted import GradeHiddenCells
from learning.workshops.notebook.evidence import NOT_WRITTEN

c = get_config()  # noqa: F821 - provided by nbgrader

# nbgrader 0.9.6's Gradebook.add_submission builds a submission's rows before it adds them to
# the session; SQLAlchemy 2 autoflushes as it reads the assignment's notebooks and warns, for
# every submission, that those rows "will not proceed". nbgrader adds and commits them next,
# so nothing is lost: these three warnings, from nbgrader.api alone, are silenced.
warnings.filterwarnings(
    "ignore",
    message=r"Object of type <Submitted(Assignment|Notebook)> not in session, add operation "
    r"along '(Assignment|Student|Notebook)\.submissions' will not proceed",
    category=SAWarning,
    module=r"nbgrader\.api$",
)

ROOT = Path(__file__).resolve().parent
c.CourseDirectory.root = str(ROOT)
c.CourseDirectory.course_id = "i1-strided-softmax"
# The gradebook: the SQLite file gradebook.db in the course folder, unless I1_GRADEBOOK_URL
# names another database (PostgreSQL, so that several machines grade into one gradebook:
# `python -m grader.parallel --shard I/N`, scripts/slurm_autograde.sbatch).
if os.environ.get("I1_GRADEBOOK_URL"):
    from grader.gradebook import database_url

    c.CourseDirectory.db_url = database_url(os.environ["I1_GRADEBOOK_URL"])

# Triton's first compile and its CPU interpreter both outlast nbgrader's 30 s default.
c.Execute.timeout = 600
c.Execute.startup_timeout = 120

c.ClearSolutions.code_stub = {
    "python": f'# YOUR CODE HERE\nraise NotImplementedError("{NOT_WRITTEN}: your code goes here")'
}

# Before grading, every cell of the course's notebook that the submission deleted, moved or
# edited is put back from the gradebook's copy of the source, with the course's nbgrader
# metadata (flags, points), and every other cell loses any it carries
# (grader/grading/restore.py). It runs before DeduplicateIds, which a student's cell with
# nbgrader metadata of its own stops (a grade flag without a grade id).
# nbgrader's own checksum warning for a locked cell ("Attribute 'checksum' for cell hidden_*
# has changed!") fired for every hidden cell of every untouched submission: nbgrader compares
# the release's cell with the source's, hidden tests included (jupyter/nbgrader#1961).
# RestoreGradeCells leaves it out and says itself when a course cell was edited.
c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    RestoreGradeCells,
    DeduplicateIds,
    OverwriteKernelspec,
    CheckCellMetadata,
]

# Grading: the student's notebook runs in a bubblewrap sandbox with its hidden regions cut out
# (it reaches nothing but a scratch copy of its own folder); the hidden and timing cells are
# then graded here, outside it, and scored from what this side wrote; their correctness checks
# start first and run beside the notebook (StartChecksAhead), the timing after it. See
# grader/isolation/sandbox.py, grader/grading/execute.py and grader/grading/trusted.py.
# Without bubblewrap grading refuses to run; I1_UNSAFE_NO_SANDBOX=1 (--unsafe-no-sandbox on
# the grader commands) runs student code unsandboxed, loudly.
c.Autograde.autograde_preprocessors = [
    StartChecksAhead,
    SandboxedExecute,
    GradeHiddenCells,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    SaveAutoGrades,
    AwardExtraCredit,
    KeepHandGrades,
    KeepReviewDecisions,
    AssignLatePenalties,
    CheckCellMetadata,
]
# How many sandboxed children share a submission's hidden checks beside its notebook: by
# default 2 on machines with 8 cores or more (on an H200 host: 13-17 s a submission, against
# 15-24 s in one child over three runs), else 1.
# c.StartChecksAhead.children = 2
# The two optional exercises (in place, backward) score 0 points of their own and this much
# extra credit when their hidden cells pass (grader/grading/extra_credit.py).
c.AwardExtraCredit.points = {"hidden_inplace": 1.0, "hidden_backward": 1.0}

# A hand grade (the prediction) lasts as long as the answer it graded: a resubmission with
# another answer is graded by hand again (grader/grading/hand_grading.py).
# A grade held for review (its grading record's holds: the source screen's reading, a launch the
# clean room could not replay) is computed and kept, not released, until an instructor decides
# with `python -m grader.review`; a decision lasts as long as the submission it was made for,
# and KeepReviewDecisions puts its points back after a regrade (grader/grading/released.py).

# Feedback (`nbgrader generate_feedback`, run by `python -m grader.feedback`) says what failed
# and why, and nothing more: hidden regions are cut out of the sources (their outputs were
# written student-safe when graded), the graders' sidecars (i1_*.json) are never copied beside
# a student's notebook, a cell still to be graded by hand says "not graded yet", not 0, and a
# held grade says it is under review and why, then what was decided (ReviewNote).
c.GenerateFeedback.preprocessors = [
    GetGrades,
    StudentFeedback,
    NotGradedYet,
    ReviewNote,
    CSSHTMLHeaderPreprocessor,
]
# Nothing a student wrote runs when a feedback page is opened: their markdown and HTML outputs
# are sanitised, their scripts and widgets left out (grader/grading/inert_html.py).
c.GenerateFeedback.exporter_class = InertHTMLExporter
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "i1_*.json"]
# Feedback pages are whole in themselves, to read offline or upload to an LMS: nbgrader's
# feedback template loads MathJax from a CDN, and grader/grading/templates/feedback/, searched
# before nbgrader's own templates, replaces that macro with one that loads nothing (math shows
# as its TeX source; the course's notebook has none). Its CSS is inlined already.
c.HTMLExporter.extra_template_basedirs = [
    str(files("grader.grading") / "templates"),
    str(files("nbgrader") / "server_extensions" / "formgrader" / "templates"),
]

# A grading log per student, grading_log/<assignment>/<student>.log and .json: what ran, the
# cells put back, and why a submission could not be graded (grader/grading/grading_log.py).
c.Autograde.pre_convert_hook, c.Autograde.post_convert_hook = convert_hooks(ROOT)
# Submissions are regular files: a symlink, FIFO, socket or device anywhere in a submission
# folder (the notebook and the folders included) makes the student ungradable, with the cause
# in their grading log, before nbgrader copies anything (grader/grading/submission_files.py).
refuse_irregular_submissions()
# A course folder made by `python -m grader.make_course` records the checkout and version that
# grade it (i1_course.json): autograde refuses to grade it with another (grader/course_tie.py).
refuse_other_code()
# A regrade starts from nothing: the student's earlier scores, late penalty, submission time
# and feedback go before it runs, so that a resubmission that cannot be graded leaves no old
# score behind (grader/grading/fresh_start.py; hand grades stay, as above).
start_regrades_fresh()

# Grades (issue 11): `nbgrader export` writes each submission's status (graded; ungradable,
# with the cause from its grading log; missing) and leaves the score empty unless it was
# graded, so means never count an ungradable notebook as zero (grader/export.py). Late work
# loses 10 % of its raw score per started day after 15 minutes' grace, never below 0
# (grader/grading/late.py; docs/instructor-guide.md, "Late submissions"); the due date is the
# gradebook's.
c.ExportApp.plugin_class = "grader.export.StatusCsvExport"
c.AssignLatePenalties.plugin_class = "grader.grading.late.DailyLatePenalty"
c.DailyLatePenalty.percent_per_day = 10.0
c.DailyLatePenalty.grace_minutes = 15.0

# GPU timing (issue 13): a correct kernel at most `limit` times the reference's median time
# (the ratio of medians, timed interleaved on the hidden shapes) earns `fraction` of the timing
# cell's points; slower than every band, `timing_slowest_fraction`; a wrong one 0. The trusted
# side scores each shape from its ratio with these bands, and each timing record keeps the bands
# it was scored with. A change applies from the next autograde (`grader.parallel --student S`
# for one student): the timing is measured again there, so points near a band's edge can move
# with the run's noise (0.3 % between H200 runs), and grades already exported keep the old bands.
c.GradeHiddenCells.timing_bands = [(1.10, 1.0), (1.5, 0.75), (2.5, 0.5), (5.0, 0.25)]
c.GradeHiddenCells.timing_slowest_fraction = 0.1

# Collecting from the LMS (`python -m grader.collect i1_strided_softmax`): keep every LMS
# download (a zip of every submission) in downloaded/i1_strided_softmax/archive/ and its
# submissions export (the times) in downloaded/i1_strided_softmax/times/; collect copies each
# student's latest notebook to submitted/<student>/i1_strided_softmax/ (grader/collect.py).
# Canvas names each file <name>_[late_]<user id>_<number>_<your file name>[-<n>].ipynb (-<n>
# for a resubmission): the Canvas user id becomes the nbgrader student id, so import the
# roster with those ids (`nbgrader db student import roster.csv`, a column `id`), and Canvas's
# `late_` marker is kept as evidence (the group `late`). For Moodle or Blackboard, change this
# pattern (nbgrader's FileNameCollectorPlugin.named_regexp: student_id and file_id).
c.FileNameCollectorPlugin.named_regexp = (
    r".*/[^/_]+_(?P<late>late_)?(?P<student_id>\d+)_\d+_(?P<file_id>[^/]+?)(?:-\d+)?\.ipynb$"
)
