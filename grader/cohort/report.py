"""The whole report: read a course, compute the tables and summary, write it all out."""

from __future__ import annotations

from pathlib import Path

from grader.cohort.figures import save_plots
from grader.cohort.page import write_html
from grader.cohort.records import CohortError, Report
from grader.cohort.sidecars import load_cohort
from grader.cohort.summary import summarize
from grader.cohort.tables import build_table, hint_table, save_table
from grader.cohort.timings import timing_table
from learning.workshops.measuring.results import ResultsError
from learning.workshops.measuring.results import load as load_results


def build_report(
    course: Path | str, assignment: str, benchmark: Path | str | None = None
) -> Report:
    """Read a course and compute everything the report shows."""
    results = None
    if benchmark is not None:
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
        None if benchmark is None else Path(benchmark),
    )


def write_report(
    course: Path | str, assignment: str, out: Path | str, benchmark: Path | str | None = None
) -> Path:
    """Build the whole report into `out`; return the path of `index.html`."""
    out = Path(out)
    report = build_report(course, assignment, benchmark)
    tables = save_table(report.table, out)
    pngs = save_plots(report, out)
    return write_html(report, out, pngs, tables)
