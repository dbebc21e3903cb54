"""Hidden and timing cells, graded on the trusted side of `nbgrader autograde`.

The grading kernel runs the student's notebook in a sandbox with every hidden region cut
out (`grader.grading.sandbox.SandboxedExecute`). This preprocessor, next in the pipeline, runs each
hidden region's check itself, outside the sandbox: it draws the hidden cases from the
course secret, the student and the submission time, runs the student's definitions in
sandboxed children, times on the GPU, and writes the cell's outputs and the sidecars beside
the graded notebook, where the student's code cannot write. Whatever the kernel printed or
raised in a hidden cell cannot change its score; `SaveAutoGrades` scores what is written here.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import json
import os
import secrets
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat
from nbformat import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Float, Integer, List, Tuple

from grader.grading.course_cells import CourseCell, course_for, graded_regions
from grader.grading.feedback import hidden_failure, timing_summary
from grader.grading.grading_log import course_root, log_for
from grader.grading.hidden_regions import CHECKS, hidden_checks, hidden_region  # noqa: F401
from grader.grading.sandbox import AHEAD
from grader.grading.timing_record import (
    BANDS,
    MAX_POINTS,
    SLOWEST_FRACTION,
    Band,
    bands_from_config,
)
from grader.grading.timing_record import SIDECAR as TIMING_SIDECAR
from grader.grading.visible import visible_cells
from grader.seeding import MissingSecret, course_secret
from learning.workshops.checking.sidecars import HINTS_SIDECAR, RecordError, outcome, write_hints

# torch, triton and the modules that import them (grader.grading.hidden, the checking's cases,
# faults and isolation, the timing, the notebook's testing) are imported where used: every
# nbgrader command loads nbgrader_config.py, which names this module's preprocessors, and
# importing them costs about 1.4 s that only grading needs.
if TYPE_CHECKING:
    from grader.grading.hidden import Draw
    from learning.workshops.checking.isolation import IsolatedRun, Session

NOTEBOOK = "strided_softmax.ipynb"
NOT_LOADED = (
    "the notebook's definitions do not load on their own, so no hidden case ran; restart "
    "the kernel and run the notebook top to bottom to see the error."
)
CHECKER_FAILED = (
    "{op}: the checker itself failed on {count} hidden case(s); this is not your code's "
    "fault, and your instructor has the details in the grading log."
)


def submission_draw(resources: dict, root: Path) -> Draw:
    """The draw of the grading nbgrader is running in the course at `root` (its student and
    gradebook)."""
    info = resources.get("nbgrader", {})
    return draw_for(info.get("db_url"), info.get("assignment"), info.get("student", ""), root)


def draw_for(db_url: str | None, assignment: str | None, student: str, root: Path) -> Draw:
    """The draw of a student's submission: the secret of the course at `root`, the student,
    the submission time. MissingSecret when the course has no secret."""
    from grader.grading.hidden import Draw

    stamp = ""
    with contextlib.suppress(Exception):  # no gradebook entry: the student alone
        from grader.course import open_gradebook

        with open_gradebook(db_url) as gradebook:
            submission = gradebook.find_submission(assignment, student)
            stamp = submission.timestamp.isoformat() if submission.timestamp else ""
    return Draw(course_secret(root), student, stamp)


TIMING_KIT = (
    "__init__.py",
    "reference.py",
    "grading/__init__.py",
    "grading/gpu_timing.py",
    "grading/timing_record.py",
)
"""The grader modules the timing child runs (the reference kernel it times against, the
timing itself and its record), at /course/grader in the timing child's sandbox alone: the
children that run the hidden cases see no part of `grader/`."""
GRADER = Path(__file__).resolve().parents[1]
CHECKS_BUDGET_S = 900.0
"""The most time one submission's hidden-check children may take in all, whatever it does:
the course's checks take 5-40 s on 2 cores; a submission that hangs case after case stops
here rather than at the sum of its case timeouts."""


@contextlib.contextmanager
def sandboxed_copy(nb: NotebookNode, draw: Draw) -> Iterator[Runner]:
    """A Runner over a scratch copy of `nb`, without its hidden regions, that sandboxed
    children see as their own folder (/work, a size-limited tmpfs when run as root); gone
    afterwards, with every process the children started."""
    from grader.grading.hidden_regions import stripped
    from grader.grading.sandbox import inside, sandbox_cgroups, sandboxed, scratch
    from learning.workshops.checking.isolation import Session

    with scratch() as work, sandbox_cgroups() as cgroups, tempfile.TemporaryDirectory() as kit:
        nbformat.write(stripped(nb), work / NOTEBOOK)
        Path(kit).chmod(0o755)  # the sandbox's user reads it
        for name in TIMING_KIT:
            (Path(kit) / name).parent.mkdir(mode=0o755, exist_ok=True)
            (Path(kit) / name).write_bytes((GRADER / name).read_bytes())
        wrap = functools.partial(sandboxed, work=work, cgroups=cgroups)
        timing_wrap = functools.partial(wrap, extra=[(Path(kit), "/course/grader")])
        impl = Path(inside(work, work / NOTEBOOK))
        with Session(impl, wrap, budget_s=CHECKS_BUDGET_S) as session:
            runner = Runner(work, draw, wrap, session)
            runner.timing_wrap = timing_wrap
            yield runner


def _stream(text: str) -> NotebookNode:
    return nbformat.v4.new_output("stream", name="stdout", text=text.rstrip() + "\n")


def _error(exc: BaseException) -> NotebookNode:
    message = str(exc)
    name = type(exc).__name__
    return nbformat.v4.new_output(
        "error", ename=name, evalue=message, traceback=[f"{name}: {line}" for line in [message]]
    )


def kernel_notes(outputs: list) -> list[NotebookNode]:
    """What the kernel showed in a hidden cell, kept for the student to read but unable to
    score: printed text and pictures stay, an error becomes a line of text, anything on
    stderr and any result value go."""
    kept = []
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream" and output.get("name") == "stdout" or kind == "display_data":
            kept.append(output)
        elif kind == "error":
            what = f"{output.get('ename')}: {output.get('evalue')}".splitlines()[0][:300]
            kept.append(_stream(f"The quick check before the hidden tests failed: {what}"))
    return kept


class Runner:
    """Runs hidden checks on one submission: its notebook in a scratch folder that the
    sandboxed children see as their own, its definitions loaded once in `session`'s child."""

    def __init__(self, work: Path, draw: Draw, wrap: Callable, session: Session) -> None:
        self.work, self.draw, self.wrap, self.session = work, draw, wrap, session
        self.impl = session.impl
        self.done: dict[str, object] = {}  # runs of hidden checks, by op or function
        self.took: dict[str, tuple[float, bool]] = {}  # their seconds, and if run ahead
        self.ahead = False  # whether runs now happen beside the notebook (ChecksAhead)
        self.timing_child: subprocess.Popen | None = None  # started ahead, waiting to measure
        self.timing_wrap: Callable = wrap  # the timing child's sandbox: the kit bound in

    say: Callable[[str], None] = staticmethod(lambda _: None)
    """Where each check's outcome is told in full (the student's grading log)."""

    def run(self, name: str, args: list, kwargs: dict) -> list[NotebookNode]:
        """One check's outputs: a line when it passed, an error when it failed; the log
        tells its seconds too."""
        from learning.workshops.checking.faults import CheckerFault
        from learning.workshops.measuring.timing import NoCudaError

        started = time.monotonic()
        try:
            outputs = getattr(self, name)(*args, **kwargs)
        except (AssertionError, CheckerFault, NoCudaError) as exc:
            said = f"{type(exc).__name__}: {exc}"
            outputs = [_error(exc)]
        else:
            said = "passed"
        took = f"{time.monotonic() - started:.1f} s"
        seconds, ahead = self.took.get(str(args[0]) if args else "", (0.0, False))
        if ahead:
            took += f", {seconds:.1f} s of it beside the notebook"
        self.say(f"{name}{tuple(args)} ({took}): {said}")
        return outputs

    def hidden_run(self, op: str) -> IsolatedRun:
        """`op`'s hidden cases run against the submission, once (see `ChecksAhead`)."""
        from grader.grading.hidden import run_hidden

        return self._once(op, run_hidden, op)

    def function_run(self, function: str) -> tuple[bool, str]:
        """`function`'s hidden check run against the submission, once."""
        from grader.grading.hidden import run_function_check

        return self._once(function, run_function_check, function)

    def public_run(self, function: str, op: str, names: tuple[str, ...] | None) -> IsolatedRun:
        """The public cases `names` of `op` (all that apply when None) run against the
        submission's `function`, judged here, once (see `ChecksAhead`)."""
        import torch

        from learning.workshops.checking.cases import suite

        device = "cuda" if torch.cuda.is_available() else "cpu"
        chosen = [c for c in suite(op, None, device) if names is None or c.name in names]
        seed = secrets.randbelow(2**31)

        def run(_name, session, _draw):
            from grader.grading.hidden import CASE_TIMEOUT_S

            return session.run_cases(op, function, chosen, seed, CASE_TIMEOUT_S)

        return self._once(f"public:{function}:{op}:{names}", run, function)

    def expect_cases(self, fn, op: str, names=None) -> None:
        """The course's `expect_cases`, as a visible cell calls it here: the student's
        function (a `visible.Remote`) run on public cases in the child, judged here."""
        from grader.grading.visible import Remote
        from learning.workshops.checking.faults import CheckerFault
        from learning.workshops.checking.sidecars import public_key
        from learning.workshops.notebook.testing import all_pass, record_outcome, verdict

        if not isinstance(fn, Remote):
            raise CheckerFault("the course's test cell passes expect_cases no student function")
        wanted = tuple(names) if names is not None else None
        run = self.public_run(fn.name, op, wanted)
        if run.load_error:
            raise AssertionError(f"{op}: {NOT_LOADED} ({run.load_error[:300]})")
        record_outcome(public_key(op, wanted), run.results)
        error = verdict(run.results, f"{op}, public cases")
        if error is not None:
            raise error
        print(f"{op}: {all_pass(len(run.results), 'public')}")

    def calls(self, function: str, inputs: list[dict]) -> list[dict]:
        """The student's plain `function` called in the child on each input, as data."""
        from grader.grading.hidden import student_calls

        return student_calls(self.session, function, inputs)

    def visible(self, cell: CourseCell) -> list[NotebookNode]:
        """A visible test cell's outputs, from its course source run here (`visible`)."""
        from grader.grading.visible import course_namespace, rescore

        started = time.monotonic()
        outputs = rescore(cell.source, course_namespace(self.expect_cases), self.calls)
        failed = [o for o in outputs if o.output_type == "error"]
        said = f"failed: {failed[0].ename}: {failed[0].evalue[:200]}" if failed else "passed"
        took = time.monotonic() - started
        self.say(f"{cell.grade_id}, rescored here ({took:.1f} s): {said}")
        return outputs

    def _once(self, key: str, check: Callable, name: str):
        if key not in self.done:
            started = time.monotonic()
            self.done[key] = check(name, self.session, self.draw)
            self.took[key] = (time.monotonic() - started, self.ahead)
        return self.done[key]

    def expect_hidden(self, op: str, *_, **__) -> list[NotebookNode]:
        from grader.grading.hidden import hidden_cases
        from learning.workshops.checking.cases import OPS
        from learning.workshops.checking.faults import CheckerFault
        from learning.workshops.notebook.testing import all_pass, record_outcome, verdict

        run = self.hidden_run(op)
        if run.load_error:  # the child's words are not shown here: they could carry anything
            self.say(f"expect_hidden('{op}'): the definitions do not load: {run.load_error}")
            raise AssertionError(f"{op}: {NOT_LOADED}")
        record_outcome(f"hidden:{op}", run.results)
        error = verdict(run.results, f"{op}, hidden cases")
        if isinstance(error, CheckerFault):
            self.say(f"expect_hidden('{op}') in full: {error}")
            faults = sum(r.failure == "internal-error" for r in run.results)
            raise CheckerFault(CHECKER_FAILED.format(op=op, count=faults))
        if error is not None:  # the student reads kinds, hints and a fresh example
            self.say(f"expect_hidden('{op}') in full: {error}")
            cases = hidden_cases(op, self.draw)
            others = [c for other in OPS if other != op for c in hidden_cases(other, self.draw)]
            raise AssertionError(hidden_failure(op, cases, run.results, self._examples(op), others))
        return [_stream(f"{op}: {all_pass(len(run.results), 'hidden')}")]

    def _examples(self, op: str) -> Callable[[list], list]:
        """Runs freshly drawn example cases of `op` against the submission, sandboxed."""
        from grader.grading.hidden import CASE_TIMEOUT_S
        from learning.workshops.checking.cases import OPS

        def run(cases: list) -> list:
            seed = secrets.randbelow(2**31)
            function = OPS[op].function
            return self.session.run_cases(op, function, cases, seed, CASE_TIMEOUT_S).results

        return run

    def _function(self, function: str) -> list[NotebookNode]:
        from learning.workshops.notebook.testing import record_status

        passed, said = self.function_run(function)
        record_status(f"hidden:{function}", "passed" if passed else "failed")
        if not passed:
            raise AssertionError(said)
        return [_stream(said)]

    def expect_address_table(self, *_, **__) -> list[NotebookNode]:
        return self._function("address_table")

    def expect_worksheet(self, *_, **__) -> list[NotebookNode]:
        return self._function("worksheet")

    def timing_sandbox(self):
        """How the timing child of this submission runs (`gpu_timing.Sandbox`)."""
        from grader.grading.gpu_timing import Sandbox

        record = self.work / ".timing.json"
        seen = str(self.impl.with_name(record.name))
        wrap = self.timing_wrap
        return Sandbox(wrap, str(self.impl), seen, record, self.draw.key, self.timing_child)

    bands: tuple[Band, ...] = BANDS
    slowest: float = SLOWEST_FRACTION
    """The timing's bands, as the course configures them (GradeHiddenCells)."""

    def timing_points(self, max_points: float = MAX_POINTS, **__) -> list[NotebookNode]:
        from grader.grading.gpu_timing import timing_points

        sandbox = self.timing_sandbox()
        sidecar = Path(TIMING_SIDECAR).resolve()
        with contextlib.redirect_stdout(io.StringIO()):  # it names the hidden shapes
            points = timing_points(
                max_points, sidecar=sidecar, sandbox=sandbox, bands=self.bands, slowest=self.slowest
            )
        summary = timing_summary(json.loads(sidecar.read_text()))
        result = nbformat.v4.new_output("execute_result", data={"text/plain": repr(points)})
        return [_stream(summary), result]


