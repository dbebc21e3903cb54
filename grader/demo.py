"""The demo: a sample cohort in a scratch course, autograded, and the instructor's report.

    python -m grader.demo [--course scratch/demo] [--report reports/cohort] [--workers 2]

Builds the sample cohort (`grader.sample_cohort`) in a scratch course with its own
gradebook, autogrades it, prints the scores and writes the cohort report. The real
course's student folders are never touched: a folder that is not a scratch course is
refused. On a CUDA machine the timing cells run and the report includes their plots.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

from tqdm import tqdm

from grader import cohort, course, sample_cohort
from grader.grading.readiness import add_unsafe_option, ready_to_grade
from grader.isolation.sandbox import SandboxUnavailable
from grader.parallel import autograde_parallel
from learning.workshops.check import UsageError
from learning.workshops.paths import unwritable


def score_table(root: Path, students: list[str], failed: tuple[str, ...]) -> str:
    """Total autograded points per student, one line each."""
    scores: dict[str, float] = defaultdict(float)
    maxima: dict[str, float] = {}
    for cell in course.cell_scores(root):
        scores[cell.student] += cell.score or 0.0
        maxima[cell.cell] = cell.max_score
    width = max(len(s) for s in students)
    lines = []
    for student in students:
        note = "  (kernel died: not graded)" if student in failed else ""
        lines.append(f"{student:<{width}}  {scores[student]:>5g} / {sum(maxima.values()):g}{note}")
    return "\n".join(lines)


def check_options(root: Path, report: Path, workers: int) -> None:
    """UsageError, before anything is built, for options the demo cannot carry out."""
    if workers < 1:
        raise UsageError(f"--workers {workers}: autograde needs at least one, e.g. --workers 2.")
    for option, folder in (("--course", root), ("--report", report)):
        problem = unwritable(folder)
        if problem:
            raise UsageError(f"{option} {folder}: {problem}; choose another folder.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.demo", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--course", default="scratch/demo", help="scratch course folder")
    parser.add_argument("--report", default="reports/cohort", help="report folder")
    parser.add_argument(
        "--workers", type=int, default=min(4, os.cpu_count() or 1), help="autograde workers"
    )
    add_unsafe_option(parser)
    args = parser.parse_args(argv)
    root = Path(args.course).resolve()
    try:
        check_options(root, Path(args.report), args.workers)
    except UsageError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    started = time.monotonic()
    steps = tqdm(total=3, desc="demo", unit="step", file=sys.stdout)
    steps.set_postfix_str("release and sample cohort")
    try:
        members = sample_cohort.build(root)  # a scratch course, with a secret of its own
        ready_to_grade(root, args.unsafe_no_sandbox)
    except (course.CourseError, SandboxUnavailable) as exc:
        steps.close()
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    steps.update()
    steps.set_postfix_str(f"autograde {len(members)} students, {args.workers} workers")
    run = autograde_parallel(root, args.workers)
    steps.update()
    steps.set_postfix_str("cohort report")
    index = cohort.write_report(root, course.ASSIGNMENT, args.report)
    steps.update()
    steps.close()
    print(score_table(root, [m.student for m in members], tuple(run.failed)))
    print(f"\nScratch course: {root}")
    print(f"Cohort report: {Path(index).resolve()} ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
