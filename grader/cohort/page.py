"""The report's page, `index.html`: the summary, the plots inline, the timings refused or
flagged for review and the scores per student and cell, filled into the template
`report.html` beside this module."""

from __future__ import annotations

import html
from collections.abc import Iterable
from importlib.resources import files
from pathlib import Path
from string import Template

import pandas as pd

from grader.cohort.figures import PLOTS, missing_plots_note
from grader.cohort.records import (
    BLANK,
    HELD,
    NOT_GRADABLE,
    OPTIONAL_KINDS,
    Report,
    StudentRecord,
)
from grader.cohort.summary import summary_lines
from grader.cohort.tables import wide_table
from grader.cohort.timings import (
    EVERY_SHAPE,
    REFUSED_CSV,
    REFUSED_SECTION,
    WHAT_TO_DO,
    Refusal,
)

TEMPLATE = "report.html"
"""The page, with $title, $course, $summary, $figures, $refused_title, $refused, $scores and
$downloads to fill in."""


def write_html(report: Report, out: Path, pngs: list[Path], tables: list[Path]) -> Path:
    """Write `index.html`: the summary, the plots inline, the timings refused, and the scores
    per student x cell. `tables` are the files written beside it: the long table's are linked
    under the scores, `timing_refused.csv` under the refusals."""
    template = Template(files(__package__).joinpath(TEMPLATE).read_text())
    refused_csv = [p for p in tables if p.name == REFUSED_CSV]
    page = template.substitute(
        title=html.escape(f"Cohort report: {report.cohort.assignment}"),
        course=html.escape(str(report.cohort.course)),
        summary="\n".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(report)),
        figures=_figures(pngs, missing_plots_note(report)),
        refused_title=html.escape(REFUSED_SECTION),
        refused=_refused_html(report, refused_csv),
        scores=_scores_html(report.table, report.cohort.students),
        downloads=_links([p for p in tables if p not in refused_csv]),
    )
    path = out / "index.html"
    path.write_text(page)
    return path


def _links(paths: list[Path]) -> str:
    return ", ".join(f'<a href="{html.escape(p.name)}">{html.escape(p.name)}</a>' for p in paths)


def _refused_html(report: Report, csv: list[Path]) -> str:
    """Every timing refusal, a row each: student, shape, kind, the times measured (student,
    reference beside it and alone, a plain copy), the reason, what it asks of the instructor;
    those for review first, marked. A sentence instead when there are none."""
    found = report.summary.timing_refused
    if not report.summary.with_timing:
        return "<p>No GPU timing sidecars in this course: nothing timed, nothing refused.</p>"
    if not found:
        return "<p>None: every timed shape of every student earned its band.</p>"
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "student",
            "shape",
            "refused by",
            "student<br><small>ms a call</small>",
            "reference<br><small>ms, beside it</small>",
            "reference<br><small>ms, alone</small>",
            "plain copy<br><small>ms, same bytes</small>",
            "reason (the grading's words)",
            "what to do",
        )
    )
    rows = "".join(_refused_row(r) for r in found)
    download = f" As a table: {_links(csv)}." if csv else ""
    return (
        "<p>Each timed shape that earned 0 timing points, and each timing that failed, with the "
        "reason the grading wrote to the timing sidecar and the grading log. Marked "
        "<b>for review</b>: the time itself is in doubt (the physics floor: faster than a plain "
        "copy of the same bytes, measured in the same run; or a reference disturbed beside the "
        f"submission); a human should look before the 0 stands.{download}</p>"
        f'<div class="scroll"><table class="refused"><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table></div>"
    )


def _refused_row(r: Refusal) -> str:
    kind = html.escape(r.kind) + ("<br><b>for review</b>" if r.review else "")
    shape = f"<i>{EVERY_SHAPE}</i>" if r.shape == EVERY_SHAPE else html.escape(r.shape)
    times = "".join(
        f"<td>{'' if ms is None else f'{ms:.4g}'}</td>"
        for ms in (r.student_ms, r.reference_ms, r.reference_alone_ms, r.copy_ms)
    )
    css = ' class="review"' if r.review else ""
    return (
        f"<tr{css}><th>{html.escape(r.student)}</th><td>{shape}</td><td>{kind}</td>{times}"
        f'<td class="reason">{html.escape(r.reason)}</td>'
        f'<td class="reason">{html.escape(WHAT_TO_DO[r.kind])}</td></tr>'
    )


