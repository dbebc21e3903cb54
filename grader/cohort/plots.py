"""The report's plots of scores and hints: total points, full marks per cell, hints fired."""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from grader.cohort.records import (
    BLANK,
    EXTRA,
    HELD,
    NOT_DONE_HINTS,
    NOT_GRADABLE,
    OPTIONAL,
    OPTIONAL_KINDS,
)
from grader.cohort.style import COLOURS, message
from grader.cohort.summary import section_counts
from grader.cohort.tables import totals
from learning.workshops.checking.sidecars import HINTS_SIDECAR


def plot_scores(table: pd.DataFrame) -> Figure:
    """Histogram of total points over graded students, those released, held for review (their
    computed points, not released) and blank (nothing written) apart in the bars; the others
    are named, not drawn."""
    summed = totals(table)
    graded = summed[summed["status"] == "graded"]
    available = graded["max_total"] if len(graded) else summed["max_total"]
    max_total = float(available.max()) if len(available) else 0.0
    fig = Figure(figsize=(8, 4.6), layout="constrained")
    ax = fig.add_subplot()
    ax.set_label("scores")
    if graded.empty:
        ax.set_title("Total points: no graded submissions", loc="left")
        message(ax, "no graded submissions yet: run nbgrader autograde")
    else:
        _histogram(ax, graded, max_total)
    notes = f"{_extra_note(table)}{_pending_note(table)}{_late_note(summed)}{_no_gpu_note(table)}"
    ax.set_xlabel(f"total points (of {max_total:g}){notes}")
    ax.set_ylabel("students")
    left_out = _left_out(summed)
    if left_out:
        fig.text(0.01, 0.005, "not drawn: " + left_out, fontsize=9, color="#444444", wrap=True)
        fig.get_layout_engine().set(rect=(0, 0.05, 1, 0.95))
    return fig


STANDINGS = (
    ("", "released", COLOURS["public"], None),
    (HELD, f"{HELD}: computed, not released", COLOURS["partial"], "//"),
    (BLANK, BLANK, COLOURS["missing"], None),
)
"""The histogram's bars, stacked: each standing's label, colour and hatch."""


def _histogram(ax: Axes, graded: pd.DataFrame, max_total: float) -> None:
    """One bar per whole point, stacked by standing (released, held for review, blank), each
    labelled with its count, and the mean; totals above the maximum (extra credit) get their
    bars too."""
    total = graded["total"]
    top = max(max_total, float(total.max()))
    edges = np.arange(0, math.floor(top) + 2) - 0.5
    bottom = np.zeros(len(edges) - 1)
    for standing, label, colour, hatch in STANDINGS:
        mine = total[graded["standing"] == standing]
        if standing and mine.empty:
            continue
        counts, _ = np.histogram(mine, bins=edges)
        ax.bar(
            edges[:-1] + 0.5,
            counts,
            width=0.85,
            bottom=bottom,
            color=colour,
            hatch=hatch,
            label=f"{label} ({len(mine)})" if standing else label,
            gid=f"scores:{label}",
        )
        bottom += counts
    for x, count in zip(edges[:-1] + 0.5, bottom, strict=True):
        if count:
            ax.annotate(f"{int(count)}", (x, count), ha="center", va="bottom", fontsize=9)
    mean = float(total.mean())
    ax.axvline(mean, color=COLOURS["reference"], linestyle="--", linewidth=1, label="mean")
    ax.set_xlim(-0.5, top + 0.5)
    ax.set_ylim(0, max(bottom.max(), 1) * 1.15)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(loc="upper left", fontsize=9)
    ax.set_title(
        f"Total points of the {len(total)} graded submissions: mean {mean:.1f} of {max_total:g}",
        loc="left",
    )


def _extra_note(table: pd.DataFrame) -> str:
    extra = table[table["kind"] == EXTRA].drop_duplicates("cell")["max_score"].sum()
    return f", plus up to {extra:g} of extra credit" if extra else ""


def _late_note(summed: pd.DataFrame) -> str:
    late = summed[summed["late_penalty"] > 0]
    if late.empty:
        return ""
    whom = f"{len(late)} student" + "s" * (len(late) != 1)
    return (
        f"\nbefore late penalties ({late['late_penalty'].sum():g} points off {whom}; "
        "the table shows both)"
    )


def _pending_note(table: pd.DataFrame) -> str:
    points, students = _points_with_status(table, "manual")
    if not students:
        return ""
    return f"\n{points:g} points graded by hand are not in yet for {students} students"


def _no_gpu_note(table: pd.DataFrame) -> str:
    points, students = _points_with_status(table, "no GPU")
    if not students:
        return ""
    return (
        f"\nthe timing cell's {points:g} points are left out for {students} students: no GPU "
        "(to regrade on a GPU: the summary)"
    )


def _points_with_status(table: pd.DataFrame, status: str) -> tuple[float, int]:
    """The points of the cells that have `status` for some student, and how many students."""
    rows = table[table["status"] == status]
    return rows.drop_duplicates("cell")["max_score"].sum(), rows["student"].nunique()


