"""Feedback for every student, about their latest submission and nothing older.

    python -m grader.feedback i1_strided_softmax [--course PATH] [--all]

`nbgrader generate_feedback` alone skips a student whose feedback exists (Canvas downloads
carry no time to compare), writes nothing for a submission it could not grade, so the old
feedback stays, and shows the late penalty autograde stored before any hand grade. This
command, for each student the gradebook has a submission of:

- graded: the late penalty is stored again from the current score (hand grades included,
  `grader.grading.late.refresh_penalties`, as the export computes it), then
  `nbgrader generate_feedback --force` writes the feedback afresh (the course's feedback
  preprocessors: hidden tests cut out, hand-graded cells "not graded yet" until they are, a
  grade held for review says so and why, `grader.grading.review_note`);
- ungradable: one page in place of the notebook's feedback says the submission could not
  be graded, why, and what to do (`UNGRADABLE_PAGE`);
- resubmitted since it was graded: its old feedback is removed and none is written until it
  is autograded (`grader.parallel --changed`); the command names them and exits with 1.

Then it says whose pages are new or changed since the last feedback run and zips those, to
upload (`grader.feedback_bundle`: `reports/feedback/<assignment>-<time>.zip`); `--all` zips
every page. An ungradable student's page names the cell where the kernel died, when the
grading record says (`where_it_died`).

Exit status: 0 done, 1 done except for the resubmissions named, 2 a usage error.
"""

from __future__ import annotations

import argparse
import ast
import html
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from grader.course_folder import add_course_option, not_a_course
from grader.feedback_bundle import Bundle, bundle_changes
from grader.gradebook import GradebookError, gradebook_url, open_gradebook
from grader.terminal import visible

UNGRADABLE_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{notebook}: not graded</title>
<style>body {{ font-family: sans-serif; max-width: 46em; margin: 2em auto; }}</style>
</head><body>
<h1>{notebook}: your submission could not be graded</h1>
<p>Submitted: {submitted}</p>
<p>Why: {why}</p>
<p>What to do: open your notebook in JupyterLab, run <em>Kernel &gt; Restart Kernel and Run
All Cells</em>, fix what stops it, save it, and submit it again. If it runs for you, ask your
instructor, who can see why it could not be graded.</p>
<p>This page replaces any earlier feedback: no score counts for this submission.</p>
</body></html>
"""
_INTERNAL = re.compile(r"\bgrader[./]|/course/|course_secret|Traceback")


@dataclass
class FeedbackRun:
    """Who got which feedback."""

    graded: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # graded, held for review: told so
    ungradable: list[str] = field(default_factory=list)
    resubmitted: list[str] = field(default_factory=list)


def student_reason(cause: str) -> str:
    """Why a submission was not graded, in words for its student (no grader internals)."""
    if cause.startswith("invalid notebook"):
        detail = cause.split(":", 1)[1].strip() if ":" in cause else ""
        return "the file is not a notebook Jupyter can open" + (f" ({detail})" if detail else "")
    if cause.startswith(("dead kernel", "the kernel died")):
        where = where_it_died(cause)
        return (
            f"running it stopped the kernel{where} before it finished (a crash, or memory ran "
            f"out){', and no cell after it ran' if where else ''}"
        )
    if cause.startswith("timeout"):
        return "it was still running when its time was up"
    if cause.startswith("submission refused"):
        return "it is not a plain notebook file (a link, or something else): submit the file"
    return "grading it failed"


_DIED_IN = re.compile(
    r"killed the kernel in (?:(?P<grade_id>\S+) \()?cell (?P<number>\d+) of (?P<cells>\d+)"
    r"(?:: (?P<code>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"))?"
)
"""Where a dead kernel's cause says it died, as `grader.grading.execute.killing_cell` writes it:
"in test_pass3 (cell 26 of 60: 'code')", or "in cell 26 of 60: 'code'" for a cell with no
grade id."""


def where_it_died(cause: str) -> str:
    """ " in cell 26 of 60 (graded as test_pass3)" for a dead kernel's `cause`, "" when it names
    no cell. A cell's code is shown only where it has no grade id: a test cell's code may be
    the hidden tests, and a line naming the grader's files is left out."""
    found = _DIED_IN.search(cause)
    if found is None:
        return ""
    where = f" in cell {found['number']} of {found['cells']}"
    if found["grade_id"]:
        return f"{where} (graded as {found['grade_id']})"
    code = ast.literal_eval(found["code"]) if found["code"] else ""
    if code and not _INTERNAL.search(code):
        where += f" ({visible(code)})"
    return where


