"""The instructor's cohort report: per-cell scores, hints and GPU timings in one table.

    python -m grader.cohort i1_strided_softmax --course PATH --out reports/cohort

Reads nbgrader's gradebook (per-cell scores, late seconds, students who submitted nothing),
the hint sidecars (`i1_hints.json`) and the GPU timing sidecars (`i1_timing.json`) beside
each autograded notebook. Writes one long table (one row per student and graded cell) as
CSV, and Parquet when pyarrow is installed, the PNG plots and `index.html`. Missing data
stays missing: a timing cell that found no GPU is "no GPU", out of the totals, and a course
autograded without a GPU has no timing sidecars, so its speed plots are not drawn and the
page says why. The copy roof and the direct/copy bars come from --benchmark (default: the
course's recorded H200 run), and the bandwidth plot names it.
"""

from __future__ import annotations

import argparse
import sys

from grader.cohort.records import CohortError
from grader.cohort.report import DEFAULT_BENCHMARK, write_report
from grader.course_folder import add_course_option
from grader.terminal import visible


def main(argv: list[str] | None = None) -> int:
    """Write the report; exit 0, or 2 with one line saying what to fix."""
    args = _parser().parse_args(argv)
    try:
        index = write_report(args.course, args.assignment, args.out, args.benchmark)
    except CohortError as exc:
        print(f"cohort: {visible(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(
            f"cohort: cannot write the report to {args.out} ({exc.strerror}: {exc.filename}); "
            "choose another --out.",
            file=sys.stderr,
        )
        return 2
    print(f"Cohort report: {index}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m grader.cohort", description=__doc__.splitlines()[0]
    )
    parser.add_argument("assignment", help="the nbgrader assignment, e.g. i1_strided_softmax")
    add_course_option(parser)
    parser.add_argument(
        "--out",
        default="reports/cohort",
        help="folder for the report (created; default: %(default)s)",
    )
    parser.add_argument(
        "--benchmark",
        default=str(DEFAULT_BENCHMARK),
        help="a benchmark results file (i1-benchmark/1) for the copy roof and direct/copy bars "
        "(default: the course's recorded H200 run, %(default)s)",
    )
    return parser
