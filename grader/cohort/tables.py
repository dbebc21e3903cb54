"""The report's pandas tables: one row per (student, graded cell), per-student totals, the
wide score table and the hint table; the long table saved and read back."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from grader.cohort.records import (
    EXTRA,
    NOT_GRADABLE,
    OPTIONAL_KINDS,
    CellInfo,
    Cohort,
    StudentRecord,
)
from grader.cohort.timings import timing_columns
from grader.outcome import NO_NOTEBOOK, NOT_AUTOGRADED
from grader.student_order import student_key

STATUSES = (
    "graded",
    "manual",
    "internal error",
    "no GPU",
    "ungradable",
    NOT_GRADABLE,
    "not graded",
    "no submission",
)
"""graded: the autograder scored it; manual: waiting for manual grading; internal error: the
checker itself failed in this cell (its sidecar entry says so), so the score is no verdict on
the student; no GPU: the timing cell found no CUDA device at autograde (the grading record
says so), so nbgrader's 0 is no verdict either and the cell is left out of the student's
total and points available; ungradable: nbgrader has the submission but could not grade it
(the reason is the cause in its grading record, e.g. "the kernel died: ...", as `nbgrader
export` reports it; without a record, "no autograded notebook; see the autograde log"); not
graded: no score for this cell, or submitted but not autograded yet; submitted, not gradable
as is: the student's upload is no notebook collect could take (`grader.uploads`: the reason
names the file and the fix); no submission: on the roster, nothing submitted."""
NO_GPU_REASON = (
    "autograded without a CUDA device, so the timing could not run: nbgrader's 0 is left out "
    "of the total"
)
COLUMNS = (
    "student",
    "name",
    "notebook",
    "section",
    "cell",
    "position",
    "kind",
    "score",
    "max_score",
    "status",
    "reason",
    "standing",
    "hints",
    "late_seconds",
    "late_penalty",
    "student_ms",
    "reference_ms",
    "ratio",
    "timing_points",
)
"""The long table's columns. name: "First Last" from the roster, "" when it has none (the
LMS needs `student`, the id). section: the notebook heading above the cell ("" when the
source notebook is not in the course folder; an optional cell then takes the name of the
extra-credit cell that ends its section). standing: "held for review", "blank: nothing
written" or "" (`StudentRecord.standing`) on each graded row. kind: public, hidden, manual,
extra credit, or optional (a 0-point check). late_penalty: the points the late policy takes
from the student's score, as the export computes it (NaN unless graded). student_ms and
reference_ms are the timing sidecar's medians summed over the hidden shapes, ratio the
geometric mean of its per-shape ratios; NaN when a student has no timing sidecar (no GPU at
autograde), never zero."""


def build_table(cohort: Cohort) -> pd.DataFrame:
    """One row per (student, graded cell), every roster student included."""
    rows = []
    sections = cell_sections(cohort.cells)
    for record in cohort.students:
        timing = timing_columns(record.timing)
        for position, cell in enumerate(cohort.cells):
            status, reason, score = _cell_status(record, cell)
            rows.append(
                {
                    "student": record.student,
                    "name": record.name,
                    "notebook": cell.notebook,
                    "section": sections[cell.name],
                    "cell": cell.name,
                    "position": position,
                    "kind": cell.kind,
                    "score": score,
                    "max_score": cell.max_score,
                    "status": status,
                    "reason": reason,
                    "standing": record.standing if status in ("graded", "manual") else "",
                    "hints": ";".join(_cell_hints(record, cell)) if status == "graded" else "",
                    "late_seconds": math.nan
                    if record.late_seconds is None
                    else record.late_seconds,
                    "late_penalty": math.nan
                    if record.late_penalty is None
                    else record.late_penalty,
                    **timing,
                }
            )
    return _typed(pd.DataFrame(rows, columns=list(COLUMNS)))


def _typed(table: pd.DataFrame) -> pd.DataFrame:
    """Fix the column dtypes, so that a table read back from CSV compares equal."""
    floats = ["score", "max_score", "late_seconds", "late_penalty"]
    floats += ["student_ms", "reference_ms", "ratio"]
    table = table.astype({c: "float64" for c in [*floats, "timing_points"]})
    table = table.astype({"position": "int64"})
    for column in TEXT_COLUMNS:
        table[column] = table[column].fillna("").astype(str)
    return table


TEXT_COLUMNS = (
    "student",
    "name",
    "notebook",
    "section",
    "cell",
    "kind",
    "status",
    "reason",
    "standing",
    "hints",
)


def cell_sections(cells: list[CellInfo]) -> dict[str, str]:
    """{cell: its section}: the heading above it, else, for an optional section's cell, the
    name of the extra-credit cell that ends its run of optional cells (the section it belongs
    to, in notebook order), else ""."""
    found, run = {}, []
    for cell in cells:
        found[cell.name] = cell.section
        if cell.section or cell.kind not in OPTIONAL_KINDS:
            run = []
            continue
        run.append(cell.name)
        if cell.kind == EXTRA:
            found.update(dict.fromkeys(run, cell.name))
            run = []
    return found


def _cell_status(record: StudentRecord, cell: CellInfo) -> tuple[str, str, float]:
    """(status, reason, score) of one student's cell; the score is NaN unless graded."""
    if not record.submitted or record.ungradable or not record.autograded:
        return _unscored(record)
    grade = record.grades.get((cell.notebook, cell.name))
    if grade is None:
        return "not graded", "the gradebook has no grade for this cell", math.nan
    extra = grade.extra_credit or 0.0
    if grade.manual_score is not None:
        return "graded", "graded by hand", grade.manual_score + extra
    if cell.timing and record.no_gpu:
        return "no GPU", NO_GPU_REASON, math.nan
    if record.internal & set(cell.sidecar_keys):
        return (
            "internal error",
            "the checker failed in this cell, not the student's code: fix it and autograde again",
            math.nan,
        )
    if grade.needs_manual_grade:
        return "manual", "waiting for manual grading", math.nan
    if grade.auto_score is None:
        return "not graded", "the autograder left no score", math.nan
    return "graded", "", grade.auto_score + extra