def restart_sidecars(folder: Path, sandboxed_hints: bytes | None) -> None:
    """The sidecars beside the graded notebook start afresh for this grading (a submitted or
    earlier file is gone): the timing record is written here alone, and the hints file
    holds the visible cells' outcomes as the sandboxed run recorded them (hints only: those
    cells score from their own outputs), then the hidden cells' from this side."""
    (folder / TIMING_SIDECAR).unlink(missing_ok=True)
    write_hints(folder / HINTS_SIDECAR, public_outcomes(sandboxed_hints))


def public_outcomes(raw: bytes | None) -> dict:
    """The visible cells' entries of a hints file the sandbox wrote, each well formed, and
    nothing else (it cannot speak for a hidden cell)."""
    try:
        tests = json.loads(raw or b"{}").get("tests", {})
    except (ValueError, AttributeError):
        return {}
    kept = {}
    for test, entry in tests.items() if isinstance(tests, dict) else ():
        try:
            said = outcome(entry, HINTS_SIDECAR, test)
        except RecordError:
            continue
        if str(test).startswith("public:") and said.status in ("passed", "failed"):
            kept[test] = said.to_json()
    return kept


CORES_PER_EXTRA_CHILD = 8
"""Cores from which a submission's hidden checks are shared between two children: on an
H200 host (16 cores) they took 17 s in one child beside a 14 s notebook; on 2 cores a second
child would only take the notebook's time."""
RUN_AHEAD = {"expect_hidden": "hidden_run", "expect_address_table": "function_run"}
"""The checks run ahead (by the Runner method that runs each); the worksheet needs no
child, and the timing waits for the notebook (it must have the GPU to itself)."""


