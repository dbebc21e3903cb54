"""Assertions for notebook test cells: run cases in this process and fail with hints.

nbgrader scores a test cell zero when it writes to stderr, so the function under test
runs with stderr and warnings captured; what it wrote shows up in the failure message. When
the checker's own code raises, the cell raises `CheckerFault` saying so, never blaming the
student, and the hints sidecar records the test as `internal-error`.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import secrets
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator

from learning.workshops.checking.cases import Case, CaseResult, run_case, suite
from learning.workshops.checking.faults import (
    INTERNAL_ERROR,
    CheckerFault,
    fault_text,
    internal_message,
    internal_result,
)
from learning.workshops.checking.hint_rules import diagnose, not_attempted
from learning.workshops.checking.hints import MESSAGES, HintId
from learning.workshops.checking.notebook_runner import CASES_RUN_OUTSIDE
from learning.workshops.checking.raised import raised_again
from learning.workshops.checking.shrink import (
    Shrunk,
    build_views,
    report_lines,
    shrink,
    starting_case,
    stray_index,
)
from learning.workshops.checking.sidecars import (
    HINTS_SIDECAR,
    HintRecord,
    Outcome,
    RecordError,
    load_hints,
    public_key,
)
from learning.workshops.contracts import default_device

GRADED_OUTSIDE = "{op}: the grader runs these cases itself, outside this notebook."


def all_pass(count: int, kind: str) -> str:
    """'3 public cases pass.', '1 hidden case passes.'"""
    return f"{count} {kind} case passes." if count == 1 else f"{count} {kind} cases pass."


@contextlib.contextmanager
def quiet() -> Iterator[io.StringIO]:
    """Capture stderr (Python's and the process's file descriptor 2) and warnings."""
    captured = io.StringIO()
    sys.stderr.flush()
    saved_fd = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            with contextlib.redirect_stderr(captured), warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                yield captured
        finally:
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            sink.seek(0)
            captured.write(sink.read().decode(errors="replace"))
            captured.writelines(f"{w.category.__name__}: {w.message}\n" for w in seen)


def run_cases(
    fn: Callable, op: str, cases: Iterable[Case], seed: int | None = None
) -> list[CaseResult]:
    """Run `cases` against `fn` in this process, quietly; return their results (a case whose
    checks raised is an `internal-error` result)."""
    device = default_device()
    seed = secrets.randbelow(2**31) if seed is None else seed
    results = []
    with quiet():
        for case in cases:
            try:
                results.append(run_case(fn, op, case, device, seed))
            except Exception as exc:  # run_case catches the student's: this is the checker's
                results.append(internal_result(case, fault_text(exc)))
    return results


def outcome_status(results: list[CaseResult]) -> str:
    """The test's status: internal-error when the checker failed on a case, else passed or
    failed."""
    if any(r.failure == INTERNAL_ERROR for r in results):
        return INTERNAL_ERROR
    return "passed" if all(r.passed for r in results) else "failed"


def record_outcome(test: str, results: list[CaseResult]) -> None:
    """While nbgrader autogrades, add this test's outcome and hint ids to the sidecar."""
    faults = [r.detail for r in results if r.failure == INTERNAL_ERROR]
    failed = [r.name for r in results if not r.passed and r.failure != INTERNAL_ERROR]
    hints = [h.id for h in diagnose(results)]
    record_status(test, outcome_status(results), failed, hints, faults)


def record_status(
    test: str,
    status: str,
    failed: Iterable[str] = (),
    hints: Iterable[str] = (),
    internal_errors: Iterable[str] = (),
) -> None:
    """While nbgrader autogrades, write `test`'s entry in the sidecar beside the notebook."""
    if os.environ.get("NBGRADER_EXECUTION") != "autograde":
        return
    path = os.path.join(os.getcwd(), HINTS_SIDECAR)
    try:
        record = load_hints(path)
    except RecordError:  # none yet, or not one: this grading starts it afresh
        record = HintRecord()
    record.tests[test] = Outcome(status, tuple(failed), tuple(hints), tuple(internal_errors))
    record.save(path)


@contextlib.contextmanager
def checker_faults(test: str) -> Iterator[None]:
    """Turn an exception from the checker's own code in this block into a CheckerFault that
    says so, recorded as `test`'s internal error; a failed check (AssertionError) passes."""
    try:
        yield
    except (AssertionError, CheckerFault):
        raise
    except Exception as exc:
        detail = f"{test}: {fault_text(exc)}"
        record_status(test, INTERNAL_ERROR, internal_errors=[detail])
        raise CheckerFault(internal_message([detail])) from exc


def failure_message(results: list[CaseResult], title: str) -> str:
    """What a failed test cell shows: each failing case, then the hints."""
    failed = [r for r in results if not r.passed]
    if not_attempted(results):  # an optional exercise left as its stub: one line
        return f"{title}: not attempted. {MESSAGES[HintId.NOT_ATTEMPTED]}"
    lines = [f"{title}: {len(failed)} of {len(results)} cases fail."]
    again = raised_again(failed)  # one error raised by many cases is told once
    for r in failed:
        if r.name not in again:
            lines.append(f"  FAIL {r.detail}")
        elif names := again[r.name]:
            lines.append(f"  FAIL {len(names)} more raised the same error: {', '.join(names)}")
    for hint in diagnose(results):
        lines.append(f"Hint [{hint.id}]: {hint.message}")
    return "\n".join(lines)


