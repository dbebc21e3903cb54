"""The report's headline numbers and its summary, one plain sentence per line."""

from __future__ import annotations

import math
import shlex

import pandas as pd

from grader.cohort.records import (
    BLANK,
    EXTRA,
    NOT_DONE_HINTS,
    NOT_GRADABLE,
    OPTIONAL_KINDS,
    Cohort,
    Report,
    Summary,
)
from grader.cohort.tables import totals
from grader.cohort.timings import (
    FLOOR,
    REFUSED_SECTION,
    REVIEW,
    WHAT_TO_DO,
    Refusal,
    refusals,
)


def summarize(cohort: Cohort, table: pd.DataFrame) -> Summary:
    """The report's headline numbers."""
    summed = totals(table)
    graded = summed[summed["status"] == "graded"]
    held = {r.student for r in cohort.students if r.held}
    released = graded[~graded.index.isin(held)]
    reasons = table.drop_duplicates("student").set_index("student")["reason"]
    late = summed[summed["late_seconds"] > 0]["late_seconds"]
    faulty = table[table["status"] == "internal error"]
    no_gpu = table[table["status"] == "no GPU"]
    return Summary(
        students=len(cohort.students),
        submitted=sum(r.submitted for r in cohort.students),
        graded=len(graded),
        not_graded=tuple(
            (
                s,
                reasons[s]
                if summed.loc[s, "status"] == "not graded"
                else f"{summed.loc[s, 'status']}: {reasons[s]}",
            )
            for s in summed.index[summed["status"].isin(["ungradable", NOT_GRADABLE, "not graded"])]
        ),
        missing=tuple(summed.index[summed["status"] == "no submission"]),
        late=tuple((str(s), float(v)) for s, v in late.items()),
        mean_score=float(graded["total"].mean()) if len(graded) else math.nan,
        max_score=float(sum(c.max_score for c in cohort.cells if c.kind != EXTRA)),
        manual_points=float(sum(c.max_score for c in cohort.cells if c.kind == "manual")),
        manual_pending=int((table["status"] == "manual").sum()),
        with_hints=sum(r.hints is not None for r in cohort.students),
        with_timing=sum(r.timing is not None for r in cohort.students),
        internal_errors=tuple(zip(faulty["student"], faulty["cell"], strict=True)),
        restored=tuple((r.student, r.restored) for r in cohort.students if r.restored),
        flagged=tuple((r.student, r.flags) for r in cohort.students if r.flags),
        unreadable=tuple((r.student, why) for r in cohort.students for why in r.unreadable),
        no_gpu=tuple(dict.fromkeys(no_gpu["student"])),
        no_gpu_points=float(no_gpu.drop_duplicates("cell")["max_score"].sum()),
        mean_after_late=float(released["after_late"].mean()) if len(released) else math.nan,
        late_points=tuple((str(s), float(v)) for s, v in graded["late_penalty"].items() if v > 0),
        optional=section_counts(table),
        timing_refused=refusals({r.student: r.timing for r in cohort.students}),
        held=tuple(
            (r.student, float(summed.loc[r.student, "total"]), r.holds, r.review)
            for r in cohort.students
            if r.held
        ),
        reviewed=tuple((r.student, r.review) for r in cohort.students if r.review and not r.held),
        blank=tuple(graded.index[graded["standing"] == BLANK]),
        labels={r.student: r.label for r in cohort.students},
    )


def section_counts(table: pd.DataFrame) -> tuple[tuple[str, int, int, int], ...]:
    """Per optional section with extra credit, in notebook order, over the graded students in
    `table`: (section, how many earned its credit, tried it without earning any, skipped it:
    a test of the section says "not attempted" or "unfinished", the exercise left as its
    stub, or the whole notebook is blank). A student counts once per section, whatever its
    cells' hints."""
    rows = table[table["kind"].isin(OPTIONAL_KINDS) & (table["status"] == "graded")]
    counts = []
    for section, mine in rows.sort_values("position").groupby("section", sort=False):
        if not (mine["kind"] == EXTRA).any():
            continue
        credit = (mine["kind"] == EXTRA) & (mine["score"] > 0)
        stub = mine["hints"].map(lambda h: bool(set(h.split(";")) & set(NOT_DONE_HINTS)))
        stub |= mine["standing"] == BLANK
        earned = credit.groupby(mine["student"]).any()
        skipped = ~earned & stub.groupby(mine["student"]).any()
        counts.append(
            (str(section), int(earned.sum()), int((~earned & ~skipped).sum()), int(skipped.sum()))
        )
    return tuple(counts)