def _left_out(summed: pd.DataFrame) -> str:
    parts = []
    for status in ("ungradable", NOT_GRADABLE, "not graded", "no submission"):
        names = list(summed.index[summed["status"] == status])
        if names:
            parts.append(f"{len(names)} {status} ({_shorten(', '.join(names))})")
    return "; ".join(parts)


def plot_pass_rates(table: pd.DataFrame) -> Figure:
    """For each required test cell, in notebook order: the share of graded students at full
    marks; below it, apart, each optional section with extra credit: who earned it, who tried
    without earning it, who skipped it. The optional sections' 0-point checks score 0 of 0
    whatever they did, so they are named, not drawn. A blank notebook (nothing written) says
    nothing about any cell: it is left out, and the title says so.

    Students whose timing cell found no GPU are left out of its bar, which says so (grey when
    no student had one)."""
    blank = table[(table["standing"] == BLANK)]["student"].nunique()
    graded = table[
        (table["status"] == "graded") & (table["kind"] != "manual") & (table["standing"] != BLANK)
    ]
    cells = table[table["kind"] != "manual"].drop_duplicates("cell").sort_values("position")
    required = cells[~cells["kind"].isin(OPTIONAL_KINDS)]
    sections = section_counts(graded)
    checks = list(cells[cells["kind"] == OPTIONAL]["cell"])
    students = graded["student"].nunique()
    rows = [len(required), len(sections)] if sections else [len(required)]
    fig = Figure(figsize=(8.5, 0.42 * sum(rows) + 1.6 * len(rows) + 0.6), layout="constrained")
    axes = fig.subplots(len(rows), 1, height_ratios=[max(n, 1) for n in rows], squeeze=False)
    ax = axes[0][0]
    ax.set_label("pass rates")
    if students == 0:
        message(ax, "no graded submissions yet: run nbgrader autograde")
        for other in axes[1:]:
            other[0].set_axis_off()
        return fig
    no_gpu = table[table["status"] == "no GPU"]["cell"].value_counts()
    for y, cell in enumerate(required.itertuples()):
        scores = graded[graded["cell"] == cell.cell]["score"]
        _pass_bar(ax, y, cell, scores, int(no_gpu.get(cell.cell, 0)))
    _cell_axis(ax, [f"{c.cell} ({c.max_score:g} pt)" for c in required.itertuples()])
    left_out = f", {blank} blank left out" if blank else ""
    ax.set_title(
        f"Required: full marks per test cell, {students} graded students{left_out}",
        loc="left",
    )
    legend = [
        Patch(color=COLOURS["public"], label="public test: full marks"),
        Patch(color=COLOURS["hidden"], label="hidden test: full marks"),
        Patch(color=COLOURS["partial"], label="partial credit"),
        Patch(color=COLOURS["missing"], label="no GPU: not run, left out"),
    ]
    if sections:
        points = cells[cells["kind"] == EXTRA].groupby("section")["max_score"].sum()
        _section_panel(axes[1][0], sections, points.to_dict(), students, checks)
        legend[2:2] = [
            Patch(color=COLOURS[EXTRA], label="extra credit earned"),
            Patch(color=COLOURS[EXTRA], alpha=0.35, label="tried, no extra credit"),
        ]
    fig.legend(handles=legend, loc="outside lower center", ncols=3, frameon=False)
    return fig


def _cell_axis(ax: Axes, labels: list[str]) -> None:
    """One row per label, from 0 to 100 % of the graded students."""
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlim(0, 140)  # room for the labels right of a full bar
    ax.set_xticks(range(0, 101, 20))
    ax.set_xlabel("% of graded students")


def _section_panel(
    ax: Axes,
    sections: tuple[tuple[str, int, int, int], ...],
    points: dict[str, float],
    students: int,
    checks: list[str],
) -> None:
    """The optional sections: per section, who earned its extra credit, tried, skipped it."""
    ax.set_label("optional sections")
    for y, (section, earned, tried, skipped) in enumerate(sections):
        share = [100 * n / students for n in (earned, tried)]
        ax.barh(y, share[0], color=COLOURS[EXTRA], gid=f"extra:{section}")
        ax.barh(y, share[1], left=share[0], color=COLOURS[EXTRA], alpha=0.35)
        label = f"{earned} earned, {tried} tried,\n{skipped} skipped"
        ax.text(sum(share) + 1, y, label, va="center", fontsize=9)
    _cell_axis(ax, [f"{_wrapped(s)} ({points.get(s, 0):g} pt)" for s, *_ in sections])
    ax.set_title(
        "Optional sections: extra credit per section, beyond the maximum\n(skipping costs nothing)",
        loc="left",
    )
    if checks:
        ax.set_xlabel(
            f"% of graded students; not drawn: {', '.join(checks)},\n0-point checks "
            "(0 of 0 whatever they did)"
        )


