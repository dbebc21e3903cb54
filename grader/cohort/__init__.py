"""The instructor's cohort report: per-cell scores, hints and GPU timings in one table.

    python -m grader.cohort i1_strided_softmax --course PATH --out reports/cohort

One job per module: `records` (what the report knows), `gradebook` (nbgrader's gradebook),
`cell_keys` (the sidecar entries a test cell writes), `sidecars` (the hint and timing
sidecars), `tables` and `timings` (pandas tables), `summary`, `plots` and `speed_plots`
(with `style` and `figures`), `page` (`index.html` from `report.html`), `report` (all of
it) and `cli`. The names below are the ones notebooks, scripts and tests use.
"""

from grader.cohort.cell_keys import calls_function, check_keys, sidecar_keys
from grader.cohort.cli import main
from grader.cohort.figures import PLOTS, Plot, drawn_plots, missing_plots_note, save_plots
from grader.cohort.gradebook import load_gradebook
from grader.cohort.page import _scores_html, write_html
from grader.cohort.plots import plot_hints, plot_pass_rates, plot_scores
from grader.cohort.records import (
    CellGrade,
    CellInfo,
    Cohort,
    CohortError,
    Report,
    StudentRecord,
    Summary,
)
from grader.cohort.report import DEFAULT_BENCHMARK, build_report, notebook_report, write_report
from grader.cohort.sidecars import (
    load_cohort,
    load_hints,
    load_internal_errors,
    load_timing,
    read_sidecars,
)
from grader.cohort.speed_plots import plot_bandwidth, plot_kernel_vs_reference, plot_speedup
from grader.cohort.style import NEEDS_GPU
from grader.cohort.summary import summarize, summary_lines
from grader.cohort.tables import (
    COLUMNS,
    STATUSES,
    build_table,
    hint_table,
    read_table,
    save_table,
    totals,
    wide_table,
)
from grader.cohort.timings import (
    REFUSED_CSV,
    REFUSED_SECTION,
    Refusal,
    refusal_kind,
    refusals,
    save_refusals,
    timing_columns,
    timing_table,
)
from grader.grading.timing_record import SIDECAR as TIMING_SIDECAR
from grader.grading.timing_record import ShapeTiming, TimingRecord
from learning.workshops.checking.sidecars import HINTS_SCHEMA, HINTS_SIDECAR, RecordError

__all__ = [
    "COLUMNS",
    "DEFAULT_BENCHMARK",
    "HINTS_SCHEMA",
    "HINTS_SIDECAR",
    "NEEDS_GPU",
    "PLOTS",
    "REFUSED_CSV",
    "REFUSED_SECTION",
    "STATUSES",
    "TIMING_SIDECAR",
    "CellGrade",
    "CellInfo",
    "Cohort",
    "CohortError",
    "Plot",
    "RecordError",
    "Refusal",
    "Report",
    "ShapeTiming",
    "StudentRecord",
    "Summary",
    "TimingRecord",
    "_scores_html",
    "build_report",
    "build_table",
    "calls_function",
    "check_keys",
    "drawn_plots",
    "hint_table",
    "load_cohort",
    "load_gradebook",
    "load_hints",
    "load_internal_errors",
    "load_timing",
    "main",
    "missing_plots_note",
    "notebook_report",
    "plot_bandwidth",
    "plot_hints",
    "plot_kernel_vs_reference",
    "plot_pass_rates",
    "plot_scores",
    "plot_speedup",
    "read_sidecars",
    "read_table",
    "refusal_kind",
    "refusals",
    "save_plots",
    "save_refusals",
    "save_table",
    "sidecar_keys",
    "summarize",
    "summary_lines",
    "timing_columns",
    "timing_table",
    "totals",
    "wide_table",
    "write_html",
    "write_report",
]