def summary_lines(report: Report) -> list[str]:
    """The summary, one plain sentence per line."""
    s = report.summary
    return [
        *_held_lines(report),
        *_who_lines(s),
        _score_line(s),
        *_optional_lines(s),
        f"Hint sidecars: {s.with_hints} of {s.graded} graded students.",
        *_fault_lines(s),
        *_timing_lines(report),
        *_refused_lines(s),
        *_roof_lines(report),
    ]


def _held_lines(report: Report) -> list[str]:
    """First: the grades held for review, not released, each with its holds' rules and lines
    and why it waits; then those reviewed, with the decision in force."""
    s = report.summary
    lines = []
    if s.held:
        decide = f"python -m grader.review {report.cohort.assignment}"
        lines.append(f"Held for review, not released: {len(s.held)} (decide with {decide}).")
    for student, points, holds, words in s.held:
        again = f" {words[0].upper()}{words[1:]}." if words.endswith("held again") else ""
        who = s.named(student)
        lines.append(f"Held: {who} ({points:g} points computed): {'; '.join(holds)}.{again}")
    lines += [
        f"Reviewed: {s.named(student)}: {words.removeprefix('reviewed: ')}."
        for student, words in s.reviewed
    ]
    return lines


def _who_lines(s: Summary) -> list[str]:
    """Who is on the roster, who was not graded and why, who submitted nothing or late."""
    lines = [f"{s.students} students on the roster, {s.submitted} submitted, {s.graded} graded."]
    lines += [f"Not graded: {s.named(student)}: {reason}." for student, reason in s.not_graded]
    if s.blank:
        lines.append(
            f"Blank, nothing written: {', '.join(map(s.named, s.blank))}: every answer cell as "
            "released (the notebook submitted unchanged), so its zeros are no verdict on any "
            "cell; graded 0 as exported, and left out of the pass rates."
        )
    for student, cells in s.restored:
        lines.append(f"Cells put back before grading: {s.named(student)}: {'; '.join(cells)}.")
    for student, flags in s.flagged:
        lines.append(f"Flagged by the source screen: {s.named(student)}: {'; '.join(flags)}.")
    if s.missing:
        lines.append(f"No submission: {', '.join(map(s.named, s.missing))}.")
    if not s.late:
        return [*lines, "Late: none."]
    took = dict(s.late_points)
    late = ", ".join(
        f"{s.named(st)} ({sec / 3600:.1f} h"
        + (f", -{took[st]:g} points" if st in took else "")
        + ")"
        for st, sec in s.late
    )
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
    everyone = len(s.no_gpu) == s.graded
    most = s.max_score - s.no_gpu_points if s.no_gpu and everyone else s.max_score
    no_gpu = ""
    if s.no_gpu:
        whom = "" if everyone else f" for {len(s.no_gpu)} of them"
        no_gpu = f" (the timing cell left out{whom}: no GPU, below)"
    after = f"; after late penalties, as exported: {s.mean_after_late:.2f}" if s.late_points else ""
    return f"Mean score: {s.mean_score:.2f} of {most:g} points{no_gpu}{pending}{after}."


def _optional_lines(s: Summary) -> list[str]:
    """Per optional section, how many students earned, tried or skipped its extra credit:
    apart from the required points."""
    if not s.optional:
        return []
    parts = [
        f"{section}: {earned} earned, {tried} tried without credit, {skipped} skipped"
        for section, earned, tried, skipped in s.optional
    ]
    return [
        f"Optional sections, extra credit beyond the maximum, per section, of the "
        f"{s.graded} graded students: {'; '.join(parts)}."
    ]


