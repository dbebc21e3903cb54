"""The instructor's cohort report: per-cell scores, hints and GPU timings in one table.

    python -m grader.cohort i1_strided_softmax --course PATH --out reports/cohort

Reads nbgrader's gradebook (per-cell scores, late seconds, students who submitted nothing),
the hint sidecars (`i1_hints.json`) and the GPU timing sidecars (`i1_timing.json`) beside
each autograded notebook. Writes one long table (one row per student and graded cell) as
CSV, and Parquet when pyarrow is installed, six PNG plots and `index.html`. Missing data
stays missing: a course autograded without a GPU has no timing sidecars, and the plots that
need them say so instead of drawing zeros.
"""

from __future__ import annotations

import argparse
import ast
import html
import itertools
import json
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import NullLocator
from tqdm import tqdm

from grader.course import CourseError, open_gradebook
from grader.grading_log import read_record
from learning.workshops.results import Results, ResultsError
from learning.workshops.results import load as load_results

REPO = Path(__file__).resolve().parents[1]
HINTS_SIDECAR = "i1_hints.json"  # learning.workshops.testing.HINTS_SIDECAR
TIMING_SIDECAR = "i1_timing.json"  # grader.gpu_timing.SIDECAR
HINTS_SCHEMA = "i1-hints/1"
TIMING_SCHEMA = "i1-timing/1"
BYTES_PER_ELEMENT = 4
"""The timing cell times fp32 inputs: logical traffic is 2 x M x N x 4 bytes."""
BANDS = ((1.10, "full points"), (1.5, "3/4"), (2.5, "1/2"), (5.0, "1/4"))
"""The timing cell's bands (grader.gpu_timing.BANDS), drawn as guides on the ratio plot."""
PROGRESS_FROM = 50
"""Show a progress bar when a course has at least this many students."""
DPI = 130
NEEDS_GPU = "needs a GPU: no timing sidecars in this course"
NEEDS_GPU_PANEL = f"{NEEDS_GPU}\n(autograde on a CUDA machine to time each student's kernel)"

STATUSES = ("graded", "manual", "internal error", "ungradable", "not graded", "no submission")
"""graded: the autograder scored it; manual: waiting for manual grading; internal error: the
checker itself failed in this cell (its sidecar entry says so), so the score is no verdict on
the student; ungradable: nbgrader has the submission but could not grade it (the reason is
the cause in its grading record, e.g. "the kernel died: ...", as `nbgrader export` reports
it; without a record, "no autograded notebook; see the autograde log"); not graded: no score
for this cell, or submitted but not autograded yet; no submission: on the roster, nothing
submitted."""
INTERNAL_ERROR = "internal-error"  # learning.workshops.faults.INTERNAL_ERROR
NO_NOTEBOOK = "no autograded notebook; see the autograde log"  # grader.export.NO_NOTEBOOK
CHECK_KEYS = {
    "expect_address_table": "hidden:address_table",  # grader.hidden.function_check
    "expect_worksheet": "hidden:worksheet",
    "timing_points": "hidden:timing",  # grader.gpu_timing.TEST
}
"""The sidecar key of each hidden check that tests one function, and of the timing cell."""

COLOURS = {
    "public": "#6baed6",
    "hidden": "#08519c",
    "bug": "#e45756",
    "partial": "#f2b447",
    "reference": "#222222",
    "missing": "#9a9a9a",
}


class CohortError(Exception):
    """The course cannot be reported on; the message says what to run first."""


# -- what the gradebook and the sidecars hold ------------------------------------------


@dataclass(frozen=True)
class CellInfo:
    """A graded cell of the assignment, in notebook order."""

    notebook: str
    name: str
    max_score: float
    kind: str  # public, hidden, manual
    sidecar_keys: tuple[str, ...]  # the hint-sidecar tests this cell runs
    timing: bool  # the GPU timing cell


@dataclass(frozen=True)
class CellGrade:
    """One student's grade for one cell, as the gradebook stores it."""

    auto_score: float | None
    manual_score: float | None
    extra_credit: float | None
    needs_manual_grade: bool


@dataclass(frozen=True)
class ShapeTime:
    """One hidden shape of a timing sidecar."""

    rows: int
    cols: int
    student_ms: float
    reference_ms: float
    ratio: float
    correct: bool
    fraction: float

    @property
    def shape(self) -> str:
        return f"{self.rows}x{self.cols}"


@dataclass(frozen=True)
class TimingRecord:
    """A timing sidecar: where it ran, the points it gave, and each shape's medians."""

    device: str
    points: float
    max_points: float
    shapes: tuple[ShapeTime, ...]


@dataclass
class StudentRecord:
    """Everything the report knows about one student on the roster."""

    student: str
    submitted: bool
    autograded: bool  # an autograded notebook exists
    in_submitted_folder: bool
    late_seconds: float | None
    grades: dict[tuple[str, str], CellGrade] = field(default_factory=dict)
    hints: dict[str, list[str]] | None = None  # sidecar test key -> hint ids
    timing: TimingRecord | None = None
    internal: frozenset[str] = frozenset()  # sidecar test keys whose checker failed
    ungradable: str = ""  # why nbgrader could not grade the submission ("" when it did)
    restored: tuple[str, ...] = ()  # cells put back before grading (its grading record)


@dataclass
class Cohort:
    """The assignment's cells and every student on the roster."""

    course: Path
    assignment: str
    cells: list[CellInfo]
    students: list[StudentRecord]


@dataclass(frozen=True)
class Summary:
    """The numbers at the top of the report."""

    students: int
    submitted: int
    graded: int
    not_graded: tuple[tuple[str, str], ...]  # (student, reason): "ungradable: <cause>", ...
    missing: tuple[str, ...]
    late: tuple[tuple[str, float], ...]  # (student, seconds late)
    mean_score: float  # over graded students; NaN when none
    max_score: float
    manual_points: float  # points per student graded by hand
    manual_pending: int  # cells waiting for manual grading
    with_hints: int
    with_timing: int
    internal_errors: tuple[tuple[str, str], ...] = ()  # (student, cell) the checker failed in
    restored: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (student, cells put back)


# -- reading ----------------------------------------------------------------------------