def _unscored(record: StudentRecord) -> tuple[str, str, float]:
    """(status, reason, NaN) of each cell of a student without an autograded notebook."""
    if record.submitted:
        return "ungradable", record.ungradable or NO_NOTEBOOK, math.nan
    if record.not_gradable:
        return NOT_GRADABLE, record.not_gradable, math.nan
    if record.in_submitted_folder:
        return "not graded", NOT_AUTOGRADED, math.nan
    return "no submission", "on the roster, nothing submitted", math.nan


def _cell_hints(record: StudentRecord, cell: CellInfo) -> list[str]:
    """The hint ids the cell's tests recorded for this student, in first-seen order."""
    if not record.hints:
        return []
    found = [h for key in cell.sidecar_keys for h in record.hints.get(key, [])]
    return list(dict.fromkeys(found))


def hint_table(cohort: Cohort) -> pd.DataFrame:
    """Per hint id: how many students' sidecars fired it and who, in the required sections'
    tests (`students`, `names`) and apart in the optional sections' (`optional`,
    `optional_names`: the tests of their extra-credit and 0-point cells); most first."""
    optional = optional_keys(cohort.cells)
    who: dict[str, tuple[list[str], list[str]]] = {}
    for record in cohort.students:
        tests = (record.hints or {}).items()
        required = {h for key, hints in tests if key not in optional for h in hints}
        extra = {h for key, hints in tests if key in optional for h in hints}
        for hint in sorted(required | extra):
            lists = who.setdefault(hint, ([], []))
            for names, fired in zip(lists, (required, extra), strict=True):
                if hint in fired:
                    names.append(record.student)

    def column(part: int, joined: bool) -> pd.Series:
        values = {h: ", ".join(n[part]) if joined else len(n[part]) for h, n in who.items()}
        return pd.Series(values, dtype=str if joined else "int64")

    table = pd.DataFrame(
        {
            "students": column(0, False),
            "names": column(0, True),
            "optional": column(1, False),
            "optional_names": column(1, True),
        }
    )
    table.index.name = "hint"
    return table.sort_index().sort_values(["students", "optional"], ascending=False, kind="stable")


