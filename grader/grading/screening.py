"""The source screen at grading: its findings on the notebook being graded, as holds.

The screen (`learning.workshops.screen`, the same the student's `check` runs) reads the code
the checks' children load, in a bounded child process of its own. A finding never costs a
point: each one holds the grade for an instructor's review (`GradingLog.hold`), its points
computed as without it; a notebook the screen could not finish reading within its bounds is
held whole, and the grading goes on.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from nbformat import NotebookNode

from grader.grading.grading_log import Hold
from learning.workshops.screen import Screened, screen_file
from learning.workshops.screen.rules import UNFINISHED

SOURCE = "screen"
"""The `Hold.source` of the screen's holds."""
WHOLE_NOTEBOOK = "(whole notebook)"
"""The `Hold.cell` of a notebook the screen could not finish reading."""


def screen_notebook(nb: NotebookNode) -> Screened:
    """The screen's reading of `nb`, the notebook being graded (written to a scratch file
    as it is, for the child to read)."""
    with tempfile.TemporaryDirectory(prefix="i1-screen-") as folder:
        path = Path(folder) / "submission.ipynb"
        path.write_text(json.dumps(nb), encoding="utf-8")
        return screen_file(path)


def screen_holds(screened: Screened) -> list[Hold]:
    """A hold for each finding (on the whole grade: a line that changes what the checks
    read can change any cell), and one for a reading that could not finish. Findings past
    the screen's first MAX_FINDINGS are counted in `screen_summary`, not held one by one."""
    holds = [
        Hold(SOURCE, f.rule, f.cell, f.line, f"`{f.code}` {f.text}" if f.code else f.text)
        for f in screened.findings
    ]
    if screened.unfinished:
        why = f"the screen could not finish reading: {screened.unfinished}"
        holds.append(Hold(SOURCE, UNFINISHED, WHOLE_NOTEBOOK, 0, why))
    return holds


def screen_summary(screened: Screened) -> str:
    """One line for the grading log: what the screen found, and its seconds."""
    if screened.unfinished:
        said = f"could not finish reading ({screened.unfinished})"
    else:
        count = len(screened.findings) + screened.more
        said = f"{count} finding{'s' * (count != 1)}" if count else "nothing to hold"
    return f"source screen: {said} ({screened.seconds:.1f} s)"