def gradebook_path(course: Path) -> Path:
    return Path(course) / "gradebook.db"


def sidecar_keys(source: str) -> tuple[str, ...]:
    """The hint-sidecar keys a test cell writes: its expect_cases / expect_hidden calls.

    Mirrors `learning.workshops.testing.expect_cases` (`public:OP[:names joined by +]`) and
    `grader.hidden.expect_hidden` (`hidden:OP`), read with `ast` from the cell's source.
    """
    keys = []
    for call in _calls(source):
        name, args = _call_name(call), call.args
        if name in CHECK_KEYS:
            keys.append(CHECK_KEYS[name])
            continue
        if name not in ("expect_cases", "expect_hidden") or len(args) < 2:
            continue
        op = _string(args[1])
        if op is None:
            continue
        if name == "expect_hidden":
            keys.append(f"hidden:{op}")
            continue
        names = args[2] if len(args) > 2 else _keyword(call, "names")
        listed = _strings(names)
        if listed:
            keys.append(f"public:{op}:" + "+".join(sorted(set(listed))))
        elif listed is not None or names is None or _string(names) is None:
            keys.append(f"public:{op}")
    return tuple(dict.fromkeys(keys))


def calls_function(source: str, function: str) -> bool:
    """Whether a cell's source calls `function` (by name or attribute)."""
    return any(_call_name(call) == function for call in _calls(source))


def _calls(source: str) -> list[ast.Call]:
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return []
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    return sorted(calls, key=lambda c: (c.lineno, c.col_offset))


