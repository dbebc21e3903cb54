"""Review held grades: read the evidence, then release each grade or change it, with a reason.

    python -m grader.review i1_strided_softmax [--course PATH]              # every held grade
    python -m grader.review i1_strided_softmax --student S                  # one student's
    python -m grader.review i1_strided_softmax --student S --accept --reason TEXT
    python -m grader.review i1_strided_softmax --student S --penalty P --reason TEXT
    python -m grader.review i1_strided_softmax --student S --award P --reason TEXT

A grade is held when its grading found something a person must read (`grader.grading.
grading_log.Hold`): the source screen's reading of a line, or a kernel launch the clean room
could not replay. Its points are computed and kept, not released (`nbgrader export` says
`review`). For each held grade this prints the evidence: every hold with its lines in context
from the graded notebook (control characters shown as escapes), the values' verdicts (each
cell's score in the gradebook) and the hints the checks recorded (`i1_hints.json`). A decision
(`--accept`: release the computed grade; `--penalty P`; `--award P`, for cells a launch that
could not be replayed kept from passing) needs a `--reason`, which the student reads in their
feedback. It goes into the gradebook (`grader.grading.released`) and the course's `reviews/`
(`grader.grading.decisions`), lasts while the submission is unchanged, regrades included, and
replaces an earlier decision on the same submission. Then run `python -m grader.feedback` and
`nbgrader export` again.

Exit status: 0 done, 2 refused or a usage error.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import nbformat

from grader.course_folder import add_course_option, not_a_course
from grader.gradebook import GradebookError, gradebook_url, open_gradebook
from grader.grading.decisions import (
    ACCEPT,
    AWARD,
    PENALTY,
    REPLAY,
    Review,
    ReviewError,
    add_decision,
    decided_now,
    review_of_record,
    visible,
)
from grader.grading.grading_log import GradingLog, Hold, read_record
from learning.workshops.checking.sidecars import RecordError

CONTEXT_LINES = 2
"""Lines shown before and after a hold's line."""
HEAD_LINES = 5
"""Lines shown of a hold's cell when it names no line."""


def source_lines(root: Path, student: str, assignment: str, notebooks: list[str], hold: Hold):
    """The source of the hold's cell in the student's graded notebook, as lines (None when
    it is not there): the cell with that grade id, or for `#N` the N-th cell."""
    for name in notebooks:
        path = root / "autograded" / student / assignment / f"{name}.ipynb"
        try:
            cells = nbformat.read(path, as_version=4).cells
        except (OSError, ValueError):
            continue
        if hold.cell.startswith("#") and hold.cell[1:].isdigit():
            index = int(hold.cell[1:]) - 1
            found = cells[index] if 0 <= index < len(cells) else None
        else:
            ids = (c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in cells)
            found = next((c for c, i in zip(cells, ids, strict=True) if i == hold.cell), None)
        if found is not None:
            return found.source.splitlines()
    return None


def in_context(lines: list[str] | None, line: int) -> list[str]:
    """The hold's line with CONTEXT_LINES around it, numbered, the line marked with `>`;
    control characters made visible."""
    if lines is None:
        return ["      (the cell is not in the graded notebook)"]
    if line:
        first, last = max(1, line - CONTEXT_LINES), min(len(lines), line + CONTEXT_LINES)
    else:
        first, last = 1, min(len(lines), HEAD_LINES)
    width = len(str(last))
    return [
        f"    {'>' if n == line else ' '} {n:>{width}} | {visible(lines[n - 1])}"
        for n in range(first, last + 1)
    ]


def verdicts(submission, adjusted: dict[str, float], order: list[str]) -> str:
    """Each cell's score in the gradebook, in notebook order, with a review's points named."""
    rank = {name: i for i, name in enumerate(order)}
    grades = sorted(
        (g for nb in submission.notebooks for g in nb.grades),
        key=lambda g: (rank.get(g.name, len(rank)), g.name),
    )
    parts = []
    for grade in grades:
        if grade.auto_score is None and grade.manual_score is None:
            parts.append(f"{grade.name} -/{grade.max_score:g}")
            continue
        review = adjusted.get(f"{grade.notebook.name}:{grade.name}")
        note = f" (review {review:+g})" if review else ""
        parts.append(f"{grade.name} {float(grade.score):g}/{grade.max_score:g}{note}")
    return ", ".join(parts)


