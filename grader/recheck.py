"""Re-run the hidden checks of every autograded submission in fresh, isolated processes.

    python -m grader.recheck i1_strided_softmax [--course PATH] [--json]

nbgrader trusts what a notebook prints: a submission can patch the grader, torch or the
traceback machinery from one of its cells and score points it did not earn. This command
takes each submission's own definitions (solution and given cells, nothing else), runs the
hidden cases in a child process, and lists every cell where the gradebook and the recheck
disagree. Exit status: 0 when they agree, 1 when any disagree, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from grader import course
from grader.hidden import run_hidden

RECHECKED = {
    "hidden_pass1": "copy_rows",
    "hidden_pass2": "softmax_kernel",
    "hidden_pass3": "strided_softmax",
}
"""The hidden cells rechecked, with the op each one tests."""


@dataclass(frozen=True)
class Disagreement:
    """A cell whose gradebook score the recheck does not confirm (or the reverse)."""

    student: str
    cell: str
    gradebook_score: float | None
    max_score: float
    recheck_passed: bool
    evidence: str


def recheck_submission(notebook: Path, op: str) -> tuple[bool, str]:
    """Run `op`'s hidden cases on the notebook's own definitions, isolated; (passed, why)."""
    run = run_hidden(op, notebook)
    if run.load_error:
        return False, f"could not load: {run.load_error}"
    failed = [r for r in run.results if not r.passed]
    return not failed, failed[0].detail if failed else "all hidden cases pass"


def recheck_course(root: Path) -> list[Disagreement]:
    """Every disagreement between the gradebook and a fresh recheck, over all submissions."""
    scores = {(s.student, s.cell): s for s in course.cell_scores(root)}
    disagreements = []
    for folder in sorted((root / "autograded").glob(f"*/{course.ASSIGNMENT}")):
        student, notebook = folder.parent.name, folder / course.NOTEBOOK
        if not notebook.is_file():
            continue
        for cell, op in RECHECKED.items():
            graded = scores.get((student, cell))
            if graded is None:
                continue
            passed, evidence = recheck_submission(notebook, op)
            full = graded.score is not None and graded.score >= graded.max_score
            if passed != full:
                disagreements.append(
                    Disagreement(student, cell, graded.score, graded.max_score, passed, evidence)
                )
    return disagreements


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.recheck", description=__doc__.splitlines()[0]
    )
    parser.add_argument("assignment", help="the assignment to recheck")
    parser.add_argument("--course", default=str(course.REPO), help="the nbgrader course folder")
    parser.add_argument("--json", action="store_true", help="print the disagreements as JSON")
    args = parser.parse_args(argv)
    root = Path(args.course)
    gradebook = root / "gradebook.db"
    if args.assignment != course.ASSIGNMENT:
        print(
            f"recheck: unknown assignment {args.assignment!r}; this course has "
            f"{course.ASSIGNMENT}.",
            file=sys.stderr,
        )
        return 2
    if not gradebook.is_file():
        print(
            f"recheck: no gradebook at {gradebook}; run nbgrader autograde first.", file=sys.stderr
        )
        return 2
    from sqlalchemy.exc import DatabaseError  # nbgrader's database layer: slow to import

    try:
        found = recheck_course(root)
    except DatabaseError as exc:
        print(
            f"recheck: cannot read the gradebook {gradebook} ({exc.orig}); check that it is the "
            "course's nbgrader gradebook and that no other process holds it.",
            file=sys.stderr,
        )
        return 2
    if args.json:
        print(json.dumps([asdict(d) for d in found], indent=2))
    elif not found:
        print("The gradebook and the recheck agree on every rechecked cell.")
    for d in [] if args.json else found:
        print(
            f"{d.student}: {d.cell} scored {d.gradebook_score}/{d.max_score:g} in the "
            f"gradebook, but the recheck {'passes' if d.recheck_passed else 'fails'}: "
            f"{d.evidence}"
        )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
