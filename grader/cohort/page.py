"""The report's page, `index.html`: the summary, the plots inline and the scores per
student and cell, filled into the template `report.html` beside this module."""

from __future__ import annotations

import html
from importlib.resources import files
from pathlib import Path
from string import Template

import pandas as pd

from grader.cohort.figures import PLOTS, missing_plots_note
from grader.cohort.records import OPTIONAL_KINDS, Report
from grader.cohort.summary import summary_lines
from grader.cohort.tables import wide_table

TEMPLATE = "report.html"
"""The page, with $title, $course, $summary, $figures, $scores and $downloads to fill in."""


def write_html(report: Report, out: Path, pngs: list[Path], tables: list[Path]) -> Path:
    """Write `index.html`: the summary, the plots inline, and the scores per student x cell."""
    template = Template(files(__package__).joinpath(TEMPLATE).read_text())
    page = template.substitute(
        title=html.escape(f"Cohort report: {report.cohort.assignment}"),
        course=html.escape(str(report.cohort.course)),
        summary="\n".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(report)),
        figures=_figures(pngs, missing_plots_note(report)),
        scores=_scores_html(report.table),
        downloads=", ".join(
            f'<a href="{html.escape(p.name)}">{html.escape(p.name)}</a>' for p in tables
        ),
    )
    path = out / "index.html"
    path.write_text(page)
    return path


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


def _scores_html(table: pd.DataFrame) -> str:
    """The wide table: a row per student, a column per cell, coloured by outcome."""
    cells = table.drop_duplicates("cell").sort_values("position")
    head = "".join(
        f'<th title="{html.escape(c.kind)}">{html.escape(c.cell).replace("_", "_<wbr>")}<br>'
        f"<small>{c.max_score:g} pt, {html.escape(c.kind)}</small></th>"
        for c in cells.itertuples()
    )
    hints = table.groupby("student")["hints"].agg(
        lambda h: ", ".join(dict.fromkeys(i for v in h for i in v.split(";") if i))
    )
    body = []
    for student, row in wide_table(table).iterrows():
        scores = "".join(
            f"<td>{_points(row[column])}</td>" for column in ("total", "late_penalty", "after_late")
        )
        body.append(
            f"<tr><th>{html.escape(str(student))}</th>{_score_tds(table, student, row, cells)}"
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
        return f'<td class="missing" colspan="{len(cells)}">{why}</td>'
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