class ChecksAhead:
    """The hidden correctness checks of one submission, run in sandboxed children while the
    sandboxed notebook runs (they need nothing from that run): the children's start (Python,
    torch, CUDA, loading the definitions) and their compiles overlap the notebook's own. With
    `children` > 1 the checks are shared out, in the notebook's order, between that many
    children, each with a background thread; `runner()` waits for them all and gathers their
    runs into the first child's Runner, from then on `GradeHiddenCells`' alone. Their outputs,
    sidecars and log lines are all written afterwards, in the notebook's order, as without it.

    The threads live until `close()`: bubblewrap's --die-with-parent kills a sandbox when the
    thread that started it ends, and the first child serves the timing and any check that
    did not finish ahead."""

    def __init__(
        self, nb: NotebookNode, draw: Draw, plan: list[Planned], children: int = 1, timed=False
    ) -> None:
        import torch

        self._stack = contextlib.ExitStack()
        self._runner = self._stack.enter_context(sandboxed_copy(nb, draw))
        self._lanes = [self._runner]
        checks = list(plan)
        for _ in range(min(children, len(checks)) - 1):
            self._lanes.append(self._stack.enter_context(sandboxed_copy(nb, draw)))
        if torch.cuda.is_available() and timed:
            from grader.grading.gpu_timing import start_ahead

            self._runner.timing_child = start_ahead(self._runner.timing_sandbox())
            self._stack.callback(_end, self._runner.timing_child)
        self._closing = threading.Event()
        self._ran: list[threading.Event] = []
        self._threads: list[threading.Thread] = []
        count = len(self._lanes)
        for i, lane in enumerate(self._lanes):
            lane.ahead = True
            share = checks[i * len(checks) // count : (i + 1) * len(checks) // count]
            self._ran.append(threading.Event())
            thread = threading.Thread(target=self._run, args=(lane, share, self._ran[-1]))
            thread.daemon = True
            self._threads.append(thread)
            thread.start()

    def _run(self, lane: Runner, checks: list[Planned], ran: threading.Event) -> None:
        try:
            for method, args in checks:
                if self._closing.is_set():
                    break
                try:
                    getattr(lane, method)(*args)
                except Exception:  # run again, and reported, when the cell is graded
                    pass
        finally:
            ran.set()
        self._closing.wait()

    def runner(self) -> Runner:
        """The first child's Runner, holding every run of every child, once all have run."""
        for ran in self._ran:
            ran.wait()
        for lane in self._lanes:
            lane.ahead = False
        for lane in self._lanes[1:]:
            self._runner.done.update(lane.done)
            self._runner.took.update(lane.took)
        return self._runner

    def close(self) -> None:
        """Start no further check, wait for those running, stop the children, remove the
        scratch copies."""
        self._closing.set()
        for thread in self._threads:
            thread.join()
        self._stack.close()


Planned = tuple[str, tuple]
"""A run `ChecksAhead` starts early: the Runner method and its arguments."""


def ahead_plan(course: Sequence[CourseCell]) -> list[Planned]:
    """The runs of the course's graded cells that can start beside the notebook, in the
    course's order: each hidden region's correctness checks and each visible cell's public
    cases. From the course's cells alone: nothing a submission wrote plans a run."""
    from grader.grading.visible import public_runs

    plan: list[Planned] = []
    for cell in course:
        if not cell.grade or cell.cell_type != "code" or cell.solution:
            continue
        if cell.hidden is None:
            plan += [("public_run", run) for run in public_runs(cell.source)]
        else:
            checks = hidden_checks(cell.hidden)
            plan += [
                (RUN_AHEAD[name], (str(a[0]),)) for name, a, _ in checks if name in RUN_AHEAD and a
            ]
    return plan


def timed(course: Sequence[CourseCell]) -> bool:
    """Whether a course cell's hidden region calls the GPU timing."""
    return any(
        name == "timing_points"
        for cell in course
        if cell.grade and cell.hidden is not None
        for name, *_ in hidden_checks(cell.hidden)
    )


def _end(child: subprocess.Popen) -> None:
    """Kill a child that is still running (a timing child never told to measure)."""
    if child.poll() is None:
        child.kill()
    with contextlib.suppress(ValueError, OSError, subprocess.TimeoutExpired):
        child.communicate(timeout=10)  # its pipes closed (already, when it measured)


class StartChecksAhead(NbGraderPreprocessor):
    """Before the sandboxed notebook runs: start its hidden correctness checks beside it
    (`ChecksAhead`, in resources[AHEAD]). Without a course secret nothing starts, and
    `SandboxedExecute` refuses to grade."""

    children = Integer(
        default_value=2 if (os.cpu_count() or 1) >= CORES_PER_EXTRA_CHILD else 1,
        help="Sandboxed children that share a submission's hidden checks while its notebook "
        "runs. Each more child costs a Python with torch (and a CUDA context) but runs its "
        f"share at the same time: 2 on machines with {CORES_PER_EXTRA_CHILD} cores or more, "
        "else 1.",
    ).tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict):
        try:
            draw = submission_draw(resources, course_root(self.config))
        except MissingSecret:
            return nb, resources
        course = course_for(resources)
        children = max(1, self.children)
        plan = ahead_plan(course)
        ahead = ChecksAhead(copy.deepcopy(nb), draw, plan, children, timed(course))
        resources[AHEAD] = ahead
        return nb, resources


