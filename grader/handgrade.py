"""Grade the hand-graded cells (the prediction) from the command line, or list those waiting.

    python -m grader.handgrade i1_strided_softmax [--course PATH] --list
    python -m grader.handgrade i1_strided_softmax [--course PATH] --student S --cell prediction
                               --points P [--comment TEXT]

nbgrader's formgrader (`jupyter lab` in the course folder, then Nbgrader > Formgrader >
Manual Grading) does the same in a browser; both write the grade's `manual_score` (and
`manual_comment`) in the gradebook. `--list` prints every answer still without a grade, by
student id (numbers by value: 9 before 10), with its text as the student wrote it, control
characters shown as escapes (`grader.terminal`). A grade is refused unless the student's
latest submission is graded (not ungradable, not resubmitted since) and the points are within
the cell's. After it, the submission's late penalty is stored again from the new score
(`grader.grading.late.refresh_penalties`), so that feedback, formgrader and the export agree.
A hand grade lasts as long as the answer it graded (`grader.grading.hand_grading`).

Exit status: 0 done, 2 refused or a usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from grader.course_folder import add_course_option, not_a_course
from grader.gradebook import GradebookError, gradebook_url, open_gradebook
from grader.student_order import student_key
from grader.terminal import visible


class HandGradeError(Exception):
    """The grade was not written: the message says why."""


def hand_cells(gradebook, assignment: str) -> dict[str, tuple[str, float]]:
    """The assignment's cells graded by hand: grade_id -> (notebook, points)."""
    found = {}
    for notebook in gradebook.find_assignment(assignment).notebooks:
        answers = {cell.name for cell in notebook.solution_cells}
        for cell in notebook.grade_cells:
            if cell.name in answers or cell.cell_type == "markdown":
                found[cell.name] = (notebook.name, float(cell.max_score))
    return found


def answer_text(root: Path, student: str, assignment: str, notebook: str, cell: str) -> str:
    """The student's answer in their autograded notebook ("" when it is not there)."""
    path = root / "autograded" / student / assignment / f"{notebook}.ipynb"
    try:
        nb = nbformat.read(path, as_version=4)
    except (OSError, ValueError):
        return ""
    for each in nb.cells:
        if each.get("metadata", {}).get("nbgrader", {}).get("grade_id") == cell:
            return each.source
    return ""


def waiting(root: Path, assignment: str) -> list[tuple[str, str, float, str]]:
    """(student, cell, points, answer) of every hand-graded answer still without a grade,
    of graded submissions only, by student id (`grader.student_order`: 9 before 10)."""
    from nbgrader.api import MissingEntry

    from grader.outcome import GRADED, submission_outcome

    rows = []
    with open_gradebook(gradebook_url(root)) as gradebook:
        cells = hand_cells(gradebook, assignment)
        for student in gradebook.students:
            try:
                submission = gradebook.find_submission(assignment, student.id)
            except MissingEntry:
                continue
            folder = root / "autograded" / student.id / assignment
            names = [nb.name for nb in submission.notebooks]
            if submission_outcome(root, assignment, student.id, folder, names)[0] != GRADED:
                continue
            for name, (notebook, points) in cells.items():
                grade = gradebook.find_grade(name, notebook, assignment, student.id)
                if grade.manual_score is None and grade.auto_score is None:
                    text = answer_text(root, student.id, assignment, notebook, name)
                    rows.append((student.id, name, points, text))
    return sorted(rows, key=lambda row: student_key(row[0]))


def grade(
    root: Path, assignment: str, student: str, cell: str, points: float, comment: str | None
) -> str:
    """Write one hand grade; the line that says what changed. HandGradeError if refused."""
    from nbgrader.api import MissingEntry

    from grader.grading.late import course_late_plugin, refresh_penalties
    from grader.outcome import GRADED, submission_outcome

    with open_gradebook(gradebook_url(root)) as gradebook:
        cells = hand_cells(gradebook, assignment)
        if cell not in cells:
            known = ", ".join(cells) or "none"
            raise HandGradeError(f"{cell!r} is not graded by hand (these are: {known})")
        notebook, most = cells[cell]
        try:
            submission = gradebook.find_submission(assignment, student)
        except MissingEntry:
            raise HandGradeError(f"{student} has no graded submission of {assignment}") from None
        folder = root / "autograded" / student / assignment
        names = [nb.name for nb in submission.notebooks]
        status, cause = submission_outcome(root, assignment, student, folder, names)
        if status != GRADED:
            raise HandGradeError(f"{student}'s latest submission is {status} ({cause})")
        if not 0 <= points <= most:
            raise HandGradeError(f"--points {points:g}: {cell} is worth 0 to {most:g} points")
        found = gradebook.find_grade(cell, notebook, assignment, student)
        before = "not graded yet" if found.manual_score is None else f"{found.manual_score:g}"
        found.manual_score, found.needs_manual_grade = float(points), False
        if comment is not None:
            gradebook.find_comment(cell, notebook, assignment, student).manual_comment = comment
        refresh_penalties(submission, course_late_plugin(root))
        gradebook.db.commit()
    return f"{student} {cell}: {points:g} of {most:g} points by hand (was: {before})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.handgrade", description=__doc__.splitlines()[0]
    )
    parser.add_argument("assignment", help="the assignment, e.g. i1_strided_softmax")
    add_course_option(parser)
    parser.add_argument("--list", action="store_true", help="list the answers still to grade")
    parser.add_argument("--student", help="the student whose answer is graded")
    parser.add_argument("--cell", default="prediction", help="the cell (default: prediction)")
    parser.add_argument("--points", type=float, help="the points the answer earns")
    parser.add_argument("--comment", help="a comment the student reads in their feedback")
    args = parser.parse_args(argv)
    root = Path(args.course).resolve()
    problem = not_a_course(root)
    if problem:
        print(f"handgrade: {problem}", file=sys.stderr)
        return 2
    from nbgrader.api import MissingEntry

    try:
        if args.list:
            rows = waiting(root, args.assignment)
            for student, cell, points, text in rows:
                answer = visible(text.strip(), newlines=True)
                print(f"--- {visible(student)} {cell} ({points:g} points)\n{answer}\n")
            print(f"{len(rows)} answer{'s' * (len(rows) != 1)} still to grade by hand")
            return 0
        if args.student is None or args.points is None:
            parser.error("give --list, or --student and --points")
        said = grade(root, args.assignment, args.student, args.cell, args.points, args.comment)
        print(visible(said))
    except (HandGradeError, GradebookError, MissingEntry) as exc:
        print(f"handgrade: {visible(exc)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
