"""The late policy (grader.grading.late): a share of the raw score per started day after a grace."""

from __future__ import annotations

from pathlib import Path

import pytest
from traitlets import TraitError
from traitlets.config import Config

from grader.grading.late import DailyLatePenalty

ROOT = Path(__file__).resolve().parents[1]
MINUTE, HOUR, DAY = 60, 3600, 86400


@pytest.mark.parametrize(
    ("seconds_late", "penalty"),
    [
        (1, 0.0),
        (10 * MINUTE, 0.0),
        (15 * MINUTE, 0.0),  # the grace period's last second
        (15 * MINUTE + 1, 2.0),
        (16.5 * HOUR, 2.0),  # the sample cohort's late-solution
        (DAY + 15 * MINUTE, 2.0),
        (DAY + 15 * MINUTE + 1, 4.0),
        (9.5 * DAY, 20.0),
        (30 * DAY, 20.0),  # never below zero
    ],
)
def test_default_policy_is_ten_percent_per_started_day_after_15_minutes(seconds_late, penalty):
    """Does a 20-point notebook lose 2 points per started day after 15 minutes, down to 0?"""
    assert DailyLatePenalty().late_submission_penalty("ada", 20.0, seconds_late) == penalty


def test_knobs_are_config():
    """Do percent_per_day and grace_minutes come from traitlets config?"""
    config = Config()
    config.DailyLatePenalty.percent_per_day = 25.0
    config.DailyLatePenalty.grace_minutes = 0.0
    plugin = DailyLatePenalty(config=config)
    assert plugin.late_submission_penalty("ada", 8.0, 1) == 2.0
    assert plugin.late_submission_penalty("ada", 8.0, 3 * DAY) == 6.0
    assert plugin.late_submission_penalty("ada", 8.0, 5 * DAY) == 8.0


def test_nothing_to_lose_loses_nothing_and_bad_knobs_are_refused():
    """Is a zero score penalised by 0, and a negative percentage or grace refused?"""
    assert DailyLatePenalty().late_submission_penalty("ada", 0.0, 3 * DAY) == 0.0
    with pytest.raises(TraitError):
        DailyLatePenalty(percent_per_day=-5.0)
    with pytest.raises(TraitError):
        DailyLatePenalty(grace_minutes=-1.0)


def test_course_config_installs_both_plugins():
    """Does the course's nbgrader_config.py give autograde's AssignLatePenalties this policy
    (10 %, 15 min) and `nbgrader export` the status exporter?"""
    from nbgrader.apps import ExportApp
    from nbgrader.preprocessors import AssignLatePenalties
    from traitlets.config.loader import PyFileConfigLoader

    from grader.export import StatusCsvExport

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    assigner = AssignLatePenalties(config=config)
    assert assigner.plugin_class is DailyLatePenalty
    plugin = assigner.plugin_class(parent=assigner)
    assert (plugin.percent_per_day, plugin.grace_minutes) == (10.0, 15.0)
    assert ExportApp(config=config).plugin_class is StatusCsvExport


def test_which_policies_can_deduct_points():
    """Is a late policy said to apply for the course's 10 % and another plugin, and not for
    0 % or nbgrader's default plugin, which never deducts (collect then needs no times)?"""
    from nbgrader.plugins import LateSubmissionPlugin

    from grader.grading.late import course_late_plugin, policy_applies

    assert policy_applies(course_late_plugin(ROOT))
    assert not policy_applies(DailyLatePenalty(percent_per_day=0.0))
    assert not policy_applies(LateSubmissionPlugin())

    class Flat(LateSubmissionPlugin):
        pass

    assert policy_applies(Flat())
