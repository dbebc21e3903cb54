"""A regrade starts from nothing: what an earlier grading of the student left behind is
removed before the new one runs, so that the gradebook and the feedback are always about the
latest submission.

nbgrader itself keeps, when a resubmission cannot be graded (a file that is not JSON, a dead
kernel, a refused file): the earlier autograde scores, extra credit and late penalty in the
gradebook, and the earlier feedback in `feedback/` (generate_feedback has nothing new to
write from). It also keeps the earlier submission time when the new submission has no
`timestamp.txt`, and a refused submission keeps the earlier autograded notebook.

`start_regrades_fresh`, called from the course's nbgrader_config.py, wraps nbgrader's
`Autograde.init_destination` (the first step on each student) so that every submission
autograde takes up, and every one it refuses (`grader.grading.submission_files`), first
loses all of that (`forget_previous_grading`). Hand grades stay: whether they still apply is
decided once the new notebook is read (`grader.grading.hand_grading.KeepHandGrades`). So does
the student's extension, which is the submission's row's and not a grading's; and the course's
extensions file gives it to the row before each grading (`grader.grading.extensions`), so that
a first grading, and one into a gradebook made again, honours it too.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path


def read_timestamp(folder: Path):
    """The submission time in `folder`'s `timestamp.txt` as nbgrader reads it (naive UTC), or
    None when there is none or it cannot be read."""
    from nbgrader.utils import parse_utc

    try:
        text = (Path(folder) / "timestamp.txt").read_text().strip()
        return parse_utc(text) if text else None
    except (OSError, ValueError, OverflowError):
        return None


def forget_previous_grading(
    coursedir, assignment: str, student: str, *, autograded: bool = False
) -> None:
    """Remove what an earlier grading of `student`'s `assignment` left: their feedback folder
    (and with `autograded` their autograded folder), and in the gradebook every autograde
    score, extra credit, automatic comment and late penalty; the submission time becomes
    the one in `submitted/` now (none without a `timestamp.txt`). Hand grades are kept."""
    from nbgrader.api import Gradebook, MissingEntry

    folders = [coursedir.feedback_directory]
    if autograded:
        folders.append(coursedir.autograded_directory)
    for step in folders:
        folder = Path(coursedir.format_path(step, student, assignment))
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder)
    submitted = Path(coursedir.format_path(coursedir.submitted_directory, student, assignment))
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        try:
            submission = gradebook.find_submission(assignment, student)
        except MissingEntry:  # never graded: nothing to forget
            return
        submission.timestamp = read_timestamp(submitted)
        for notebook in submission.notebooks:
            notebook.late_submission_penalty = None
            for grade in notebook.grades:
                grade.auto_score = None
                grade.extra_credit = None
                if grade.manual_score is None:
                    grade.needs_manual_grade = False
            for comment in notebook.comments:
                comment.auto_comment = None
        gradebook.db.commit()


def start_regrades_fresh() -> None:
    """Make nbgrader's Autograde forget a student's earlier grading before it grades them
    again or refuses their submission, and give the submission the course's extension for
    them (`honour_extension`). Calling it again changes nothing."""
    from nbgrader.converters import Autograde

    from grader.grading.extensions import honour_extension
    from grader.grading.grading_log import GradingLog, submission_fingerprint
    from grader.grading.submission_files import SubmissionRefused

    original = Autograde.init_destination
    if getattr(original, "_starts_fresh", False):
        return

    @functools.wraps(original)
    def init_destination(self, assignment_id: str, student_id: str) -> bool:
        try:
            taken = original(self, assignment_id, student_id)
        except SubmissionRefused:  # its old autograded notebook would still make feedback
            forget_previous_grading(self.coursedir, assignment_id, student_id, autograded=True)
            folder = Path(self._format_source(assignment_id, student_id))
            log = GradingLog(Path(self.coursedir.root), assignment_id, student_id)
            log.grading(submission_fingerprint(folder))  # this submission, refused
            raise
        if taken and self._sanitizing:
            forget_previous_grading(self.coursedir, assignment_id, student_id)
            honour_extension(self.coursedir, assignment_id, student_id)
        return taken

    init_destination._starts_fresh = True
    Autograde.init_destination = init_destination
