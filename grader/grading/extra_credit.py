"""Extra credit for the optional exercises, scored by `nbgrader autograde`.

nbgrader's own scores count toward the assignment's maximum, so an optional exercise worth
points would cost every student who skips it. Its graded cells therefore carry 0 points, and
`AwardExtraCredit`, after `SaveAutoGrades`, writes the configured points into the grade's
`extra_credit` when the cell passed (no error output, as nbgrader judges a code cell) and 0
when it failed. nbgrader adds `extra_credit` to the cell's score and the notebook's total,
never to the maximum.
"""

from __future__ import annotations

from pathlib import Path

from nbformat import NotebookNode
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Dict, Float, Unicode
from traitlets.config.loader import PyFileConfigLoader


class AwardExtraCredit(NbGraderPreprocessor):
    """Write each passed extra-credit cell's points to its grade's `extra_credit`."""

    points = Dict(
        key_trait=Unicode(),
        value_trait=Float(),
        default_value={},
        help="Extra-credit points by grade_id; each such cell carries 0 points of its own.",
    ).tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        found = {
            cell.metadata["nbgrader"]["grade_id"]: passed(cell)
            for cell in nb.cells
            if cell.metadata.get("nbgrader", {}).get("grade_id") in self.points
        }
        if not found:
            return nb, resources
        ids = resources["nbgrader"]
        with Gradebook(ids["db_url"]) as gradebook:
            for grade_id, ok in found.items():
                grade = gradebook.find_grade(
                    grade_id, ids["notebook"], ids["assignment"], ids["student"]
                )
                grade.extra_credit = self.points[grade_id] if ok else 0.0
            gradebook.db.commit()
        return nb, resources


def passed(cell: NotebookNode) -> bool:
    """Whether an autograded code cell passed: no error among its outputs."""
    return not any(output.get("output_type") == "error" for output in cell.get("outputs", []))


def configured_points(root: Path) -> dict[str, float]:
    """The extra credit per grade_id that the course at `root` configures ({} without a
    config: the callers say what is missing)."""
    if not (root / "nbgrader_config.py").is_file():
        return {}
    config = PyFileConfigLoader("nbgrader_config.py", str(root)).load_config()
    return dict(config.AwardExtraCredit.get("points", {}))