def hint_lines(folder: Path) -> list[str]:
    """The hint sidecar beside the graded notebook, a line per test: its status, how many
    cases failed, the hints."""
    from learning.workshops.checking.sidecars import (
        HINTS_SIDECAR,
        RecordError,
        RecordMissing,
        load_hints,
    )

    try:
        record = load_hints(folder / HINTS_SIDECAR)
    except RecordMissing:
        return [f"  hints: no {HINTS_SIDECAR} beside the graded notebook"]
    except RecordError as exc:
        return [f"  hints: {HINTS_SIDECAR} unreadable: {exc.reason}"]
    lines = []
    for test, outcome in record.tests.items():
        failed = f", {len(outcome.failed)} cases failed" if outcome.failed else ""
        hints = f" [{', '.join(outcome.hints)}]" if outcome.hints else ""
        lines.append(f"    {visible(test)}: {outcome.status}{failed}{visible(hints)}")
    return ["  hints (i1_hints.json):", *lines] if lines else ["  hints: none recorded"]


def cell_order(root: Path, student: str, assignment: str, notebooks: list[str]) -> list[str]:
    """The grade ids of the graded notebooks, in notebook order."""
    order = []
    for name in notebooks:
        path = root / "autograded" / student / assignment / f"{name}.ipynb"
        try:
            cells = nbformat.read(path, as_version=4).cells
        except (OSError, ValueError):
            continue
        order += [c.metadata.get("nbgrader", {}).get("grade_id", "") for c in cells]
    return order


def evidence(root: Path, assignment: str, student: str, submission, review: Review) -> list[str]:
    """What a reviewer reads about one student's grade: where it stands, each hold in
    context, the values' verdicts, the hints, and how to decide."""
    record = read_record(root, assignment, student)
    adjusted = record.adjusted if record else {}
    notebooks = [nb.name for nb in submission.notebooks]
    computed = float(submission.score) - sum(adjusted.values())
    most = float(submission.max_score)
    if review.held:
        head = f"{student}: held for review, {computed:g} of {most:g} points computed, not released"
    elif review.decision is not None:
        head = f"{student}: {review.words()}; released {float(submission.score):g} of {most:g}"
    else:
        head = f"{student}: not held; {computed:g} of {most:g} points, released"
    lines = [head]
    if review.held and (review.earlier is not None or review.unreadable):
        lines.append(f"  {review.words()}")
    for number, hold in enumerate(review.holds, 1):
        cells = f"; cells {', '.join(hold.cells)}" if hold.cells else "; the whole grade"
        lines.append(f"  hold {number} ({hold.source}{visible(cells)}): {visible(str(hold))}")
        found = source_lines(root, student, assignment, notebooks, hold)
        lines += in_context(found, hold.line)
    order = cell_order(root, student, assignment, notebooks)
    lines.append(f"  values' verdicts (gradebook): {verdicts(submission, adjusted, order)}")
    lines += hint_lines(root / "autograded" / student / assignment)
    if review.holds:
        lines += decide_lines(root, assignment, student, review)
    return lines


def decide_lines(root: Path, assignment: str, student: str, review: Review) -> list[str]:
    """The commands that decide this student's grade."""
    command = f"python -m grader.review {assignment} --course {shlex.quote(str(root))}"
    command += f" --student {shlex.quote(student)}"
    options = ["--accept", "--penalty P"]
    if any(h.source == REPLAY for h in review.holds):
        options.append("--award P")
    return [f"  decide: {command} {option} --reason TEXT" for option in options]


def _graded_submission(gradebook, root: Path, assignment: str, student: str):
    """The student's submission, graded and current; ReviewError saying why not."""
    from nbgrader.api import MissingEntry

    from grader.outcome import GRADED, submission_outcome

    if student not in {s.id for s in gradebook.students}:
        raise ReviewError(
            f"no student {student!r} in the gradebook: check the id "
            f"(python -m grader.review {assignment} lists the held grades)"
        )
    try:
        submission = gradebook.find_submission(assignment, student)
    except MissingEntry:
        raise ReviewError(f"{student} has no graded submission of {assignment}") from None
    folder = root / "autograded" / student / assignment
    names = [nb.name for nb in submission.notebooks]
    status, cause = submission_outcome(root, assignment, student, folder, names)
    if status != GRADED:
        raise ReviewError(
            f"{student}'s latest submission is {status} ({cause}): there is no grade to review"
        )
    return submission


def held_evidence(root: Path, assignment: str) -> list[list[str]]:
    """The evidence of every held grade of a graded, current submission, by student."""
    from nbgrader.api import MissingEntry

    from grader.outcome import GRADED, submission_outcome

    found = []
    with open_gradebook(gradebook_url(root)) as gradebook:
        for student in gradebook.students:
            record = read_record(root, assignment, student.id)
            if record is None or not record.holds:
                continue
            review = review_of_record(root, record)
            try:
                submission = gradebook.find_submission(assignment, student.id)
            except MissingEntry:
                continue
            folder = root / "autograded" / student.id / assignment
            names = [nb.name for nb in submission.notebooks]
            current = submission_outcome(root, assignment, student.id, folder, names)[0] == GRADED
            if review.held and current:
                found.append(evidence(root, assignment, student.id, submission, review))
    return found