def ungradable_page(notebook: str, submitted: str, cause: str) -> str:
    """The page an ungradable submission's student reads instead of feedback."""
    why = student_reason(cause)
    if _INTERNAL.search(why):
        why = "grading it failed"
    return UNGRADABLE_PAGE.format(
        notebook=html.escape(notebook),
        submitted=html.escape(submitted or "time unknown"),
        why=html.escape(why[:400]),
    )


def _sort(root: Path, assignment: str, run: FeedbackRun) -> dict[str, tuple[list[str], str, str]]:
    """Put each student the gradebook has a submission of in `run`; store the graded ones'
    late penalties again. The ungradable ones' (notebooks, time, cause)."""
    from nbgrader.api import MissingEntry

    from grader.grading.decisions import review_of
    from grader.grading.late import course_late_plugin, refresh_penalties
    from grader.outcome import GRADED, UNGRADABLE, submission_outcome

    plugin = course_late_plugin(root)
    ungradable = {}
    with open_gradebook(gradebook_url(root)) as gradebook:
        for student in gradebook.students:
            try:
                submission = gradebook.find_submission(assignment, student.id)
            except MissingEntry:
                continue
            names = [nb.name for nb in submission.notebooks]
            autograded = root / "autograded" / student.id / assignment
            status, cause = submission_outcome(root, assignment, student.id, autograded, names)
            if status == GRADED:
                run.graded.append(student.id)
                refresh_penalties(submission, plugin)
                if review_of(root, assignment, student.id).held:
                    run.held.append(student.id)
            elif status == UNGRADABLE:
                run.ungradable.append(student.id)
                ungradable[student.id] = (names, str(submission.timestamp or ""), cause)
            else:
                run.resubmitted.append(student.id)
        gradebook.db.commit()
    return ungradable


def write_feedback(root: Path, assignment: str) -> FeedbackRun:
    """Write every student's feedback for `assignment` in the course at `root`."""
    from grader import course

    root = Path(root).resolve()
    run = FeedbackRun()
    ungradable = _sort(root, assignment, run)
    for student in run.ungradable + run.resubmitted:
        folder = root / "feedback" / student / assignment
        if folder.is_dir():
            shutil.rmtree(folder)
    excluded = ",".join(run.ungradable + run.resubmitted)
    if run.graded:
        course.nbgrader(
            root,
            "generate_feedback",
            assignment,
            "--force",
            f"--CourseDirectory.student_id_exclude={excluded}",
        )
    for student, (notebooks, submitted, cause) in ungradable.items():
        folder = root / "feedback" / student / assignment
        folder.mkdir(parents=True, exist_ok=True)
        for name in notebooks:
            (folder / f"{name}.html").write_text(ungradable_page(name, submitted, cause))
    return run


def bundle_line(bundle: Bundle) -> str:
    """What to upload, in one line: the bundle of new and changed pages, or nothing."""
    note = f" ({bundle.note})" if bundle.note else ""
    withdrawn = ", ".join(map(visible, bundle.withdrawn))
    gone = f"; withdrawn, no page now: {withdrawn}" if withdrawn else ""
    if bundle.zip_path is None:
        return f"no page changed since the last feedback run: nothing to upload{note}"
    return (
        f"to upload: {len(bundle.changed)} student(s) with new or changed pages "
        f"({', '.join(map(visible, bundle.changed)) or 'none'}), {bundle.unchanged} unchanged, "
        f"in {bundle.zip_path}{gone}{note}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.feedback", description=__doc__.splitlines()[0]
    )
    parser.add_argument("assignment", help="the assignment, e.g. i1_strided_softmax")
    parser.add_argument(
        "--all",
        action="store_true",
        help="bundle every page, not only those new or changed since the last feedback run",
    )
    add_course_option(parser)
    args = parser.parse_args(argv)
    from grader.course import CourseError

    problem = not_a_course(Path(args.course))
    if problem:
        print(f"feedback: {problem}", file=sys.stderr)
        return 2

    try:
        run = write_feedback(Path(args.course), args.assignment)
        bundle = bundle_changes(Path(args.course), args.assignment, everything=args.all)
    except (CourseError, GradebookError, OSError) as exc:
        print(f"feedback: {visible(exc)}", file=sys.stderr)
        return 2
    print(f"feedback written for {len(run.graded)} graded submissions")
    if run.held:
        print(f"held for review, told so: {', '.join(run.held)} (python -m grader.review)")
    if run.ungradable:
        print(f"could not be graded, told so: {', '.join(map(visible, run.ungradable))}")
    print(bundle_line(bundle))
    if run.resubmitted:
        print(
            f"RESUBMITTED since graded, no feedback until autograded: "
            f"{', '.join(map(visible, run.resubmitted))} "
            f"(python -m grader.parallel {args.assignment} "
            f"--course {args.course} --changed, then run this again)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
