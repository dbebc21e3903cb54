"""The whole report: read a course, compute the tables and summary, write it all out."""

from __future__ import annotations

from pathlib import Path

from grader.cohort.figures import save_plots
from grader.cohort.page import write_html
from grader.cohort.records import CohortError, Report
from grader.cohort.sidecars import load_cohort
from grader.cohort.summary import summarize
from grader.cohort.tables import build_table, hint_table, save_table
from grader.cohort.timings import save_refusals, timing_table
from learning.workshops.measuring.results import H200_SAMPLE, ResultsError
from learning.workshops.measuring.results import load as load_results

DEFAULT_BENCHMARK = H200_SAMPLE
"""The benchmark results the copy roof and the direct/copy bars come from unless another file
is given (`--benchmark`): the course's recorded H200 run. The command, the demo and the
instructor notebook all default to it."""
POINT_NOTEBOOK = (
    "point this notebook at a graded nbgrader course: set I1_COURSE=/path/to/course before "
    "starting Jupyter, or COURSE in its first code cell (`make demo` grades one in scratch/demo)"
)


def build_report(
    course: Path | str, assignment: str, benchmark: Path | str = DEFAULT_BENCHMARK
) -> Report:
    """Read a course and compute everything the report shows."""
    try:
        results = load_results(benchmark)
    except ResultsError as exc:
        raise CohortError(f"bad --benchmark file: {exc}") from None
    cohort = load_cohort(course, assignment)
    table = build_table(cohort)
    timing = timing_table({r.student: r.timing for r in cohort.students})
    return Report(
        cohort,
        table,
        timing,
        hint_table(cohort),
        summarize(cohort, table),
        results,
        Path(benchmark),
    )


def notebook_report(
    course: Path | str, assignment: str, benchmark: Path | str = DEFAULT_BENCHMARK
) -> Report:
    """The instructor notebook's report; CohortError naming the folder it looked in and how to
    point the notebook at a course, when that folder holds no course or nobody on its roster."""
    try:
        report = build_report(course, assignment, benchmark)
    except CohortError as exc:
        raise CohortError(f"no course to report on in {course} ({exc}); {POINT_NOTEBOOK}") from None
    if not report.cohort.students:
        raise CohortError(
            f"no course to report on in {course}: its gradebook has {assignment} but no "
            f"students; {POINT_NOTEBOOK}"
        )
    return report


def write_report(
    course: Path | str, assignment: str, out: Path | str, benchmark: Path | str = DEFAULT_BENCHMARK
) -> Path:
    """Build the whole report into `out`; return the path of `index.html`."""
    out = Path(out)
    report = build_report(course, assignment, benchmark)
    tables = [*save_table(report.table, out), save_refusals(report.summary.timing_refused, out)]
    pngs = save_plots(report, out)
    return write_html(report, out, pngs, tables)
