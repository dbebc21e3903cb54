"""The report's plots of scores and hints: total points, full marks per cell, hints fired."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from grader.cohort.records import EXTRA
from grader.cohort.style import COLOURS, message
from grader.cohort.tables import totals
from learning.workshops.checking.sidecars import HINTS_SIDECAR


def plot_scores(table: pd.DataFrame) -> Figure:
    """Histogram of total points over graded students; the others are named, not drawn."""
    summed = totals(table)
    graded = summed[summed["status"] == "graded"]["total"]
    available = summed.loc[graded.index, "max_total"] if len(graded) else summed["max_total"]
    max_total = float(available.max()) if len(available) else 0.0
    fig = Figure(figsize=(8, 4.6), layout="constrained")
    ax = fig.add_subplot()
    ax.set_label("scores")
    if graded.empty:
        ax.set_title("Total points: no graded submissions", loc="left")
        message(ax, "no graded submissions yet: run nbgrader autograde")
    else:
        _histogram(ax, graded, max_total)
    notes = f"{_extra_note(table)}{_pending_note(table)}{_no_gpu_note(table)}"
    ax.set_xlabel(f"total points (of {max_total:g}){notes}")
    ax.set_ylabel("students")
    left_out = _left_out(summed)
    if left_out:
        fig.text(0.01, 0.005, "not drawn: " + left_out, fontsize=9, color="#444444")
        fig.get_layout_engine().set(rect=(0, 0.05, 1, 0.95))
    return fig


def _histogram(ax: Axes, graded: pd.Series, max_total: float) -> None:
    """One bar per whole point, each labelled with its count, and the mean; totals above
    the maximum (extra credit) get their bars too."""
    top = max(max_total, float(graded.max()))
    edges = np.arange(0, math.floor(top) + 2) - 0.5
    counts, _, bars = ax.hist(graded, bins=edges, color=COLOURS["public"], rwidth=0.85)
    ax.bar_label(bars, labels=[f"{int(c)}" if c else "" for c in counts], fontsize=9)
    mean = float(graded.mean())
    ax.axvline(mean, color=COLOURS["reference"], linestyle="--", linewidth=1, label="mean")
    ax.set_xlim(-0.5, top + 0.5)
    ax.set_ylim(0, counts.max() * 1.15)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(loc="upper left", fontsize=9)
    ax.set_title(
        f"Total points of the {len(graded)} graded submissions: mean {mean:.1f} of {max_total:g}",
        loc="left",
    )


def _extra_note(table: pd.DataFrame) -> str:
    extra = table[table["kind"] == EXTRA].drop_duplicates("cell")["max_score"].sum()
    return f", plus up to {extra:g} of extra credit" if extra else ""


def _pending_note(table: pd.DataFrame) -> str:
    points, students = _points_with_status(table, "manual")
    if not students:
        return ""
    return f"; {points:g} points graded by hand are not in yet for {students} students"


def _no_gpu_note(table: pd.DataFrame) -> str:
    points, students = _points_with_status(table, "no GPU")
    if not students:
        return ""
    return f"\nthe timing cell's {points:g} points are left out for {students} students: no GPU"


def _points_with_status(table: pd.DataFrame, status: str) -> tuple[float, int]:
    """The points of the cells that have `status` for some student, and how many students."""
    rows = table[table["status"] == status]
    return rows.drop_duplicates("cell")["max_score"].sum(), rows["student"].nunique()


def _left_out(summed: pd.DataFrame) -> str:
    parts = []
    for status in ("ungradable", "not graded", "no submission"):
        names = list(summed.index[summed["status"] == status])
        if names:
            parts.append(f"{len(names)} {status} ({', '.join(names)})")
    return "; ".join(parts)


def plot_pass_rates(table: pd.DataFrame) -> Figure:
    """For each autograded cell, in notebook order: the share of graded students at full marks.

    Students whose timing cell found no GPU are left out of its bar, which says so (grey when
    no student had one)."""
    graded = table[(table["status"] == "graded") & (table["kind"] != "manual")]
    cells = table[table["kind"] != "manual"].drop_duplicates("cell").sort_values("position")
    students = graded["student"].nunique()
    fig = Figure(figsize=(8.5, 0.42 * len(cells) + 1.9), layout="constrained")
    ax = fig.add_subplot()
    ax.set_label("pass rates")
    if students == 0:
        message(ax, "no graded submissions yet: run nbgrader autograde")
        return fig
    no_gpu = table[table["status"] == "no GPU"]["cell"].value_counts()
    for y, cell in enumerate(cells.itertuples()):
        scores = graded[graded["cell"] == cell.cell]["score"]
        _pass_bar(ax, y, cell, scores, int(no_gpu.get(cell.cell, 0)))
    ax.set_yticks(range(len(cells)), [f"{c.cell} ({c.max_score:g} pt)" for c in cells.itertuples()])
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of graded students")
    ax.set_title(
        f"Full marks per test cell, {students} graded students (notebook order)", loc="left"
    )
    fig.legend(
        handles=[
            Patch(color=COLOURS["public"], label="public test: full marks"),
            Patch(color=COLOURS["hidden"], label="hidden test: full marks"),
            Patch(color=COLOURS[EXTRA], label="extra credit earned"),
            Patch(color=COLOURS["partial"], label="partial credit"),
            Patch(color=COLOURS["missing"], label="no GPU: not run, left out"),
        ],
        loc="outside lower center",
        ncols=3,
        frameon=False,
    )
    return fig


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
    """How many students each hint fired for, across all of their recorded tests, and who."""
    fig = Figure(figsize=(9, 0.45 * max(len(hints), 3) + 1.6), layout="constrained")
    ax = fig.add_subplot()
    ax.set_label("hints")
    ax.set_title(
        f"Which hints fired, and for whom ({with_sidecar} students with hint records)", loc="left"
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
    bars = ax.barh(range(len(hints)), hints["students"].to_numpy(), color=COLOURS["bug"])
    for bar, hint in zip(bars, hints.index, strict=True):
        bar.set_gid(f"hint:{hint}")
    labels = [
        f"{n}: {_shorten(names)}"
        for n, names in zip(hints["students"], hints["names"], strict=True)
    ]
    ax.bar_label(bars, labels=labels, padding=3, fontsize=8)
    ax.set_yticks(range(len(hints)), list(hints.index))
    ax.invert_yaxis()
    ax.set_xlim(0, with_sidecar * 1.02)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("students whose tests fired the hint (a student counts once per hint)")
    return fig


def _shorten(names: str, most: int = 3) -> str:
    parts = names.split(", ")
    return names if len(parts) <= most else ", ".join(parts[:most]) + f" +{len(parts) - most}"