def _call_name(call: ast.Call) -> str:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return ""


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _string(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _strings(node: ast.expr | None) -> list[str] | None:
    """The strings of a literal list/tuple/set of strings; None for anything else."""
    if not isinstance(node, ast.List | ast.Tuple | ast.Set):
        return None
    values = [_string(e) for e in node.elts]
    return None if any(v is None for v in values) else values


def load_gradebook(course: Path, assignment: str) -> tuple[list[CellInfo], list[StudentRecord]]:
    """Cells and per-student grades from nbgrader's gradebook, every roster student included."""
    path = gradebook_path(course)
    if not Path(course).is_dir():
        raise CohortError(
            f"no course folder at {course}: pass --course with an nbgrader course directory"
        )
    if not path.is_file():
        raise CohortError(
            f"no gradebook at {path}: run `nbgrader generate_assignment {assignment}` and "
            f"`nbgrader autograde {assignment}` in {course} first"
        )
    from nbgrader.api import MissingEntry  # slow to import: only with a gradebook

    try:
        opened = open_gradebook(f"sqlite:///{path}")
    except CourseError as exc:
        raise CohortError(str(exc)) from None
    with opened as gradebook:
        try:
            found = gradebook.find_assignment(assignment)
        except MissingEntry:
            known = ", ".join(a.name for a in gradebook.assignments) or "none"
            raise CohortError(
                f"no assignment {assignment!r} in {path} (it has: {known}): check the name, or "
                f"run `nbgrader generate_assignment {assignment}` in {course} first"
            ) from None
        cells = [cell for nb in found.notebooks for cell in _cells(nb)]
        students = [
            _student_record(gradebook, course, assignment, student.id)
            for student in _progress(gradebook.students, "reading the gradebook")
        ]
    students.sort(key=lambda s: s.student)
    return cells, students


def _cells(notebook) -> list[CellInfo]:
    """A notebook's grade cells in notebook order, each with its kind and sidecar keys."""
    sources = {cell.name: cell.source or "" for cell in notebook.source_cells}
    order = {name: i for i, name in enumerate(sources)}
    manual = {cell.name for cell in notebook.solution_cells}
    cells = []
    for cell in sorted(notebook.grade_cells, key=lambda c: order.get(c.name, len(order))):
        source = sources.get(cell.name, "")
        if cell.name in manual or cell.cell_type == "markdown":
            kind = "manual"
        elif "BEGIN HIDDEN TESTS" in source:
            kind = "hidden"
        else:
            kind = "public"
        cells.append(
            CellInfo(
                notebook.name,
                cell.name,
                float(cell.max_score),
                kind,
                sidecar_keys(source),
                calls_function(source, "timing_points"),
            )
        )
    return cells


def _student_record(gradebook, course: Path, assignment: str, student: str) -> StudentRecord:
    from nbgrader.api import MissingEntry

    folder = Path(course) / "autograded" / student / assignment
    submitted_folder = (Path(course) / "submitted" / student / assignment).is_dir()
    try:
        submission = gradebook.find_submission(assignment, student)
    except MissingEntry:
        return StudentRecord(student, False, False, submitted_folder, None)
    grades = {
        (nb.name, grade.name): CellGrade(
            _float(grade.auto_score),
            _float(grade.manual_score),
            _float(grade.extra_credit),
            bool(grade.needs_manual_grade),
        )
        for nb in submission.notebooks
        for grade in nb.grades
    }
    autograded = any((folder / f"{nb.name}.ipynb").is_file() for nb in submission.notebooks)
    from grader.export import UNGRADABLE, submission_outcome  # imports nbgrader: only here

    status, cause = submission_outcome(
        course, assignment, student, folder, [nb.name for nb in submission.notebooks]
    )
    graded = read_record(course, assignment, student)
    return StudentRecord(
        student,
        True,
        autograded,
        submitted_folder,
        float(submission.total_seconds_late),
        grades,
        ungradable=cause if status == UNGRADABLE else "",
        restored=tuple(graded.restored) if graded else (),
    )


def _float(value) -> float | None:
    return None if value is None else float(value)


def _progress(items: Iterable, what: str) -> list:
    items = list(items)
    return list(tqdm(items, desc=what, unit="student", disable=len(items) < PROGRESS_FROM))


def load_hints(path: Path) -> dict[str, list[str]] | None:
    """A hint sidecar as {test key: hint ids}; None when absent or not of its schema."""
    tests = _sidecar_tests(path)
    if tests is None:
        return None
    return {key: [str(h) for h in outcome.get("hints", [])] for key, outcome in tests.items()}


def load_internal_errors(path: Path) -> frozenset[str]:
    """The test keys of a hint sidecar whose status says the checker itself failed."""
    tests = _sidecar_tests(path) or {}
    return frozenset(k for k, outcome in tests.items() if outcome.get("status") == INTERNAL_ERROR)


def _sidecar_tests(path: Path) -> dict[str, dict] | None:
    record = _read_json(path)
    if not isinstance(record, dict) or record.get("schema") != HINTS_SCHEMA:
        return None
    tests = record.get("tests")
    if not isinstance(tests, dict):
        return None
    return {key: outcome for key, outcome in tests.items() if isinstance(outcome, dict)}


def load_timing(path: Path) -> TimingRecord | None:
    """A GPU timing sidecar; None when absent or not of its schema."""
    record = _read_json(path)
    if not isinstance(record, dict) or record.get("schema") != TIMING_SCHEMA:
        return None
    try:
        shapes = tuple(
            ShapeTime(
                int(s["rows"]),
                int(s["cols"]),
                float(s["student_ms"]),
                float(s["reference_ms"]),
                float(s["ratio"]),
                bool(s["correct"]),
                float(s["fraction"]),
            )
            for s in record["shapes"]
        )
        return TimingRecord(
            str(record.get("device", "unknown device")),
            float(record["points"]),
            float(record["max_points"]),
            shapes,
        )
    except (KeyError, TypeError, ValueError):
        return None


def _read_json(path: Path) -> object:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def load_cohort(course: Path | str, assignment: str) -> Cohort:
    """The gradebook and every student's sidecars, for one assignment of a course."""
    course = Path(course).resolve()
    cells, students = load_gradebook(course, assignment)
    for record in _progress(students, "reading sidecars"):
        folder = course / "autograded" / record.student / assignment
        if record.autograded and not record.ungradable:
            record.hints = load_hints(folder / HINTS_SIDECAR)
            record.internal = load_internal_errors(folder / HINTS_SIDECAR)
            record.timing = load_timing(folder / TIMING_SIDECAR)
    return Cohort(course, assignment, cells, students)


# -- the tables -------------------------------------------------------------------------

COLUMNS = (
    "student",
    "notebook",
    "cell",
    "position",
    "kind",
    "score",
    "max_score",
    "status",
    "reason",
    "hints",
    "late_seconds",
    "student_ms",
    "reference_ms",
    "ratio",
    "timing_points",
)
"""The long table's columns. student_ms and reference_ms are the timing sidecar's medians
summed over the hidden shapes, ratio the geometric mean of its per-shape ratios; NaN when a
student has no timing sidecar (no GPU at autograde), never zero."""


def build_table(cohort: Cohort) -> pd.DataFrame:
    """One row per (student, graded cell), every roster student included."""
    rows = []
    for record in cohort.students:
        timing = _timing_columns(record.timing)
        for position, cell in enumerate(cohort.cells):
            status, reason, score = _cell_status(record, cell)
            rows.append(
                {
                    "student": record.student,
                    "notebook": cell.notebook,
                    "cell": cell.name,
                    "position": position,
                    "kind": cell.kind,
                    "score": score,
                    "max_score": cell.max_score,
                    "status": status,
                    "reason": reason,
                    "hints": ";".join(_cell_hints(record, cell)) if status == "graded" else "",
                    "late_seconds": math.nan
                    if record.late_seconds is None
                    else record.late_seconds,
                    **timing,
                }
            )
    return _typed(pd.DataFrame(rows, columns=list(COLUMNS)))


def _typed(table: pd.DataFrame) -> pd.DataFrame:
    """Fix the column dtypes, so that a table read back from CSV compares equal."""
    floats = ["score", "max_score", "late_seconds", "student_ms", "reference_ms", "ratio"]
    table = table.astype({c: "float64" for c in [*floats, "timing_points"]})
    table = table.astype({"position": "int64"})
    for column in ("student", "notebook", "cell", "kind", "status", "reason", "hints"):
        table[column] = table[column].fillna("").astype(str)
    return table


def _cell_status(record: StudentRecord, cell: CellInfo) -> tuple[str, str, float]:
    """(status, reason, score) of one student's cell; the score is NaN unless graded."""
    if not record.submitted:
        if record.in_submitted_folder:
            return "not graded", "submitted but not autograded: run nbgrader autograde", math.nan
        return "no submission", "on the roster, nothing submitted", math.nan
    if record.ungradable or not record.autograded:
        return "ungradable", record.ungradable or NO_NOTEBOOK, math.nan
    grade = record.grades.get((cell.notebook, cell.name))
    if grade is None:
        return "not graded", "the gradebook has no grade for this cell", math.nan
    extra = grade.extra_credit or 0.0
    if grade.manual_score is not None:
        return "graded", "graded by hand", grade.manual_score + extra
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


def _cell_hints(record: StudentRecord, cell: CellInfo) -> list[str]:
    """The hint ids the cell's tests recorded for this student, in first-seen order."""
    if not record.hints:
        return []
    found = [h for key in cell.sidecar_keys for h in record.hints.get(key, [])]
    return list(dict.fromkeys(found))


def _timing_columns(timing: TimingRecord | None) -> dict[str, float]:
    if timing is None or not timing.shapes:
        nan = math.nan
        return {"student_ms": nan, "reference_ms": nan, "ratio": nan, "timing_points": nan}
    ratios = [s.ratio for s in timing.shapes]
    return {
        "student_ms": sum(s.student_ms for s in timing.shapes),
        "reference_ms": sum(s.reference_ms for s in timing.shapes),
        "ratio": float(np.exp(np.mean(np.log(ratios)))),
        "timing_points": timing.points,
    }


def timing_table(timings: dict[str, TimingRecord | None]) -> pd.DataFrame:
    """One row per (student, hidden shape) from the timing sidecars; empty without any."""
    rows = [
        {
            "student": student,
            "device": record.device,
            "shape": s.shape,
            "rows": s.rows,
            "cols": s.cols,
            "student_ms": s.student_ms,
            "reference_ms": s.reference_ms,
            "ratio": s.ratio,
            "correct": s.correct,
            "fraction": s.fraction,
            "student_gbps": _gbps(s.rows, s.cols, s.student_ms),
            "reference_gbps": _gbps(s.rows, s.cols, s.reference_ms),
        }
        for student, record in timings.items()
        if record is not None
        for s in record.shapes
    ]
    columns = ["student", "device", "shape", "rows", "cols", "student_ms", "reference_ms"]
    columns += ["ratio", "correct", "fraction", "student_gbps", "reference_gbps"]
    return pd.DataFrame(rows, columns=columns)


def _gbps(rows: int, cols: int, ms: float) -> float:
    """Logical bandwidth: the view read once and the output written once, fp32."""
    return 2 * rows * cols * BYTES_PER_ELEMENT / (ms * 1e-3) / 1e9


def hint_table(cohort: Cohort) -> pd.DataFrame:
    """Per hint id: how many students' sidecars fired it (any test) and who; most first."""
    who: dict[str, list[str]] = {}
    for record in cohort.students:
        fired = {h for hints in (record.hints or {}).values() for h in hints}
        for hint in sorted(fired):
            who.setdefault(hint, []).append(record.student)
    table = pd.DataFrame(
        {
            "students": pd.Series({h: len(names) for h, names in who.items()}, dtype="int64"),
            "names": pd.Series({h: ", ".join(names) for h, names in who.items()}, dtype=str),
        }
    )
    table.index.name = "hint"
    return table.sort_index().sort_values("students", ascending=False, kind="stable")


def totals(table: pd.DataFrame) -> pd.DataFrame:
    """Per student: status, points so far (graded cells) and the points available."""
    grouped = table.groupby("student", sort=True)
    statuses = grouped["status"].agg(_student_status)
    return pd.DataFrame(
        {
            "status": statuses,
            "total": grouped["score"].sum(min_count=1).where(statuses == "graded"),
            "max_total": grouped["max_score"].sum(),
            "late_seconds": grouped["late_seconds"].first(),
        }
    )


def _student_status(statuses: pd.Series) -> str:
    """graded (manual cells may still be pending), ungradable, not graded, or no submission."""
    for status in ("no submission", "ungradable", "not graded"):
        if (statuses == status).all():
            return status
    return "graded"


def wide_table(table: pd.DataFrame) -> pd.DataFrame:
    """Scores per student x cell (notebook order), then total and status."""
    cells = table.sort_values("position")["cell"].unique()
    wide = table.pivot(index="student", columns="cell", values="score")[list(cells)]
    summed = totals(table)
    wide["total"] = summed["total"]
    wide["status"] = summed["status"]
    return wide


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
    )


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
    text = ["student", "notebook", "cell", "kind", "status", "reason", "hints"]
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