def _figures(pngs: list[Path], missing: str) -> str:
    """Each PNG inline, with its caption; then the note on the plots not drawn, if any."""
    captions = {plot.name: html.escape(plot.caption) for plot in PLOTS}
    figures = [
        f'<figure><img src="{html.escape(p.name)}" alt="{captions[p.name]}">'
        f"<figcaption>{captions[p.name]}</figcaption></figure>"
        for p in pngs
    ]
    note = [f'<p class="note">{html.escape(missing)}</p>'] if missing else []
    return "\n".join(figures + note)


def _scores_html(table: pd.DataFrame, students: Iterable[StudentRecord] = ()) -> str:
    """The wide table: a row per student (named as the roster names them, with the id), a
    column per cell, coloured by outcome; a grade held for review (among `students`) shows its
    computed scores, and "held for review" where the exported score would be; a blank
    notebook one cell saying so where its scores would be."""
    held = {r.student for r in students if r.held}
    cells = table.drop_duplicates("cell").sort_values("position")
    head = "".join(
        f'<th title="{html.escape(c.kind)}">{html.escape(c.cell).replace("_", "_<wbr>")}<br>'
        f"<small>{c.max_score:g} pt, {html.escape(c.kind)}</small></th>"
        for c in cells.itertuples()
    )
    hints = table.groupby("student")["hints"].agg(
        lambda h: ", ".join(dict.fromkeys(i for v in h for i in v.split(";") if i))
    )
    names = table.drop_duplicates("student").set_index("student")["name"]
    body = []
    for student, row in wide_table(table).iterrows():
        scores = "".join(f"<td>{_points(row[column])}</td>" for column in ("total", "late_penalty"))
        if student in held:
            scores += f'<td class="held">{HELD}</td>'
        else:
            scores += f"<td>{_points(row['after_late'])}</td>"
        who = html.escape(str(student))
        if names.get(student):
            who = f"{html.escape(names[student])} <small>({who})</small>"
        body.append(
            f"<tr><th>{who}</th>{_score_tds(table, student, row, cells)}"
            f'{scores}<td class="hints">{html.escape(hints.get(student, ""))}</td></tr>'
        )
    return (
        f"<table><thead><tr><th>student</th>{head}<th>raw total</th><th>late penalty</th>"
        "<th>score<br><small>as exported</small></th>"
        f"<th>hints in graded cells</th></tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def _points(value: float) -> str:
    return "" if pd.isna(value) else f"{value:g}"


def _score_tds(table: pd.DataFrame, student: str, row: pd.Series, cells: pd.DataFrame) -> str:
    """A student's cells: each score when graded, else one cell saying why there are none."""
    if row["status"] != "graded":
        reason = table.loc[table["student"] == student, "reason"].iloc[0]
        why = html.escape(f"{row['status']}: {reason}")
        css = "not-gradable" if row["status"] == NOT_GRADABLE else "missing"
        return f'<td class="{css}" colspan="{len(cells)}">{why}</td>'
    if row["standing"] == BLANK:
        why = f"{BLANK}: every answer cell as released (scored 0 by each test)"
        return f'<td class="blank" colspan="{len(cells)}">{html.escape(why)}</td>'
    mine = table[table["student"] == student].set_index("cell")
    return "".join(
        _score_td(mine.loc[c.cell, "score"], c.max_score, mine.loc[c.cell, "status"], c.kind)
        for c in cells.itertuples()
    )


def _score_td(score: float, max_score: float, status: str, kind: str = "public") -> str:
    """One graded cell: green full marks, amber partial, red zero; an optional section's cell
    green when it earned extra credit, else plain (skipping it costs nothing)."""
    if status != "graded":
        return f'<td class="missing">{html.escape(status)}</td>'
    if kind in OPTIONAL_KINDS:
        css = "full" if score > 0 else "optional"
    else:
        css = "full" if score >= max_score else "partial" if score > 0 else "zero"
    return f'<td class="{css}">{score:g}</td>'