class GradeHiddenCells(NbGraderPreprocessor):
    """Grade every hidden region of the notebook here, on the trusted side (see the module)."""

    timing_bands = List(
        Tuple(Float(), Float()),
        default_value=[(b.limit, b.fraction) for b in BANDS],
        help="The GPU timing's bands, [(limit, fraction), ...]: a correct kernel at most "
        "`limit` times the reference's time earns `fraction` of the timing points.",
    ).tag(config=True)
    timing_slowest_fraction = Float(
        SLOWEST_FRACTION, help="What a correct kernel slower than every band earns."
    ).tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict):
        from learning.workshops.checking.faults import fault_text

        log = log_for(self.config, resources)
        try:
            return self._grade(nb, resources, log.say if log else lambda _: None)
        except Exception as exc:
            if log:
                log.cause(f"internal error: grading the hidden cells failed: {fault_text(exc)}")
            raise

    def _grade(self, nb: NotebookNode, resources: dict, say: Callable[[str], None]):
        folder = Path(resources["metadata"]["path"]).resolve()
        restart_sidecars(folder, resources.get("i1_sandbox_files", {}).get(HINTS_SIDECAR))
        ahead = resources.pop(AHEAD, None)
        with contextlib.ExitStack() as stack:
            if ahead is not None:
                stack.callback(ahead.close)
                runner = ahead.runner()
            else:
                draw = submission_draw(resources, course_root(self.config))
                runner = stack.enter_context(sandboxed_copy(nb, draw))
            stack.enter_context(contextlib.chdir(folder))
            runner.say = say
            runner.bands = bands_from_config(self.timing_bands, self.timing_slowest_fraction)
            runner.slowest = self.timing_slowest_fraction
            course = course_for(resources)
            hidden = {i: checks for i, _, checks in graded_regions(nb, course)}
            visible = dict(visible_cells(nb, course))
            for index in sorted({*hidden, *visible}):  # the sidecars go beside the notebook
                cell = nb.cells[index]
                if index in hidden:
                    graded = [out for check in hidden[index] for out in runner.run(*check)]
                    cell.outputs = kernel_notes(cell.outputs) + graded
                else:  # the course's assertions, run here: the kernel's outputs cannot score
                    cell.outputs = runner.visible(visible[index])
        return nb, resources