def show(root: Path, assignment: str, student: str) -> list[str]:
    """One student's evidence, held or not."""
    with open_gradebook(gradebook_url(root)) as gradebook:
        submission = _graded_submission(gradebook, root, assignment, student)
        record = read_record(root, assignment, student)
        review = review_of_record(root, record) if record else Review()
        return evidence(root, assignment, student, submission, review)


def decide(
    root: Path, assignment: str, student: str, verdict: str, points: float, reason: str
) -> str:
    """Decide one held grade; the line that says what was released. ReviewError if refused,
    with nothing changed."""
    from grader.grading.extra_credit import configured_points
    from grader.grading.late import course_late_plugin, refresh_penalties
    from grader.grading.released import apply_decision

    if not reason.strip():
        raise ReviewError("a decision needs --reason TEXT: the student reads it in their feedback")
    if verdict != ACCEPT and not points > 0:
        raise ReviewError(f"--{verdict} {points:g}: give a number of points above 0")
    with open_gradebook(gradebook_url(root)) as gradebook:
        submission = _graded_submission(gradebook, root, assignment, student)
        record = read_record(root, assignment, student)
        review = review_of_record(root, record) if record else Review()
        _check_holds(review, verdict, assignment, student)
        decision = decided_now(record, verdict, points if verdict != ACCEPT else 0.0, reason)
        decided = Review(review.holds, decision, submission=record.submission)
        computed = float(submission.score) - sum(record.adjusted.values())
        extra = set(configured_points(root))
        added = apply_decision(submission, decided, extra, record.adjusted)
        gradebook.db.commit()
        refresh_penalties(submission, course_late_plugin(root))
        gradebook.db.commit()
        released, most = float(submission.score), float(submission.max_score)
    GradingLog(root, assignment, student).reviewed(added, f"reviewed: {decision}")
    add_decision(root, assignment, student, decision)
    return (
        f"{student}: {decision.what}; {released:g} of {most:g} points released "
        f"(computed {computed:g}). Next: python -m grader.feedback {assignment}, then "
        "nbgrader export"
    )


def _check_holds(review: Review, verdict: str, assignment: str, student: str) -> None:
    """ReviewError unless the grade has holds, and an award a replay hold."""
    if not review.holds:
        raise ReviewError(
            f"{student}'s grade is not held: there is nothing to decide "
            f"(python -m grader.review {assignment} lists the held grades)"
        )
    if verdict == AWARD and not any(h.source == REPLAY for h in review.holds):
        raise ReviewError(
            f"--award is for cells a kernel launch that could not be replayed kept from "
            f"passing, and none of {student}'s holds is one: --accept, or --penalty P"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.review", description=__doc__.splitlines()[0]
    )
    parser.add_argument("assignment", help="the assignment, e.g. i1_strided_softmax")
    add_course_option(parser)
    parser.add_argument("--student", help="show, or decide, this student's grade")
    verdicts = parser.add_mutually_exclusive_group()
    verdicts.add_argument("--accept", action="store_true", help="release the computed grade")
    verdicts.add_argument("--penalty", type=float, metavar="P", help="take P points")
    verdicts.add_argument(
        "--award", type=float, metavar="P", help="give P points a replay hold's cells lost"
    )
    parser.add_argument("--reason", default="", help="why, in words the student reads")
    args = parser.parse_args(argv)
    root = Path(args.course).resolve()
    problem = not_a_course(root)
    if problem:
        print(f"review: {problem}", file=sys.stderr)
        return 2
    verdict = ACCEPT if args.accept else PENALTY if args.penalty is not None else None
    verdict = AWARD if args.award is not None else verdict
    if verdict and not args.student:
        parser.error("a decision needs --student")
    if args.reason and not verdict:
        parser.error("--reason goes with a decision: --accept, --penalty P or --award P")
    try:
        if verdict:
            points = {ACCEPT: 0.0, PENALTY: args.penalty, AWARD: args.award}[verdict]
            print(decide(root, args.assignment, args.student, verdict, points, args.reason))
        elif args.student:
            print("\n".join(show(root, args.assignment, args.student)))
        else:
            _list(root, args.assignment)
    except (ReviewError, GradebookError, RecordError) as exc:
        print(f"review: {exc}", file=sys.stderr)
        return 2
    return 0


def _list(root: Path, assignment: str) -> None:
    held = held_evidence(root, assignment)
    for lines in held:
        print("\n".join(lines) + "\n")
    if not held:
        print(f"No grade of {assignment} is held for review.")
    else:
        print(f"{len(held)} grade{'s' * (len(held) != 1)} held for review, not released")


if __name__ == "__main__":
    sys.exit(main())
