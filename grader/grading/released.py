"""A review decision's points in the gradebook, kept across regrades of the same submission.

nbgrader has no place for "the grade less a penalty", so a decision's points go into the
grades' `extra_credit`, which nbgrader adds to each cell's score and the notebook's total:
its totals, formgrader, the feedback's scores and the export all count them. They are spread
so that no cell leaves 0 to its points: a penalty takes from the held cells first (the test
cells the holds name), then from the others in order; an award gives back what the cells of
a replay hold lost. Only autograded cells take them: those graded by hand are the hand
grader's, and those whose extra credit is the course's own (`AwardExtraCredit`) are left
alone. The reason goes into the nbgrader comment of the first held cell that has one (a
solution cell; nbgrader's feedback shows it under that cell), after what autograde wrote there.

What a decision added is kept in the grading record (`GradingRecord.adjusted`), so that a new
decision replaces it. A regrade starts from nothing (`grader.grading.fresh_start` clears extra
credit and automatic comments, and the grading record is new); `KeepReviewDecisions`, in
autograde, then puts back a decision still in force (`grader.grading.decisions`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from nbformat import NotebookNode
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor

from grader.grading.decisions import (
    AWARD,
    PENALTY,
    REPLAY,
    Decision,
    Review,
    ReviewError,
    review_of_record,
)
from grader.grading.grading_log import Hold, course_root, log_for

MARK = "Reviewed by your instructor:"
"""Where the review's words start in a comment; what comes before is autograde's."""
EPSILON = 1e-9


def key_of(grade) -> str:
    """A grade's key in `GradingRecord.adjusted`: `notebook:cell`."""
    return f"{grade.notebook.name}:{grade.name}"


def autograded_score(grade) -> float | None:
    """An autograded cell's score as nbgrader computes it (`Grade.score`), from the values
    in memory; None for a cell nothing autograded or a person graded (a hand grade is the
    hand grader's, and may change after the review)."""
    if grade.auto_score is None or grade.manual_score is not None:
        return None
    return float(grade.auto_score) + float(grade.extra_credit or 0.0)


def held_cells(holds: Sequence[Hold], verdict: str) -> list[str] | None:
    """The test cells a decision's points go to first, in order: for a penalty every hold's,
    for an award the replay holds' (None: any cell, a replay hold of the whole grade)."""
    chosen = [h for h in holds if verdict != AWARD or h.source == REPLAY]
    if any(not h.cells for h in chosen) and verdict == AWARD:
        return None
    return list(dict.fromkeys(cell for h in chosen for cell in h.cells))


def spread(
    decision: Decision,
    grades: dict[str, tuple[float, float]],
    first: list[str] | None,
    clamp: bool = False,
) -> dict[str, float]:
    """The points to add to each cell (`notebook:cell` -> (score, points)) for `decision`, a
    penalty from the `first` cells then the others (by name), an award to the `first` cells
    only; when the score (or the points lost) cannot hold it, ReviewError, or with `clamp` as
    much as it holds."""
    if not decision.delta:
        return {}
    cell = {key: key.split(":", 1)[1] for key in grades}
    if decision.verdict == PENALTY:
        room = {key: score for key, (score, _) in grades.items()}
    else:
        room = {k: most - s for k, (s, most) in grades.items() if first is None or cell[k] in first}
    rank = {name: i for i, name in enumerate(first or [])}
    order = sorted(room, key=lambda k: (rank.get(cell[k], len(rank)), k))
    available = sum(room.values())
    if decision.points > available + EPSILON and not clamp:
        raise ReviewError(_too_many(decision, available, order))
    added, left = {}, min(decision.points, available)
    for key in order:
        take = min(room[key], left)
        if take > EPSILON:
            added[key] = round(take if decision.verdict == AWARD else -take, 6)
            left -= take
    return added


def _too_many(decision: Decision, available: float, cells: list[str]) -> str:
    """Why a decision's points do not fit, and what would."""
    flag = f"--{decision.verdict} {available:g}"
    if decision.verdict == PENALTY:
        return (
            f"a penalty of {decision.points:g} points is larger than the autograded score "
            f"({available:g} points): give {flag} or less"
        )
    where = ", ".join(key.split(":", 1)[1] for key in cells) or "none"
    return (
        f"an award of {decision.points:g} points is more than the held cells lost "
        f"({available:g} points, in {where}): give {flag} or less"
    )


def apply_decision(
    submission,
    review: Review,
    extra: Collection[str],
    before: dict[str, float],
    clamp: bool = False,
) -> dict[str, float]:
    """Replace, in the gradebook `submission` (nbgrader's), the points `before` (what an
    earlier decision added, as the grading record keeps them) by those of the decision in
    force, and its reason in a comment; the points added per cell. `extra`: the cells whose
    extra credit is the course's own. Points the scores cannot hold raise ReviewError, with
    nothing changed, or with `clamp` are cut to what they hold."""
    grades = {key_of(g): g for nb in submission.notebooks for g in nb.grades}
    base = {}
    for key, grade in grades.items():
        score = autograded_score(grade)
        if grade.name not in extra and score is not None:
            base[key] = (score - before.get(key, 0.0), float(grade.max_score))
    decision = review.decision
    added = {}
    if decision is not None:
        added = spread(decision, base, held_cells(review.holds, decision.verdict), clamp)
    for key in set(before) | set(added):
        if key in grades:
            _add(grades[key], added.get(key, 0.0) - before.get(key, 0.0))
    _comment(submission, review)
    return added


def _add(grade, points: float) -> None:
    total = float(grade.extra_credit or 0.0) + points
    grade.extra_credit = None if abs(total) < EPSILON else round(total, 6)


def _comment(submission, review: Review) -> None:
    """The decision's words in the comment of the first held cell that has one, after
    autograde's own; every other comment loses any review words an earlier decision left."""
    comments = {c.name: c for nb in submission.notebooks for c in nb.comments}
    for comment in comments.values():
        comment.auto_comment = _without_review(comment.auto_comment)
    decision = review.decision
    target = next((comments[h.cell] for h in review.holds if h.cell in comments), None)
    if decision is None or target is None:
        return
    words = f"{MARK} {decision.what}. {decision.reason}"
    target.auto_comment = "\n\n".join(p for p in (target.auto_comment, words) if p)


def _without_review(text: str | None) -> str | None:
    kept = (text or "").split(MARK)[0].rstrip()
    return kept or None


class KeepReviewDecisions(NbGraderPreprocessor):
    """In autograde, after the scores and extra credit are saved: put back the points and
    reason of a review decision still in force for this submission, and log it; log a
    decision no longer in force."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        log = log_for(self.config, resources)
        if log is None:
            return nb, resources
        review = review_of_record(course_root(self.config), log.record)
        if review.decision is None:
            if review.held and review.earlier is not None:
                log.say(f"held again: {review.earlier_words()}")
            return nb, resources
        info = resources["nbgrader"]
        extra = set(self.config.AwardExtraCredit.get("points", {}))
        with Gradebook(info["db_url"]) as gradebook:
            submission = gradebook.find_submission(info["assignment"], info["student"])
            # clamped: a regrade's timing may score a little less than the one decided on
            added = apply_decision(submission, review, extra, log.record.adjusted, clamp=True)
            gradebook.db.commit()
        kept = abs(sum(added.values()))
        cut = ""
        if kept < review.decision.points - EPSILON:
            cut = f" ({kept:g} points of it: all the new scores hold)"
        log.reviewed(added, f"review decision kept (the same submission): {review.decision}{cut}")
        return nb, resources
