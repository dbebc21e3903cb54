"""What a student reads about a held grade: that it is under review and why, then the
decision and its reason.

`ReviewNote`, a preprocessor of `nbgrader generate_feedback` (after `NotGradedYet`), puts one
note first in the feedback's notebook when the student's grading record has holds
(`grader.grading.grading_log.Hold`) or a review decision is in force
(`grader.grading.decisions`). The holds' words come from the grading, whose screen quotes the
student's own code: they are written inert (control characters as escapes, Markdown and HTML
as plain text), so the page shows the bytes, never what they would do.
"""

from __future__ import annotations

import html
import re

from nbformat import NotebookNode, v4
from nbgrader.preprocessors import NbGraderPreprocessor

from grader.grading.decisions import ACCEPT, REPLAY, Review, review_of
from grader.grading.grading_log import Hold, course_root
from grader.terminal import visible

UNDER_REVIEW = "Your grade is under review."
REVIEWED = "Your grade was reviewed."
HELD = (
    "Your notebook was graded, and the scores below are what its tests computed, but they "
    "are not released yet: the grader noticed something in your code that a person reads "
    "before a grade is released. Your instructor then releases the grade as computed, or "
    "changes it, and this page will say what was decided and why. What the grader noticed:"
)
NOTHING_TO_DO = {
    "screen": "Nothing is taken from you for an ordinary line: if it is one, the grade is "
    "released as computed.",
    REPLAY: "A kernel launch the grader could not run again is not counted against you until "
    "your instructor has read your kernel: they can give back the points of the cases it "
    "concerns.",
}
EXPLAIN = "If you want to explain something, write to your instructor."
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|~])")


def inert(text: str) -> str:
    """Student text as Markdown that shows it as written: control characters as escapes,
    HTML escaped, Markdown's punctuation backslashed."""
    return _MARKDOWN.sub(r"\\\1", html.escape(visible(text), quote=False))


def where(hold: Hold) -> str:
    """The cell and line of a hold, for the student: `cell pass3, line 4`, or for a cell
    without a name, its position in the graded notebook."""
    if hold.cell.startswith("#"):
        cell = f"the {_ordinal(hold.cell[1:])} cell of your graded notebook"
    else:
        cell = f"cell {hold.cell}"
    return cell + (f", line {hold.line}" if hold.line else "")


def _ordinal(number: str) -> str:
    if not number.isdigit():
        return number
    n = int(number)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def note(review: Review) -> str:
    """The note first in the feedback: under review and why, or the decision and why; ""
    when the grade was never held."""
    if review.decision is not None:
        decision = review.decision
        if decision.verdict == ACCEPT:
            said = "Your instructor read what the grader noticed and released your grade"
        else:
            said = f"Your instructor decided {decision.what}; the scores below include it"
        return f"**{REVIEWED}** {said}. The reason: {inert(decision.reason)}"
    if not review.held:
        return ""
    lines = [f"**{UNDER_REVIEW}** {HELD}", ""]
    lines += [
        f"- In {inert(where(h))}: {inert(h.text)} (rule {inert(h.rule)})" for h in review.holds
    ]
    if review.earlier is not None:
        lines += ["", "A decision made on an earlier submission of yours does not carry over."]
    sources = dict.fromkeys(h.source for h in review.holds)
    closing = [NOTHING_TO_DO[source] for source in sources if source in NOTHING_TO_DO]
    return "\n".join([*lines, "", " ".join([*closing, EXPLAIN])])


class ReviewNote(NbGraderPreprocessor):
    """In feedback: a note first in the notebook when the grade is held or was reviewed."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        info = resources["nbgrader"]
        review = review_of(course_root(self.config), info["assignment"], info["student"])
        text = note(review)
        if text:
            nb.cells.insert(0, v4.new_markdown_cell(text))
        return nb, resources