def optional_keys(cells: list[CellInfo]) -> set[str]:
    """The sidecar keys the optional sections' cells write (extra credit, 0-point checks)."""
    required = {key for c in cells if c.kind not in OPTIONAL_KINDS for key in c.sidecar_keys}
    return {key for c in cells if c.kind in OPTIONAL_KINDS for key in c.sidecar_keys} - required


def totals(table: pd.DataFrame) -> pd.DataFrame:
    """Per student: status, points so far (graded cells, extra credit included: `total`, the
    raw score), the points available (less a timing cell that found no GPU), and the late
    penalty and the score after it (`after_late`, never below 0), as the export gives them."""
    grouped = table.groupby("student", sort=True)
    statuses = grouped["status"].agg(_student_status)
    standing = grouped["standing"].first()
    counted = (table["status"] != "no GPU") & (table["kind"] != EXTRA)  # extra: never owed
    available = table["max_score"].where(counted, 0.0)
    total = grouped["score"].sum(min_count=1).where(statuses == "graded")
    penalty = grouped["late_penalty"].first().where(statuses == "graded")
    return pd.DataFrame(
        {
            "status": statuses,
            "total": total,
            "max_total": available.groupby(table["student"], sort=True).sum(),
            "late_seconds": grouped["late_seconds"].first(),
            "late_penalty": penalty,
            "after_late": (total - penalty.fillna(0.0)).clip(lower=0.0),
            "standing": standing,
        }
    ).sort_index(key=lambda ids: ids.map(student_key))


def _student_status(statuses: pd.Series) -> str:
    """graded (manual cells may still be pending), ungradable, not gradable as is, not
    graded, or no submission."""
    for status in ("no submission", "ungradable", NOT_GRADABLE, "not graded"):
        if (statuses == status).all():
            return status
    return "graded"


def wide_table(table: pd.DataFrame) -> pd.DataFrame:
    """Scores per student x cell (notebook order), then the raw total, the late penalty, the
    score after it (the export's `score`), the status and the standing; students by id."""
    cells = table.sort_values("position")["cell"].unique()
    wide = table.pivot(index="student", columns="cell", values="score")[list(cells)]
    summed = totals(table)
    wide = wide.loc[summed.index]
    for column in ("total", "late_penalty", "after_late", "status", "standing"):
        wide[column] = summed[column]
    return wide


def save_table(table: pd.DataFrame, out: Path) -> list[Path]:
    """Write `cohort.csv`, and `cohort.parquet` when a Parquet engine is installed."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "cohort.csv"]
    table.to_csv(paths[0], index=False)
    if _parquet_engine():
        paths.append(out / "cohort.parquet")
        table.to_parquet(paths[1], index=False)
    return paths


def read_table(path: Path | str) -> pd.DataFrame:
    """Read a table written by `save_table` back, with the same dtypes."""
    path = Path(path)
    if path.suffix == ".parquet":
        return _typed(pd.read_parquet(path))
    text = list(TEXT_COLUMNS)
    return _typed(
        pd.read_csv(
            path,
            dtype={c: str for c in text},
            keep_default_na=False,
            na_values={c: [""] for c in COLUMNS if c not in text},
        )
    )


def _parquet_engine() -> str | None:
    for engine in ("pyarrow", "fastparquet"):
        try:
            __import__(engine)
        except ImportError:
            continue
        return engine
    return None
