"""Every nbgrader command loads the course's nbgrader_config.py: loading it imports no torch or
triton (about 1.4 s of each command), and it still names the grader's own classes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from learning.workshops.checking.child import child_env

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "triton")

LOAD = f"""
import json, sys
from traitlets.config.loader import PyFileConfigLoader

config = PyFileConfigLoader("nbgrader_config.py", path=".").load_config()
names = lambda classes: [f"{{c.__module__}}.{{c.__qualname__}}" for c in classes]
print(json.dumps({{
    "heavy": [name for name in {HEAVY!r} if name in sys.modules],
    "autograde": names(config.Autograde.autograde_preprocessors),
    "sanitize": names(config.Autograde.sanitize_preprocessors),
    "feedback": names(config.GenerateFeedback.preprocessors),
}}))
"""


def test_loading_the_course_config_imports_no_torch_or_triton(tmp_path):
    """The config loaded as nbgrader loads it, in a fresh process, from a course's copy."""
    shutil.copy(REPO / "nbgrader_config.py", tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", LOAD],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert loaded["heavy"] == []
    assert loaded["autograde"][:3] == [
        "grader.grading.ahead.StartChecksAhead",
        "grader.grading.execute.SandboxedExecute",
        "grader.grading.trusted.GradeHiddenCells",
    ]
    assert "grader.grading.restore.RestoreGradeCells" in loaded["sanitize"]
    assert "grader.grading.feedback.StudentFeedback" in loaded["feedback"]