def _wrapped(text: str, width: int = 32) -> str:
    """`text` on lines of at most about `width` characters, for a tick label."""
    return "\n".join(textwrap.wrap(text, width)) or text


def _pass_bar(ax: Axes, y: int, cell, scores: pd.Series, no_gpu: int) -> None:
    """One cell's bar: full marks, then partial credit, then how many of how many; a cell
    that found no GPU for every student is a grey bar that says so."""
    no_gpu_text = f"no GPU for {no_gpu} students: not run, left out"
    if scores.empty and no_gpu:
        ax.barh(y, 100, color=COLOURS["missing"], alpha=0.4, gid=f"nogpu:{cell.cell}")
        ax.text(1, y, no_gpu_text, va="center", fontsize=9, color="#444444")
        return
    full = float((scores >= cell.max_score).mean() * 100) if len(scores) else 0.0
    partial = float(((scores > 0) & (scores < cell.max_score)).mean() * 100) if len(scores) else 0.0
    ax.barh(y, full, color=COLOURS[cell.kind], gid=f"pass:{cell.cell}")
    ax.barh(y, partial, left=full, color=COLOURS["partial"])
    label = f"{int((scores >= cell.max_score).sum())}/{len(scores)}"
    if no_gpu:
        label += f"; {no_gpu_text}"
    ax.text(full + partial + 1, y, label, va="center", fontsize=9)


def plot_hints(hints: pd.DataFrame, with_sidecar: int) -> Figure:
    """How many students each hint fired for, across all of their recorded tests, and who:
    the required sections' tests first, the optional sections' apart below; a hint that says
    the work was not done (its stub left) is grey and after the bugs."""
    required = _hint_rows(hints, "students", "names")
    optional = _hint_rows(hints, "optional", "optional_names")
    rows = [len(required)] + ([len(optional)] if len(optional) else [])
    fig = Figure(figsize=(9, 0.45 * max(sum(rows), 3) + 1.4 * len(rows)), layout="constrained")
    axes = fig.subplots(len(rows), 1, height_ratios=[max(n, 1) for n in rows], squeeze=False)
    ax = axes[0][0]
    ax.set_label("hints")
    ax.set_title(
        f"Which hints fired, and for whom ({with_sidecar} students with hint records)"
        + (": required sections" if len(optional) else ""),
        loc="left",
    )
    if with_sidecar == 0:
        message(
            ax,
            f"no hint sidecars ({HINTS_SIDECAR}) in this course:\n"
            "autograde with this course's test cells to record them",
        )
        return fig
    if hints.empty:
        message(ax, f"no hint fired: every recorded test of the {with_sidecar} students passed")
        return fig
    if required.empty:
        message(ax, "no hint fired in the required sections' tests")
    else:
        _hint_bars(ax, required, with_sidecar, "hint")
    if len(optional):
        below = axes[1][0]
        below.set_label("optional hints")
        below.set_title("Optional sections (extra credit): hints from their tests", loc="left")
        _hint_bars(below, optional, with_sidecar, "optional-hint")
    return fig


def _hint_rows(hints: pd.DataFrame, count: str, names: str) -> pd.DataFrame:
    """The hints that fired for someone in one part (`count` and `names` columns), the bugs
    first by how many students, then the hints that say the work was not done."""
    if hints.empty or count not in hints:
        return pd.DataFrame({"students": [], "names": []})
    part = hints[hints[count] > 0][[count, names]].set_axis(["students", "names"], axis=1)
    not_done = part.index.isin(NOT_DONE_HINTS)
    bugs = part[~not_done].sort_values("students", ascending=False, kind="stable")
    return pd.concat([bugs, part[not_done]])


def _hint_bars(ax: Axes, hints: pd.DataFrame, with_sidecar: int, gid: str) -> None:
    """One bar per hint, labelled with its count and who; not-done hints grey."""
    colours = [COLOURS["missing" if h in NOT_DONE_HINTS else "bug"] for h in hints.index]
    bars = ax.barh(range(len(hints)), hints["students"].to_numpy(), color=colours)
    for bar, hint in zip(bars, hints.index, strict=True):
        bar.set_gid(f"{gid}:{hint}")
    labels = [
        f"{n}: {_shorten(names)}"
        for n, names in zip(hints["students"], hints["names"], strict=True)
    ]
    ax.bar_label(bars, labels=labels, padding=3, fontsize=8)
    ax.set_yticks(range(len(hints)), list(hints.index))
    ax.set_ylim(len(hints) - 0.5, -0.5)
    ax.set_xlim(0, with_sidecar * 1.02)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel(
        "students whose tests fired the hint (a student counts once per hint; grey: the work "
        "left as its stub, not a bug)"
    )


def _shorten(names: str, most: int = 3) -> str:
    parts = names.split(", ")
    return names if len(parts) <= most else ", ".join(parts[:most]) + f" +{len(parts) - most}"