# -- plots ------------------------------------------------------------------------------


def plot_scores(table: pd.DataFrame) -> Figure:
    """Histogram of total points over graded students; the others are named, not drawn."""
    summed = totals(table)
    graded = summed[summed["status"] == "graded"]["total"]
    max_total = float(summed["max_total"].max()) if len(summed) else 0.0
    fig = Figure(figsize=(8, 4.6), layout="constrained")
    ax = fig.add_subplot()
    ax.set_label("scores")
    if graded.empty:
        ax.set_title("Total points: no graded submissions", loc="left")
        _message(ax, "no graded submissions yet: run nbgrader autograde")
    else:
        edges = np.arange(0, math.floor(max_total) + 2) - 0.5
        counts, _, bars = ax.hist(graded, bins=edges, color=COLOURS["public"], rwidth=0.85)
        ax.bar_label(bars, labels=[f"{int(c)}" if c else "" for c in counts], fontsize=9)
        mean = float(graded.mean())
        ax.axvline(mean, color=COLOURS["reference"], linestyle="--", linewidth=1, label="mean")
        ax.set_xlim(-0.5, max_total + 0.5)
        ax.set_ylim(0, counts.max() * 1.15)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.legend(loc="upper left", fontsize=9)
        ax.set_title(
            f"Total points of the {len(graded)} graded submissions: mean {mean:.1f} of "
            f"{max_total:g}",
            loc="left",
        )
    ax.set_xlabel(f"total points (of {max_total:g}){_pending_note(table)}")
    ax.set_ylabel("students")
    left_out = _left_out(summed)
    if left_out:
        fig.text(0.01, 0.005, "not drawn: " + left_out, fontsize=9, color="#444444")
        fig.get_layout_engine().set(rect=(0, 0.05, 1, 0.95))
    return fig


def _pending_note(table: pd.DataFrame) -> str:
    pending = table[table["status"] == "manual"]
    if pending.empty:
        return ""
    points = pending.drop_duplicates("cell")["max_score"].sum()
    students = pending["student"].nunique()
    return f"; {points:g} points graded by hand are not in yet for {students} students"


def _left_out(summed: pd.DataFrame) -> str:
    parts = []
    for status in ("ungradable", "not graded", "no submission"):
        names = list(summed.index[summed["status"] == status])
        if names:
            parts.append(f"{len(names)} {status} ({', '.join(names)})")
    return "; ".join(parts)


def plot_pass_rates(table: pd.DataFrame, needs_gpu: Iterable[str] = ()) -> Figure:
    """For each autograded cell, in notebook order: the share of graded students at full marks.

    Cells in `needs_gpu` (the timing cell of a course autograded without a GPU) say so.
    """
    graded = table[(table["status"] == "graded") & (table["kind"] != "manual")]
    cells = table[table["kind"] != "manual"].drop_duplicates("cell").sort_values("position")
    students = graded["student"].nunique()
    fig = Figure(figsize=(8.5, 0.42 * len(cells) + 1.9), layout="constrained")
    ax = fig.add_subplot()
    ax.set_label("pass rates")
    if students == 0:
        _message(ax, "no graded submissions yet: run nbgrader autograde")
        return fig
    needs_gpu = set(needs_gpu)
    for y, cell in enumerate(cells.itertuples()):
        scores = graded[graded["cell"] == cell.cell]["score"]
        full = float((scores >= cell.max_score).mean() * 100) if len(scores) else 0.0
        partial = float(((scores > 0) & (scores < cell.max_score)).mean() * 100)
        ax.barh(y, full, color=COLOURS[cell.kind], gid=f"pass:{cell.cell}")
        ax.barh(y, partial, left=full, color=COLOURS["partial"])
        label = f"{int((scores >= cell.max_score).sum())}/{len(scores)}"
        if cell.cell in needs_gpu:
            label += "   (needs a GPU: autograded without one, so this cell scored 0)"
        ax.text(full + partial + 1, y, label, va="center", fontsize=9)
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
            Patch(color=COLOURS["partial"], label="partial credit"),
        ],
        loc="outside lower center",
        ncols=3,
        frameon=False,
    )
    return fig


