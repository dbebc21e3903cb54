"""Cells graded by hand (the prediction, 2 points): a hand grade lasts exactly as long as the
answer it graded, and until there is one the student reads "not graded yet", not 0.

nbgrader stores a hand grade as the grade's `manual_score` (set in formgrader, or with
`python -m grader.handgrade`); until then the cell has no score at all, and nbgrader's
feedback shows it as 0 of its points. Two preprocessors:

- `KeepHandGrades`, in autograde after `SaveAutoGrades`: each hand-graded answer's
  fingerprint is kept in the student's grading record (`grader.grading.grading_log`). A
  regrade of the same answer keeps its hand grade (and no longer asks for review); a
  resubmission whose answer changed loses it (its score and comment, which the log keeps),
  so the new answer is graded afresh.
- `NotGradedYet`, in generate_feedback after `GetGrades`: a cell with no grade yet loses its
  "Score: 0 / 2" heading and says "not graded yet", and a note first in the notebook says
  how many points are still to be graded, so that the score at the top reads as what it is.
"""

from __future__ import annotations

import hashlib

from nbformat import NotebookNode, v4
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor
from nbgrader.utils import determine_grade, is_grade

from grader.grading.grading_log import log_for

NOT_GRADED_YET = "Not graded yet"
CELL_NOTE = (
    f"**{NOT_GRADED_YET}.** This answer is graded by hand; its {{points:g}} points are not in "
    "your score until it is."
)
NOTEBOOK_NOTE = (
    f"**{NOT_GRADED_YET}:** {{cells}} ({{points:g}} of the {{most:g}} points) "
    "{verb} graded by hand and not graded yet. The score above counts only what has been "
    "graded so far."
)


def graded_by_hand(cell: NotebookNode) -> bool:
    """Whether nbgrader leaves this cell's score to a person: a grade cell with an answer
    to read (a solution cell the student changed, a written response)."""
    return is_grade(cell) and determine_grade(cell)[0] is None


def answer_hash(cell: NotebookNode) -> str:
    """The fingerprint of an answer as a person would read it (trailing space ignored)."""
    text = "\n".join(line.rstrip() for line in cell.source.strip().splitlines())
    return hashlib.sha256(text.encode()).hexdigest()


class KeepHandGrades(NbGraderPreprocessor):
    """Keep each hand grade while its answer is unchanged; clear it when the answer changed."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        info = resources["nbgrader"]
        log = log_for(self.config, resources)
        current = {
            f"{info['notebook']}:{cell.metadata['nbgrader']['grade_id']}": answer_hash(cell)
            for cell in nb.cells
            if graded_by_hand(cell)
        }
        if not current:
            return nb, resources
        before = dict(log.record.answers) if log else {}
        with Gradebook(info["db_url"]) as gradebook:
            for key, digest in current.items():
                grade_id = key.split(":", 1)[1]
                grade = gradebook.find_grade(
                    grade_id, info["notebook"], info["assignment"], info["student"]
                )
                comment = gradebook.find_comment(
                    grade_id, info["notebook"], info["assignment"], info["student"]
                )
                said = _judge(grade, comment, before.get(key), digest)
                if said and log:
                    log.say(f"{grade_id}: {said}")
            gradebook.db.commit()
        if log:
            log.answered({**before, **current})
        return nb, resources


def _judge(grade, comment, before: str | None, now: str) -> str:
    """Keep or clear one hand grade; what was done, for the log ("" when nothing)."""
    if grade.manual_score is None:
        grade.needs_manual_grade = True
        return ""
    if before == now:
        grade.needs_manual_grade = False
        return f"answer unchanged: its hand grade ({grade.manual_score:g}) is kept"
    if before is None:  # graded before answers were fingerprinted: nbgrader's review flag
        grade.needs_manual_grade = True
        return "hand grade kept for review: no record of the answer it graded"
    old, text = grade.manual_score, comment.manual_comment
    grade.manual_score, grade.needs_manual_grade = None, True
    comment.manual_comment = None
    kept = f" (its comment was: {text!r})" if text else ""
    return f"answer changed since it was graded by hand: its grade ({old:g}) is cleared{kept}"


class NotGradedYet(NbGraderPreprocessor):
    """In feedback: a hand-graded cell with no grade says "not graded yet", not 0."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        info = resources["nbgrader"]
        pending = []
        with Gradebook(info["db_url"]) as gradebook:
            for cell in nb.cells:
                if not is_grade(cell):
                    continue
                grade = gradebook.find_grade(
                    cell.metadata["nbgrader"]["grade_id"],
                    info["notebook"],
                    info["assignment"],
                    info["student"],
                )
                if grade.auto_score is None and grade.manual_score is None:
                    pending.append((cell, float(grade.max_score or 0.0)))
        for cell, points in pending:
            cell.metadata["nbgrader"]["grade"] = False  # no "Score: 0 / 2" for it
            note = CELL_NOTE.format(points=points)
            if cell.cell_type == "markdown":
                cell.source = f"{note}\n\n{cell.source}"
            else:
                cell.source = f"# {note.replace('**', '')}\n{cell.source}"
        if pending:
            names = ", ".join(c.metadata["nbgrader"]["grade_id"] for c, _ in pending)
            note = NOTEBOOK_NOTE.format(
                cells=names,
                points=sum(p for _, p in pending),
                most=float(resources["nbgrader"].get("max_score") or 0.0),
                verb="is" if len(pending) == 1 else "are",
            )
            nb.cells.insert(0, v4.new_markdown_cell(note))
        return nb, resources