def _fault_lines(s: Summary) -> list[str]:
    """The cells the checker failed in, and the sidecars the report could not read."""
    lines = []
    if s.internal_errors:
        count = len(s.internal_errors)
        where = ", ".join(f"{s.named(student)} {cell}" for student, cell in s.internal_errors)
        lines.append(
            f"Internal errors in the checker: {count} cell{'s' * (count != 1)} ({where}), not "
            "counted against the students; fix the checker and autograde them again."
        )
    for student, why in s.unreadable:
        lines.append(
            f"Unreadable sidecar: {s.named(student)}: {why}; its data is left out of this report "
            "(autograde the submission again to rewrite it)."
        )
    return lines


def _timing_lines(report: Report) -> list[str]:
    """How many students have GPU timings, and whose timing cell found no GPU."""
    s = report.summary
    lines = [f"GPU timing sidecars: {s.with_timing} of {s.graded} graded students."]
    if s.no_gpu:
        who = (
            f"any of the {s.graded} graded students"
            if len(s.no_gpu) == s.graded
            else f"{len(s.no_gpu)} of the {s.graded} graded students "
            f"({', '.join(map(s.named, s.no_gpu))})"
        )
        lines.append(
            f"No GPU: the timing cell could not run for {who}: autograded without a CUDA "
            "device (the grading log says so), where nbgrader scores it 0. Shown grey as "
            f'"no GPU" and left out of the totals and the mean ({s.no_gpu_points:g} points). '
            f"To score it, regrade them on a GPU machine, in the course folder there: "
            f"{regrade_command(report)} (hand grades and review decisions are kept)."
        )
    return lines


def regrade_command(report: Report) -> str:
    """The command that regrades, on a GPU machine, the graded students whose timing cell
    found no GPU: all of the assignment when that is every graded student."""
    s = report.summary
    command = f"python -m grader.parallel {shlex.quote(report.cohort.assignment)} --course ."
    if len(s.no_gpu) == s.graded:
        return command
    return " ".join([command, *(f"--student {shlex.quote(student)}" for student in s.no_gpu)])


def _refused_lines(s: Summary) -> list[str]:
    """How many timed shapes earned 0 and why, by kind; each one for review named with its
    times, the physics floor's first."""
    if not s.with_timing:
        return []
    found = s.timing_refused
    if not found:
        return ["Timing refused: none (every timed shape earned its band)."]
    kinds = {}
    for r in found:
        kinds[r.kind] = kinds.get(r.kind, 0) + 1
    by_kind = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
    students = len({r.student for r in found})
    lines = [
        f"Timing refused: {len(found)} timed shape{'s' * (len(found) != 1)} of {students} "
        f"student{'s' * (students != 1)} earned 0 timing points ({by_kind}); each is listed "
        f'with its times and reason under "{REFUSED_SECTION}".'
    ]
    for kind in REVIEW:
        mine = [r for r in found if r.kind == kind]
        if mine:
            who = "; ".join(_refusal_words(r) for r in mine)
            lines.append(f"For review, {kind}: {who}: {WHAT_TO_DO[kind]}.")
    return lines


def _refusal_words(r: Refusal) -> str:
    """A refusal's student, shape and the times that put it in doubt."""
    if r.kind == FLOOR and r.student_ms is not None and r.copy_ms is not None:
        times = f"{r.student_ms:.4g} ms a call, a plain copy {r.copy_ms:.4g} ms"
        return f"{r.student} {r.shape} ({times})"
    if r.reference_ms is not None and r.reference_alone_ms is not None:
        return (
            f"{r.student} {r.shape} (the reference {r.reference_ms:.4g} ms beside it, "
            f"{r.reference_alone_ms:.4g} ms alone)"
        )
    return f"{r.student} {r.shape}"


def _roof_lines(report: Report) -> list[str]:
    """Where the speed plots' copy roof and direct/copy bars come from, when they are drawn."""
    if report.timing.empty:
        return []
    if report.benchmark is None:
        return ["Copy roof: no benchmark results."]
    device = report.benchmark.device
    return [f"Copy roof and direct/copy bars: {report.benchmark_source} ({device})."]