def plot_hints(hints: pd.DataFrame, with_sidecar: int) -> Figure:
    """How many students each hint fired for, across all of their recorded tests, and who."""
    fig = Figure(figsize=(9, 0.45 * max(len(hints), 3) + 1.6), layout="constrained")
    ax = fig.add_subplot()
    ax.set_label("hints")
    ax.set_title(
        f"Which hints fired, and for whom ({with_sidecar} students with hint records)", loc="left"
    )
    if with_sidecar == 0:
        _message(
            ax,
            f"no hint sidecars ({HINTS_SIDECAR}) in this course:\n"
            "autograde with this course's test cells to record them",
        )
        return fig
    if hints.empty:
        _message(ax, f"no hint fired: every recorded test of the {with_sidecar} students passed")
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


def plot_speedup(timing: pd.DataFrame, benchmark: Results | None) -> Figure:
    """Left: each student's time / reference time per hidden shape (timing sidecars).
    Right: direct vs copy-first by num_warps and shape (the --benchmark file)."""
    students = timing["student"].nunique() if not timing.empty else 0
    fig = Figure(figsize=(14, max(5.0, 0.3 * students + 2.2)), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=(1.25, 1))
    left.set_label("cohort ratio")
    right.set_label("benchmark direct/copy")
    _draw_ratios(left, timing)
    _draw_direct_copy(right, benchmark)
    fig.suptitle(
        "Speed: each student against the reference, and reading in place against copying first",
        fontsize=13,
    )
    return fig


SHAPE_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#9d755d", "#72b7b2")
RATIO_TICKS = (0.25, 0.5, 1.0, 1.1, 1.5, 2.5, 5.0, 10.0)


def _draw_ratios(ax: Axes, timing: pd.DataFrame) -> None:
    """One row per student (slowest on top), one marker per hidden shape, bands shaded."""
    ax.set_title(
        "Student kernel time / reference time, per hidden shape\n"
        "(GPU timing cell: transposed fp32, 4 warps, cold L2; lower is faster)",
        loc="left",
        fontsize=10,
    )
    if timing.empty:
        _message(ax, NEEDS_GPU_PANEL)
        return
    order = timing.groupby("student")["ratio"].apply(lambda r: np.exp(np.log(r).mean()))
    students = list(order.sort_values(kind="stable").index)
    shapes = list(dict.fromkeys(timing["shape"]))
    low = min(0.8, timing["ratio"].min() * 0.8)
    high = max(1.6, timing["ratio"].max() * 1.25)
    edges = (low, *(limit for limit, _ in BANDS), max(high, BANDS[-1][0] * 1.2))
    shades = ("#e8f4e8", "#fbf3dc", "#fbe8d0", "#f8dcd6", "#f3cccc")
    for (start, end), shade in zip(itertools.pairwise(edges), shades, strict=False):
        ax.axvspan(start, end, color=shade, zorder=0)
    for (start, end), (_, points) in zip(itertools.pairwise(edges), BANDS, strict=False):
        if start < high:
            middle = math.sqrt(start * min(end, high))
            ax.text(
                middle,
                0.995,
                points,
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="top",
                fontsize=8,
                color="#555555",
            )
    ax.axvline(1.0, color=COLOURS["reference"], linewidth=1)
    for i, shape in enumerate(shapes):
        rows = timing[timing["shape"] == shape]
        y = [students.index(s) + (i - (len(shapes) - 1) / 2) * 0.18 for s in rows["student"]]
        ok = rows["correct"].to_numpy()
        colour = SHAPE_COLOURS[i % len(SHAPE_COLOURS)]
        ax.scatter(
            rows["ratio"][ok],
            np.array(y)[ok],
            color=colour,
            zorder=3,
            label=shape,
            gid=f"ratio:{shape}",
        )
        ax.scatter(rows["ratio"][~ok], np.array(y)[~ok], color=colour, marker="x", zorder=3)
    ax.scatter([], [], color="#555555", marker="x", label="wrong output after timing (0 points)")
    ax.set_xscale("log")
    ax.set_xlim(low, high)
    ticks = [t for t in RATIO_TICKS if low <= t <= high]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_yticks(range(len(students)), students, fontsize=8)
    ax.set_ylim(-0.6, len(students) + 0.2)
    ax.set_xlabel(f"time / reference time (log scale; {len(students)} students with timing)")
    ax.legend(loc="upper left", bbox_to_anchor=(0, -0.1), ncols=3, fontsize=8, frameon=False)


def _draw_direct_copy(ax: Axes, benchmark: Results | None) -> None:
    if benchmark is None:
        ax.set_title("Direct vs copy-first, by num_warps", loc="left", fontsize=10)
        _message(
            ax,
            "no benchmark results given:\npass --benchmark FILE (written by\n"
            "python -m learning.workshops.benchmark)",
        )
        return
    ax.set_title(
        f"Copy-first time / direct time on the transposed view\n"
        f"({benchmark.device}, {benchmark.impl}; >1: reading the view in place wins)",
        loc="left",
        fontsize=10,
    )
    pairs = []
    for direct in benchmark.rows:
        if direct.variant != "direct" or direct.layout != "transpose" or not direct.num_warps:
            continue
        try:
            copy = benchmark.find("copy", direct.shape, "transpose", direct.mode, direct.num_warps)
        except KeyError:
            continue
        pairs.append(
            (f"{direct.shape}\n{direct.mode}", direct.num_warps, copy.median_ms / direct.median_ms)
        )
    if not pairs:
        _message(ax, "the benchmark file has no direct and copy rows\nfor the transposed view")
        return
    groups = list(dict.fromkeys(p[0] for p in pairs))
    warps = sorted({p[1] for p in pairs})
    width = 0.8 / len(warps)
    palette = ("#4c78a8", "#f58518", "#54a24b", "#b279a2")
    for i, w in enumerate(warps):
        xs = [groups.index(g) + (i - (len(warps) - 1) / 2) * width for g, pw, _ in pairs if pw == w]
        ys = [r for _, pw, r in pairs if pw == w]
        bars = ax.bar(xs, ys, width=width, color=palette[i % len(palette)], label=f"num_warps={w}")
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
    ax.axhline(1.0, color=COLOURS["reference"], linewidth=1)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylim(0, max(r for *_, r in pairs) * 1.2)
    ax.set_ylabel("copy-first time / direct time")
    ax.legend(loc="lower right", fontsize=8)


