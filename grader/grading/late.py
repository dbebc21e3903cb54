"""The course's late policy, as an nbgrader late-submission plugin.

Late work loses `percent_per_day` percent of its raw score for every day, or part of a day,
after the due date plus `grace_minutes`, and never goes below zero. With the defaults (10 %,
15 minutes) a submission 10 minutes late loses nothing, one 16.5 hours late loses 10 %, one
24 h 20 min late loses 20 %, and one over 9 days and 15 minutes late scores 0.

nbgrader's `AssignLatePenalties` (in the autograde pipeline) calls the plugin with each
notebook's score and the submission's seconds past its due date (the gradebook's due date,
plus the student's extension: `grader.grading.extensions`, which the course's extensions file
gives the gradebook before autograde reads it) and stores the penalty in the gradebook;
`grader.export` applies the same plugin again to the current score, so manual grades added
later are penalised alike, and `refresh_penalties` stores that penalty again
(`grader.handgrade` after each hand grade, `grader.extension` after an extension,
`grader.feedback` before feedback is written), so that feedback shows it too.
Configured in `nbgrader_config.py`:

    c.AssignLatePenalties.plugin_class = "grader.grading.late.DailyLatePenalty"
    c.DailyLatePenalty.percent_per_day = 10.0
    c.DailyLatePenalty.grace_minutes = 15.0
"""

from __future__ import annotations

import math
from pathlib import Path

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Float

DAY = 24 * 60 * 60


class DailyLatePenalty(LateSubmissionPlugin):
    """A percentage of the raw score per started day late, after a grace period."""

    percent_per_day = Float(
        10.0,
        min=0.0,
        max=100.0,
        help="Percent of the raw score deducted per started day late (after the grace period).",
    ).tag(config=True)

    grace_minutes = Float(
        15.0,
        min=0.0,
        help="Minutes after the due date that cost nothing; days late count from their end.",
    ).tag(config=True)

    def days_late(self, seconds_late: float) -> int:
        """Started days past the due date plus the grace period (0 within it)."""
        over = float(seconds_late or 0.0) - self.grace_minutes * 60
        return math.ceil(over / DAY) if over > 0 else 0

    def fraction(self, seconds_late: float) -> float:
        """The share of the raw score deducted, in [0, 1]."""
        return min(1.0, self.days_late(seconds_late) * self.percent_per_day / 100)

    def late_submission_penalty(
        self, student_id: str, score: float, total_seconds_late: float
    ) -> float:
        """Points deducted from `score`: at most the score itself, never negative."""
        score = max(0.0, float(score or 0.0))
        days = self.days_late(total_seconds_late)
        penalty = round(score * self.fraction(total_seconds_late), 6)
        self.log.info(
            "Late policy: %s is %.0f s late, %d started day(s) after %g min grace, "
            "%g %% per day: penalty %g of %g",
            student_id,
            total_seconds_late,
            days,
            self.grace_minutes,
            self.percent_per_day,
            penalty,
            score,
        )
        return min(penalty, score)


def course_late_plugin(root: Path):
    """The late-submission plugin of the course at `root`, configured as its
    nbgrader_config.py configures autograde's `AssignLatePenalties`."""
    from nbgrader.preprocessors import AssignLatePenalties
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    assigner = AssignLatePenalties(config=config)
    return assigner.plugin_class(parent=assigner)


def policy_applies(plugin) -> bool:
    """Whether late work can lose points under `plugin`: nbgrader's default plugin and a
    `DailyLatePenalty` of 0 % never deduct anything."""
    from nbgrader.plugins import LateSubmissionPlugin

    if isinstance(plugin, DailyLatePenalty):
        return plugin.percent_per_day > 0
    return type(plugin) is not LateSubmissionPlugin


def notebook_penalty(plugin, student: str, score: float, seconds_late: float) -> float:
    """One notebook's penalty as nbgrader's AssignLatePenalties computes and bounds it."""
    if seconds_late <= 0:
        return 0.0
    penalty = plugin.late_submission_penalty(student, score, seconds_late)
    return 0.0 if penalty is None else min(max(0.0, float(penalty)), score)


def refresh_penalties(submission, plugin) -> None:
    """Store on each notebook of an nbgrader `submission` the penalty `plugin` gives its
    current score, as autograde stores it (None when on time); the caller commits."""
    seconds = float(submission.total_seconds_late or 0.0)
    for notebook in submission.notebooks:
        notebook.late_submission_penalty = (
            notebook_penalty(plugin, submission.student.id, float(notebook.score), seconds)
            if seconds > 0
            else None
        )