def verdict(results: list[CaseResult], title: str) -> Exception | None:
    """What a test cell raises for `results`: CheckerFault when the checker failed on a case
    (the student's failures follow it), AssertionError when only the student's code failed."""
    faults = [r.detail for r in results if r.failure == INTERNAL_ERROR]
    own = [r for r in results if r.failure != INTERNAL_ERROR]
    failed = failure_message(own, title) if not all(r.passed for r in own) else ""
    if faults:
        return CheckerFault("\n".join(filter(None, [internal_message(faults), failed])))
    return AssertionError(failed) if failed else None


def expect_cases(fn: Callable, op: str, names: Iterable[str] | None = None) -> None:
    """Assert that `fn` passes the named public cases of `op` (all that apply by default)."""
    if os.environ.get(CASES_RUN_OUTSIDE) == "1":
        print(GRADED_OUTSIDE.format(op=op))
        return
    wanted = set(names) if names is not None else None
    chosen = [
        c for c in suite(op, None, default_device().type) if wanted is None or c.name in wanted
    ]
    if wanted is not None and len(chosen) != len(wanted):
        unknown = wanted - {c.name for c in chosen}
        raise ValueError(f"no public case named {sorted(unknown)} for {op}")
    seed = secrets.randbelow(2**31)
    results = run_cases(fn, op, chosen, seed)
    record_outcome(public_key(op, wanted), results)
    error = verdict(results, f"{op}, public cases")
    if isinstance(error, AssertionError) and not os.environ.get("NBGRADER_EXECUTION"):
        error = with_smallest_failing(error, fn, op, chosen, results, seed)
    if error is not None:
        if not isinstance(error, CheckerFault):  # the checker's own faults keep their frames
            error._render_traceback_ = functools.partial(message_only, error)
        raise error
    print(f"{op}: {all_pass(len(results), 'public')}")


def cases_report(fn: Callable, op: str, names: Iterable[str] | None = None) -> str:
    """`expect_cases` for a cell that is not graded: its verdict as text (the failing cases
    and their hints included), never raised, so Run All goes on past the cell."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            expect_cases(fn, op, names)
    except (AssertionError, CheckerFault) as failed:
        return str(failed)
    return printed.getvalue().strip()


def message_only(error: BaseException) -> list[str]:
    """What IPython shows for a failed test instead of a traceback (its `_render_traceback_`
    hook): the message alone. The frames would all be the checker's, never the student's
    code, whose own errors the message reports case by case."""
    return [f"{type(error).__name__}: {error}"]


def with_smallest_failing(
    error: AssertionError,
    fn: Callable,
    op: str,
    cases: list[Case],
    results: list[CaseResult],
    seed: int,
) -> AssertionError:
    """`error` with the smallest view that fails as a failed case did added to its message,
    that view's picture shown below the cell; `error` itself when no failed case is a view
    to shrink. (Not while nbgrader grades: the hint is enough there, and time counts.)"""
    start = starting_case(cases, results, diagnose(results))
    if start is None:
        return error
    shrunk = shrink(lambda batch: run_cases(fn, op, batch, seed), *start)
    error = AssertionError("\n".join([str(error), *report_lines(shrunk, seed)]))
    if in_kernel():
        show_failing_view(shrunk, seed)
    return error


def failing_view_title(shrunk: Shrunk) -> str:
    """The picture's title: which view it is, and why it is drawn."""
    g = shrunk.case.geometry
    what = f"smallest failing view: {(g.rows, g.cols)}, strides {g.strides}"
    if g.offset:
        what += f", offset {g.offset}"
    if shrunk.case.dtype != "float32":
        what += f", {shrunk.case.dtype}"
    why = f"fails like case {shrunk.start.name} ({shrunk.failure}); the error below says how"
    return f"{what}\n{why}"


def in_kernel() -> bool:
    """Whether this runs in a Jupyter kernel (IPython imported by ipykernel), not in plain
    Python, a terminal IPython or the `check` command."""
    if "IPython" not in sys.modules:  # never import IPython just to ask
        return False
    try:
        from IPython import get_ipython

        return getattr(get_ipython(), "kernel", None) is not None
    except Exception:
        return False


def show_failing_view(shrunk: Shrunk, seed: int) -> None:
    """Show the address explorer's picture (`draw_view`) of the smallest failing view below
    the running cell, as one PNG rendered here: with or without `%matplotlib inline`, and
    nothing on stderr. draw_view's Figure is not pyplot's, so none stays open to pile up.
    A failure to draw is swallowed: the picture is a help, and the cell's error comes next."""
    try:
        with quiet():  # matplotlib's warnings (and font-cache notes) stay off the cell
            from learning.workshops.notebook.pictures import draw_views  # matplotlib: here only

            title = failing_view_title(shrunk)
            figure = draw_views(build_views(shrunk.case, seed), title, stray_index(shrunk))
            png = io.BytesIO()
            figure.savefig(png, format="png", bbox_inches="tight", pad_inches=0.2)
            display_png(png.getvalue(), title)
    except Exception:  # noqa: BLE001 - never in the way of the test's own error
        pass


def display_png(png: bytes, text: str) -> None:
    """Send `png` to the front end as the cell's display output, `text` its plain form."""
    from IPython.display import display

    display({"image/png": png, "text/plain": text}, raw=True)