def plot_kernel_vs_reference(timing: pd.DataFrame) -> Figure:
    """Each student's median time against the reference's, same GPU, per hidden shape."""
    fig = Figure(figsize=(7.5, 6.5), layout="constrained")
    ax = fig.add_subplot()
    ax.set_label("kernel vs reference")
    if timing.empty:
        ax.set_title("Student kernel time against the reference", loc="left")
        _message(ax, NEEDS_GPU_PANEL)
        return fig
    for i, (shape, rows) in enumerate(timing.groupby("shape", sort=False)):
        ok = rows["correct"].to_numpy()
        colour = SHAPE_COLOURS[i % len(SHAPE_COLOURS)]
        ax.scatter(
            rows["reference_ms"][ok],
            rows["student_ms"][ok],
            label=shape,
            gid=f"ms:{shape}",
            color=colour,
            zorder=3,
        )
        ax.scatter(
            rows["reference_ms"][~ok], rows["student_ms"][~ok], color=colour, marker="x", zorder=3
        )
        for row in rows.itertuples():
            if not BANDS[0][0] ** -1 <= row.ratio <= BANDS[0][0]:
                ax.annotate(
                    row.student,
                    (row.reference_ms, row.student_ms),
                    xytext=(5, 0),
                    textcoords="offset points",
                    fontsize=8,
                    va="center",
                )
    times = pd.concat([timing["reference_ms"], timing["student_ms"]])
    low, high = times.min() * 0.7, times.max() * 1.4
    ax.plot(
        [low, high],
        [low, high],
        color=COLOURS["reference"],
        linewidth=1,
        label="y = x: as fast as the reference",
    )
    limit = BANDS[0][0]
    ax.plot(
        [low, high],
        [low * limit, high * limit],
        color=COLOURS["missing"],
        linestyle=":",
        linewidth=1,
        label=f"y = {limit:g}x: slowest for full points",
    )
    ax.scatter([], [], color="#555555", marker="x", label="wrong output after timing")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ticks = _log_ticks(low, high)
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("reference median (ms; same GPU, interleaved with the student's)")
    ax.set_ylabel("student median (ms)")
    devices = ", ".join(sorted(timing["device"].unique()))
    ax.set_title(
        f"Student kernel time against the reference: {timing['student'].nunique()} students\n"
        f"({devices}; above the line is slower; names: more than {limit:g}x off)",
        loc="left",
        fontsize=10,
    )
    ax.legend(title="hidden shape", fontsize=8, title_fontsize=8, loc="upper left")
    return fig


def plot_bandwidth(timing: pd.DataFrame, benchmark: Results | None) -> Figure:
    """GB/s of each student's kernel per hidden shape, under the copy roof of --benchmark."""
    fig = Figure(figsize=(9, 5.2), layout="constrained")
    ax = fig.add_subplot()
    ax.set_label("bandwidth")
    title = "Effective bandwidth per hidden shape (logical bytes: 2 x M x N x 4)"
    roof = _roof_gbps(benchmark)
    roof_text = (
        "copy roof missing: pass --benchmark FILE"
        if roof is None
        else f"roof: device copy, {roof[0]:.0f} GB/s ({roof[1]}, --benchmark)"
    )
    if timing.empty:
        ax.set_title(title, loc="left")
        _message(ax, f"{NEEDS_GPU_PANEL}\n\n{roof_text}")
        return fig
    shapes = list(dict.fromkeys(timing["shape"]))
    for x, shape in enumerate(shapes):
        rows = timing[timing["shape"] == shape].reset_index(drop=True)
        offsets, ok = _jitter(len(rows)), rows["correct"].to_numpy()
        gbps = rows["student_gbps"].to_numpy()
        ax.scatter(
            x + offsets[ok], gbps[ok], color=COLOURS["public"], zorder=3, gid=f"gbps:{shape}"
        )
        ax.scatter(x + offsets[~ok], gbps[~ok], color=COLOURS["bug"], marker="x", zorder=3)
        reference = float(rows["reference_gbps"].median())
        ax.hlines(reference, x - 0.4, x + 0.4, color=COLOURS["reference"], linewidth=2, zorder=2)
        for dx, row in zip(offsets, rows.itertuples(), strict=True):
            if not reference / BANDS[0][0] <= row.student_gbps <= reference * BANDS[0][0]:
                ax.annotate(
                    row.student,
                    (x + dx, row.student_gbps),
                    xytext=(5, 0),
                    textcoords="offset points",
                    fontsize=8,
                    va="center",
                )
    handles = [
        Line2D([], [], color=COLOURS["public"], marker="o", linestyle="", label="a student"),
        Line2D(
            [],
            [],
            color=COLOURS["bug"],
            marker="x",
            linestyle="",
            label="a student, wrong output after timing",
        ),
        Line2D(
            [],
            [],
            color=COLOURS["reference"],
            linewidth=2,
            label="reference (median of its runs beside each student)",
        ),
    ]
    if roof is None:
        ax.text(
            0.99,
            0.97,
            roof_text,
            ha="right",
            va="top",
            transform=ax.transAxes,
            fontsize=9,
            color=COLOURS["bug"],
        )
    else:
        ax.axhline(roof[0], color=COLOURS["reference"], linestyle="--", linewidth=1)
        handles.append(Line2D([], [], color=COLOURS["reference"], linestyle="--", label=roof_text))
    ax.set_xticks(range(len(shapes)), shapes)
    ax.set_xlim(-0.6, len(shapes) - 0.4)
    ax.set_ylim(0, max(timing["student_gbps"].max(), roof[0] if roof else 0) * 1.2)
    ax.set_ylabel("GB/s (higher is better)")
    devices = ", ".join(sorted(timing["device"].unique()))
    ax.set_title(
        f"{title}\n{timing['student'].nunique()} students, {devices}; "
        f"names: more than {BANDS[0][0]:g}x off the reference",
        loc="left",
        fontsize=10,
    )
    ax.legend(handles=handles, loc="upper left", fontsize=8, ncols=2)
    return fig


