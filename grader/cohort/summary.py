"""The report's headline numbers and its summary, one plain sentence per line."""

from __future__ import annotations

import math

import pandas as pd

from grader.cohort.records import Cohort, Report, Summary
from grader.cohort.tables import totals

NEEDS_GPU = "needs a GPU: no timing sidecars in this course"


def summarize(cohort: Cohort, table: pd.DataFrame) -> Summary:
    """The report's headline numbers."""
    summed = totals(table)
    graded = summed[summed["status"] == "graded"]
    reasons = table.drop_duplicates("student").set_index("student")["reason"]
    late = summed[summed["late_seconds"] > 0]["late_seconds"]
    faulty = table[table["status"] == "internal error"]
    return Summary(
        students=len(cohort.students),
        submitted=sum(r.submitted for r in cohort.students),
        graded=len(graded),
        not_graded=tuple(
            (
                s,
                f"ungradable: {reasons[s]}"
                if summed.loc[s, "status"] == "ungradable"
                else reasons[s],
            )
            for s in summed.index[summed["status"].isin(["ungradable", "not graded"])]
        ),
        missing=tuple(summed.index[summed["status"] == "no submission"]),
        late=tuple((str(s), float(v)) for s, v in late.items()),
        mean_score=float(graded["total"].mean()) if len(graded) else math.nan,
        max_score=float(sum(c.max_score for c in cohort.cells)),
        manual_points=float(sum(c.max_score for c in cohort.cells if c.kind == "manual")),
        manual_pending=int((table["status"] == "manual").sum()),
        with_hints=sum(r.hints is not None for r in cohort.students),
        with_timing=sum(r.timing is not None for r in cohort.students),
        internal_errors=tuple(zip(faulty["student"], faulty["cell"], strict=True)),
        restored=tuple((r.student, r.restored) for r in cohort.students if r.restored),
        unreadable=tuple((r.student, why) for r in cohort.students for why in r.unreadable),
    )


def cells_needing_gpu(report: Report) -> list[str]:
    """The timing cells, when no student has a timing sidecar (autograded without a GPU)."""
    if report.summary.with_timing:
        return []
    return [c.name for c in report.cohort.cells if c.timing]


def summary_lines(report: Report) -> list[str]:
    """The summary, one plain sentence per line."""
    s = report.summary
    return [
        *_who_lines(s),
        _score_line(s),
        f"Hint sidecars: {s.with_hints} of {s.graded} graded students.",
        *_fault_lines(s),
        *_timing_lines(report),
        _roof_line(report),
    ]


def _who_lines(s: Summary) -> list[str]:
    """Who is on the roster, who was not graded and why, who submitted nothing or late."""
    lines = [f"{s.students} students on the roster, {s.submitted} submitted, {s.graded} graded."]
    lines += [f"Not graded: {student}: {reason}." for student, reason in s.not_graded]
    for student, cells in s.restored:
        lines.append(f"Cells put back before grading: {student}: {'; '.join(cells)}.")
    if s.missing:
        lines.append(f"No submission: {', '.join(s.missing)}.")
    if not s.late:
        return [*lines, "Late: none."]
    late = ", ".join(f"{st} ({sec / 3600:.1f} h)" for st, sec in s.late)
    return [*lines, f"Late: {len(s.late)}: {late}."]


def _score_line(s: Summary) -> str:
    if math.isnan(s.mean_score):
        return "Mean score: no graded submissions."
    pending = (
        f"; {s.manual_points:g} points per student are graded by hand "
        f"({s.manual_pending} cells still waiting)"
        if s.manual_points
        else ""
    )
    return f"Mean score: {s.mean_score:.2f} of {s.max_score:g} points{pending}."


def _fault_lines(s: Summary) -> list[str]:
    """The cells the checker failed in, and the sidecars the report could not read."""
    lines = []
    if s.internal_errors:
        count = len(s.internal_errors)
        where = ", ".join(f"{student} {cell}" for student, cell in s.internal_errors)
        lines.append(
            f"Internal errors in the checker: {count} cell{'s' * (count != 1)} ({where}), not "
            "counted against the students; fix the checker and autograde them again."
        )
    for student, why in s.unreadable:
        lines.append(
            f"Unreadable sidecar: {student}: {why}; its data is left out of this report "
            "(autograde the submission again to rewrite it)."
        )
    return lines


def _timing_lines(report: Report) -> list[str]:
    """How many students have GPU timings; without any, that the speed plots need a GPU."""
    s = report.summary
    if s.with_timing:
        return [f"GPU timing sidecars: {s.with_timing} of {s.graded} graded students."]
    lines = [
        f"GPU timing: {NEEDS_GPU} (autograded without a CUDA device), so the speed plots "
        "are empty. Autograde on a GPU machine to fill them."
    ]
    table = report.table
    for cell in cells_needing_gpu(report):
        scores = table.loc[(table["cell"] == cell) & (table["status"] == "graded"), "score"]
        if len(scores) and (scores == 0).all():
            lines.append(f"The timing cell {cell} scored 0 for every graded student: no GPU.")
    return lines


def _roof_line(report: Report) -> str:
    if report.benchmark is None:
        return "Copy roof: no benchmark results given (--benchmark FILE)."
    return f"Copy roof and direct/copy: {report.benchmark_path} ({report.benchmark.device})."
