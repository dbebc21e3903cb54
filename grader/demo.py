"""The demo: build the release, autograde a small cohort in a scratch course, print scores.

    python -m grader.demo [--course scratch/demo]

The scratch course holds its own gradebook and submissions; the real course's student
folders are never touched.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path

from tqdm import tqdm

from grader import course
from grader.zoo import BUGS

COHORT = (
    "ignores-column-stride",
    "adds-storage-offset",
    "pads-with-zero",
    "launches-for-zero-rows",
    "segfaults",
)


def build_cohort(root: Path) -> list[str]:
    """Submit the solution, the untouched release and a few zoo bugs; return the students."""
    course.submit(root, "solution", course.solved_notebook(root))
    course.submit_release(root, "untouched")
    bugs = {bug.name: bug for bug in BUGS}
    for name in COHORT:
        course.submit(root, name, course.solved_notebook(root, bugs[name].edits))
    return ["solution", "untouched", *COHORT]


def score_table(root: Path, students: list[str], failed: tuple[str, ...]) -> str:
    """Per-cell scores, one line per student, with totals."""
    scores: dict[str, dict[str, float]] = defaultdict(dict)
    maxima: dict[str, float] = {}
    for cell in course.cell_scores(root):
        scores[cell.student][cell.cell] = cell.score
        maxima[cell.cell] = cell.max_score
    cells = list(maxima)
    width = max(len(s) for s in students)
    lines = [f"{'student':<{width}}  " + "  ".join(cells) + "  total"]
    for student in students:
        row = [f"{scores[student].get(c, 0):>{len(c)}g}" for c in cells]
        total = f"{sum(scores[student].values()):g}/{sum(maxima.values()):g}"
        note = "  (kernel died: not graded)" if student in failed else ""
        lines.append(f"{student:<{width}}  " + "  ".join(row) + f"  {total}{note}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--course", default="scratch/demo", help="scratch course folder")
    args = parser.parse_args(argv)
    root = Path(args.course).resolve()
    if root.exists():
        shutil.rmtree(root)
    started = time.monotonic()
    steps = tqdm(total=3, desc="demo", unit="step", file=sys.stdout)
    steps.set_postfix_str("generate_assignment")
    course.new_course(root)
    steps.update()
    steps.set_postfix_str("submissions")
    students = build_cohort(root)
    steps.update()
    steps.set_postfix_str(f"autograde {len(students)} submissions")
    run = course.autograde(root)
    steps.update()
    steps.close()
    print(score_table(root, students, run.failed))
    print(f"\nScratch course: {root} ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