def _log_ticks(low: float, high: float) -> list[float]:
    """1, 2, 3, 5 times powers of ten between `low` and `high`, for a readable log axis."""
    ticks = []
    for exponent in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        ticks += [m * 10.0**exponent for m in (1, 2, 3, 5) if low <= m * 10.0**exponent <= high]
    return [float(f"{t:.6g}") for t in ticks]


def _roof_gbps(benchmark: Results | None) -> tuple[float, str] | None:
    """The plain device copy's GB/s in the benchmark file (cold, median over shapes)."""
    if benchmark is None:
        return None
    rows = [r for r in benchmark.rows if r.variant == "roof"]
    cold = [r for r in rows if r.mode == "cold"] or rows
    if not cold:
        return None
    return float(np.median([r.gbps_logical for r in cold])), benchmark.device


def _jitter(count: int) -> np.ndarray:
    """Deterministic horizontal offsets, so points of one category do not hide each other."""
    if count <= 1:
        return np.zeros(count)
    return np.linspace(-0.3, 0.3, count)


def _message(ax: Axes, text: str) -> None:
    """An empty panel that says what is missing, and why."""
    ax.text(
        0.5,
        0.5,
        text,
        ha="center",
        va="center",
        transform=ax.transAxes,
        fontsize=11,
        color="#444444",
        wrap=True,
    )
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_color("#cccccc")


# -- the report -------------------------------------------------------------------------


@dataclass(frozen=True)
class Plot:
    """One PNG of the report: its file name, what it shows, and how it is drawn."""

    name: str
    caption: str
    draw: Callable[[Report], Figure]


@dataclass
class Report:
    """Everything the plots and the page are drawn from."""

    cohort: Cohort
    table: pd.DataFrame
    timing: pd.DataFrame
    hints: pd.DataFrame
    summary: Summary
    benchmark: Results | None = None
    benchmark_path: Path | None = None


PLOTS = (
    Plot("scores.png", "Total points of each graded submission.", lambda r: plot_scores(r.table)),
    Plot(
        "pass_rates.png",
        "Share of graded students with full marks on each test cell, in notebook order.",
        lambda r: plot_pass_rates(r.table, cells_needing_gpu(r)),
    ),
    Plot(
        "hints.png",
        "How many students each hint fired for: the bugs the cohort made.",
        lambda r: plot_hints(r.hints, r.summary.with_hints),
    ),
    Plot(
        "speedup.png",
        "Each student's kernel time over the reference's per hidden shape (GPU timing "
        "sidecars), and direct against copy-first by num_warps (benchmark file).",
        lambda r: plot_speedup(r.timing, r.benchmark),
    ),
    Plot(
        "kernel_vs_reference.png",
        "Each student's median time against the reference's, same GPU, interleaved.",
        lambda r: plot_kernel_vs_reference(r.timing),
    ),
    Plot(
        "bandwidth.png",
        "Effective GB/s of each student's kernel against the device-copy roof.",
        lambda r: plot_bandwidth(r.timing, r.benchmark),
    ),
)
"""The report's plots, in the order the page shows them."""


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


def cells_needing_gpu(report: Report) -> list[str]:
    """The timing cells, when no student has a timing sidecar (autograded without a GPU)."""
    if report.summary.with_timing:
        return []
    return [c.name for c in report.cohort.cells if c.timing]


