"""Re-run the hidden checks of every autograded submission in fresh, isolated processes.

    python -m grader.recheck i1_strided_softmax [--course PATH] [--json] [--student S ...]
                             [--db URL]

nbgrader scores a cell by whether it ended in an error. Hidden cells are graded outside the
student's sandboxed kernel (grader.grading.trusted), and this command checks that the gradebook
still says what they found: it takes each submission's own definitions (solution and given
cells, nothing else), runs every hidden correctness check again in sandboxed child processes
on the cases drawn for that submission, reads the timing cell's points from the record the
trusted side wrote (it does not time again), and lists every cell where the gradebook and
the recheck disagree (a review decision's points aside: `grader.review`). Exit status: 0
when they agree, 1 when any disagree, 2 for a usage error.

`--student S` (repeatable) rechecks only those students. A progress line per student goes
to stderr as each one is done (each takes tens of seconds on a CPU), so stdout keeps only
the result. The gradebook is the course's (`grader.gradebook.gradebook_url`: `--db URL`, else
the course's CourseDirectory.db_url, which this course takes from I1_GRADEBOOK_URL, else
its gradebook.db), PostgreSQL included. A course tied to other code than this checkout's is
refused (`grader.course_tie`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import nbformat

from grader import course
from grader.course_folder import add_course_option
from grader.course_tie import CourseTieError, check_tie
from grader.gradebook import GradebookError, add_gradebook_option, gradebook_url, sqlite_file
from grader.grading.extra_credit import configured_points
from grader.grading.grading_log import read_record
from grader.grading.hidden import FUNCTION_CHECKS, run_function_check, run_hidden
from grader.grading.readiness import ready_to_grade
from grader.grading.runner import Runner, sandboxed_copy
from grader.grading.timing_record import SIDECAR, load
from grader.grading.trusted import draw_for
from grader.isolation.sandbox import SandboxUnavailable
from grader.terminal import visible
from learning.workshops.checking.faults import INTERNAL_ERROR
from learning.workshops.checking.sidecars import RecordError, RecordMissing

RECHECKED = {
    "hidden_addresses": "address_table",
    "hidden_pass1": "copy_rows",
    "hidden_pass2": "softmax_kernel",
    "hidden_pass3": "strided_softmax",
    "hidden_worksheet": "worksheet",
    "hidden_timing": "timing",
    "hidden_inplace": "strided_softmax_",
    "hidden_backward": "strided_softmax_backward",
}
"""The hidden cells rechecked, with the op, function or record each one stands on."""


@dataclass(frozen=True)
class Disagreement:
    """A cell whose gradebook score the recheck does not confirm (or the reverse)."""

    student: str
    cell: str
    gradebook_score: float | None
    max_score: float
    recheck_score: float
    evidence: str


def recheck_submission(runner: Runner, op: str) -> tuple[bool, str]:
    """Run `op`'s hidden cases on the notebook's own definitions, sandboxed; (passed, why)."""
    run = run_hidden(op, runner.session, runner.draw)
    if run.load_error:
        return False, f"could not load: {run.load_error}"
    failed = [r for r in run.results if not r.passed]
    faults = [r for r in failed if r.failure == INTERNAL_ERROR]
    if faults:
        return False, f"internal error in the checker, not the submission: {faults[0].detail}"
    return not failed, failed[0].detail if failed else "all hidden cases pass"


def timing_record(folder: Path) -> tuple[float, str]:
    """The timing cell's fraction of its points from the record the timing process left
    beside the notebook, and why; no record means the timing never ran."""
    try:
        record = load(folder / SIDECAR)
    except RecordMissing:
        return 0.0, f"no {SIDECAR} beside the notebook: the timing cell never measured"
    except RecordError as exc:
        return 0.0, f"{SIDECAR} beside the notebook is not a timing record: {exc.reason}"
    fraction = record.points / record.max_points
    return fraction, record.error or f"the timing record gives {record.points:g} points"


def recheck_cell(cell: str, folder: Path, runner: Runner) -> tuple[float, str]:
    """The fraction of `cell`'s points a fresh, sandboxed recheck gives, and the evidence."""
    target = RECHECKED[cell]
    if target == "timing":
        return timing_record(folder)
    if target in FUNCTION_CHECKS:
        passed, evidence = run_function_check(target, runner.session, runner.draw)
    else:
        passed, evidence = recheck_submission(runner, target)
    return float(passed), evidence


Progress = Callable[[int, int, str, list[Disagreement], float], None]
"""Told after each student: (done, of, student, that student's disagreements, seconds)."""


def recheck_course(
    root: Path,
    students: Collection[str] = (),
    url: str | None = None,
    progress: Progress | None = None,
) -> list[Disagreement]:
    """Every disagreement between the gradebook (the course's, or the one at `url`) and a
    fresh recheck, over all submissions (or those of `students`); `progress` is told as
    each student is done."""
    url = gradebook_url(root, url)
    scores = {(s.student, s.cell): s for s in before_review(root, course.cell_scores(root, url))}
    folders = [
        folder
        for folder in sorted((root / "autograded").glob(f"*/{course.ASSIGNMENT}"))
        if (folder / course.NOTEBOOK).is_file() and (not students or folder.parent.name in students)
    ]
    extra = configured_points(root)
    disagreements = []
    for done, folder in enumerate(folders, 1):
        started = time.monotonic()
        student, notebook = folder.parent.name, folder / course.NOTEBOOK
        draw = draw_for(url, course.ASSIGNMENT, student, root)
        nb = nbformat.read(notebook, as_version=4)
        with sandboxed_copy(nb, draw) as runner:
            found = _recheck_student(student, folder, runner, scores, extra)
        disagreements += found
        if progress is not None:
            progress(done, len(folders), student, found, time.monotonic() - started)
    return disagreements


def before_review(root: Path, scores: list[course.CellScore]) -> list[course.CellScore]:
    """The gradebook's cell scores less the points a review decision added to them
    (`grader.grading.released`, as each student's grading record keeps them): the recheck
    confirms what the grading computed."""
    notebook = course.NOTEBOOK.removesuffix(".ipynb")
    added = {}
    for student in {s.student for s in scores}:
        record = read_record(root, course.ASSIGNMENT, student)
        added[student] = record.adjusted if record else {}
    return [
        replace(s, score=round(s.score - added[s.student][f"{notebook}:{s.cell}"], 6))
        if s.score is not None and f"{notebook}:{s.cell}" in added[s.student]
        else s
        for s in scores
    ]


def progress_line(done: int, of: int, student: str, found: list, seconds: float) -> str:
    """One student's progress line: `recheck [3/14] solution: agrees (21 s)`."""
    verdict = f"{len(found)} cells disagree" if len(found) != 1 else "1 cell disagrees"
    verdict = verdict if found else "agrees"
    return f"recheck [{done}/{of}] {visible(student)}: {verdict} ({seconds:.0f} s)"


def disagreement_line(d: Disagreement) -> str:
    """One disagreement as the terminal shows it: the evidence (a student's exception's
    message, say) with its control characters as escapes, on one line."""
    return visible(
        f"{d.student}: {d.cell} scored {d.gradebook_score}/{d.max_score:g} in the "
        f"gradebook, but the recheck gives {d.recheck_score:g}: {d.evidence}"
    )


def _print_progress(done: int, of: int, student: str, found: list, seconds: float) -> None:
    print(progress_line(done, of, student, found, seconds), file=sys.stderr, flush=True)


def _recheck_student(
    student: str,
    folder: Path,
    runner: Runner,
    scores: dict,
    extra: dict[str, float],
) -> list:
    """The disagreements of one student's rechecked cells; an extra-credit cell (0 points
    of its own) is worth its `extra` credit."""
    disagreements = []
    for cell in RECHECKED:
        graded = scores.get((student, cell))
        if graded is None:
            continue
        fraction, evidence = recheck_cell(cell, folder, runner)
        score = round(fraction * (graded.max_score or extra.get(cell, 0.0)), 3)
        if abs((graded.score or 0.0) - score) > 1e-6:
            disagreements.append(
                Disagreement(student, cell, graded.score, graded.max_score, score, evidence)
            )
    return disagreements


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.recheck", description=__doc__.splitlines()[0]
    )
    parser.add_argument("assignment", help="the assignment to recheck")
    add_course_option(parser)
    parser.add_argument("--json", action="store_true", help="print the disagreements as JSON")
    parser.add_argument(
        "--student", action="append", default=[], help="recheck only this student (repeatable)"
    )
    add_gradebook_option(parser)
    parser.add_argument(
        "--quiet", action="store_true", help="no progress line per student on stderr"
    )
    args = parser.parse_args(argv)
    root = Path(args.course)
    if args.assignment != course.ASSIGNMENT:
        print(
            f"recheck: unknown assignment {args.assignment!r}; this course has "
            f"{course.ASSIGNMENT}.",
            file=sys.stderr,
        )
        return 2
    try:
        note = check_tie(root, "grader.recheck")
    except CourseTieError as exc:
        print(f"recheck: {visible(exc)}", file=sys.stderr)
        return 2
    if note:
        print(note, file=sys.stderr)
    try:
        url = gradebook_url(root, args.db)
    except Exception as exc:  # the course's nbgrader_config.py does not run
        print(f"recheck: cannot read {root / 'nbgrader_config.py'}: {exc}", file=sys.stderr)
        return 2
    gradebook = sqlite_file(url)
    if gradebook is not None and not gradebook.is_file():
        print(
            f"recheck: no gradebook at {gradebook}; run nbgrader autograde first.", file=sys.stderr
        )
        return 2
    unknown = [s for s in args.student if not (root / "autograded" / s / args.assignment).is_dir()]
    if unknown:
        print(
            f"recheck: no autograded submission of {', '.join(unknown)} in {root}; "
            "run nbgrader autograde first.",
            file=sys.stderr,
        )
        return 2
    try:
        ready_to_grade(root)
        progress = None if args.quiet else _print_progress
        found = recheck_course(root, args.student, url, progress)
    except (course.CourseError, GradebookError, RecordError) as exc:
        print(f"recheck: {visible(exc)}.", file=sys.stderr)
        return 2
    except SandboxUnavailable as exc:
        print(f"recheck: {visible(exc)}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([asdict(d) for d in found], indent=2))
    elif not found:
        print("The gradebook and the recheck agree on every rechecked cell.")
    for d in [] if args.json else found:
        print(disagreement_line(d))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