def save_plots(report: Report, out: Path) -> list[Path]:
    """Draw every plot of PLOTS into `out`; return the PNG paths in order."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for plot in PLOTS:
        path = out / plot.name
        plot.draw(report).savefig(path, dpi=DPI, format="png")
        paths.append(path)
    return paths


def summary_lines(report: Report) -> list[str]:
    """The summary, one plain sentence per line."""
    s = report.summary
    lines = [
        f"{s.students} students on the roster, {s.submitted} submitted, {s.graded} graded.",
    ]
    for student, reason in s.not_graded:
        lines.append(f"Not graded: {student}: {reason}.")
    for student, cells in s.restored:
        lines.append(f"Cells put back before grading: {student}: {'; '.join(cells)}.")
    if s.missing:
        lines.append(f"No submission: {', '.join(s.missing)}.")
    if s.late:
        late = ", ".join(f"{st} ({sec / 3600:.1f} h)" for st, sec in s.late)
        lines.append(f"Late: {len(s.late)}: {late}.")
    else:
        lines.append("Late: none.")
    if math.isnan(s.mean_score):
        lines.append("Mean score: no graded submissions.")
    else:
        pending = (
            f"; {s.manual_points:g} points per student are graded by hand "
            f"({s.manual_pending} cells still waiting)"
            if s.manual_points
            else ""
        )
        lines.append(f"Mean score: {s.mean_score:.2f} of {s.max_score:g} points{pending}.")
    lines.append(f"Hint sidecars: {s.with_hints} of {s.graded} graded students.")
    if s.internal_errors:
        count = len(s.internal_errors)
        where = ", ".join(f"{student} {cell}" for student, cell in s.internal_errors)
        lines.append(
            f"Internal errors in the checker: {count} cell{'s' * (count != 1)} ({where}), not "
            "counted against the students; fix the checker and autograde them again."
        )
    if s.with_timing:
        lines.append(f"GPU timing sidecars: {s.with_timing} of {s.graded} graded students.")
    else:
        lines.append(
            f"GPU timing: {NEEDS_GPU} (autograded without a CUDA device), so the speed plots "
            "are empty. Autograde on a GPU machine to fill them."
        )
        for cell in cells_needing_gpu(report):
            scores = report.table.loc[
                (report.table["cell"] == cell) & (report.table["status"] == "graded"), "score"
            ]
            if len(scores) and (scores == 0).all():
                lines.append(f"The timing cell {cell} scored 0 for every graded student: no GPU.")
    if report.benchmark is None:
        lines.append("Copy roof: no benchmark results given (--benchmark FILE).")
    else:
        lines.append(
            f"Copy roof and direct/copy: {report.benchmark_path} ({report.benchmark.device})."
        )
    return lines


def write_html(report: Report, out: Path, pngs: list[Path], tables: list[Path]) -> Path:
    """Write `index.html`: the summary, the plots inline, and the scores per student x cell."""
    cohort = report.cohort
    captions = {plot.name: plot.caption for plot in PLOTS}
    figures = "\n".join(
        f'<figure><img src="{html.escape(p.name)}" alt="{html.escape(captions[p.name])}">'
        f"<figcaption>{html.escape(captions[p.name])}</figcaption></figure>"
        for p in pngs
    )
    downloads = ", ".join(
        f'<a href="{html.escape(p.name)}">{html.escape(p.name)}</a>' for p in tables
    )
    page = _PAGE.format(
        title=html.escape(f"Cohort report: {cohort.assignment}"),
        course=html.escape(str(cohort.course)),
        summary="\n".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(report)),
        figures=figures,
        scores=_scores_html(report.table),
        downloads=downloads,
    )
    path = out / "index.html"
    path.write_text(page)
    return path


def _scores_html(table: pd.DataFrame) -> str:
    """The wide table: a row per student, a column per cell, coloured by outcome."""
    wide = wide_table(table)
    cells = table.drop_duplicates("cell").sort_values("position")
    hints = table.groupby("student")["hints"].agg(
        lambda h: ", ".join(dict.fromkeys(i for v in h for i in v.split(";") if i))
    )
    reasons = table.drop_duplicates("student").set_index("student")["reason"]
    head = "".join(
        f'<th title="{html.escape(c.kind)}">{html.escape(c.cell).replace("_", "_<wbr>")}<br>'
        f"<small>{c.max_score:g} pt, {html.escape(c.kind)}</small></th>"
        for c in cells.itertuples()
    )
    by_cell = table.set_index(["student", "cell"])
    body = []
    for student, row in wide.iterrows():
        if row["status"] == "graded":
            tds = "".join(
                _score_td(
                    by_cell.loc[(student, c.cell), "score"],
                    c.max_score,
                    by_cell.loc[(student, c.cell), "status"],
                )
                for c in cells.itertuples()
            )
        else:
            why = f"{row['status']}: {reasons[student]}"
            tds = f'<td class="missing" colspan="{len(cells)}">{html.escape(why)}</td>'
        total = "" if pd.isna(row["total"]) else f"{row['total']:g}"
        body.append(
            f"<tr><th>{html.escape(str(student))}</th>{tds}<td>{total}</td>"
            f'<td class="hints">{html.escape(hints.get(student, ""))}</td></tr>'
        )
    return (
        f"<table><thead><tr><th>student</th>{head}<th>total</th>"
        f"<th>hints in graded cells</th></tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def _score_td(score: float, max_score: float, status: str) -> str:
    if status != "graded":
        return f'<td class="missing">{html.escape(status)}</td>'
    css = "full" if score >= max_score else "partial" if score > 0 else "zero"
    return f'<td class="{css}">{score:g}</td>'


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 2em auto; max-width: 1500px; color: #222; }}
figure {{ margin: 1.5em 0; }}
figure img {{ max-width: 100%; border: 1px solid #ddd; }}
figcaption {{ color: #555; font-size: 0.9em; }}
table {{ border-collapse: collapse; font-size: 0.85em; }}
th, td {{ border: 1px solid #ccc; padding: 3px 6px; text-align: center; }}
tbody th {{ text-align: left; white-space: nowrap; }}
thead th {{ font-size: 0.9em; vertical-align: bottom; }}
.scroll {{ overflow-x: auto; }}
td.full {{ background: #cfe8cf; }}
td.partial {{ background: #fbe3b0; }}
td.zero {{ background: #f6c6c2; }}
td.missing {{ background: #eeeeee; color: #666; font-style: italic; }}
td.hints {{ text-align: left; white-space: nowrap; font-size: 0.9em; }}
</style>
</head>
<body>
<h1>{title}</h1>
<p>Course: <code>{course}</code>. Jump to: <a href="#plots">plots</a>,
<a href="#scores">scores per student and cell</a>.</p>
<h2>Summary</h2>
<ul>
{summary}
</ul>
<h2 id="plots">Plots</h2>
{figures}
<h2 id="scores">Scores per student and cell</h2>
<p>Green: full marks; amber: partial; red: zero; grey: no score (the status says why).
The long table, one row per student and cell: {downloads}.</p>
<div class="scroll">
{scores}
</div>
</body>
</html>
"""


def write_report(
    course: Path | str, assignment: str, out: Path | str, benchmark: Path | str | None = None
) -> Path:
    """Build the whole report into `out`; return the path of `index.html`."""
    out = Path(out)
    report = build_report(course, assignment, benchmark)
    tables = save_table(report.table, out)
    pngs = save_plots(report, out)
    return write_html(report, out, pngs, tables)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.cohort", description=__doc__.splitlines()[0]
    )
    parser.add_argument("assignment", help="the nbgrader assignment, e.g. i1_strided_softmax")
    parser.add_argument(
        "--course", default=str(REPO), help="the nbgrader course folder (default: this repository)"
    )
    parser.add_argument(
        "--out",
        default="reports/cohort",
        help="folder for the report (created; default: %(default)s)",
    )
    parser.add_argument(
        "--benchmark",
        default=None,
        help="a benchmark results file (i1-benchmark/1) for the copy roof and direct/copy bars",
    )
    args = parser.parse_args(argv)
    try:
        index = write_report(args.course, args.assignment, args.out, args.benchmark)
    except CohortError as exc:
        print(f"cohort: {exc}", file=sys.stderr)
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


if __name__ == "__main__":
    sys.exit(main())
