"""Runs one submission's graded checks on the trusted side: `Runner`, over a scratch copy.

`sandboxed_copy` gives a Runner whose sandboxed child loads the submission's definitions
(its notebook without hidden regions, and no part of `grader/`); each check the course's
cells call (`expect_hidden`, `expect_address_table`, `expect_worksheet`, `timing_points`, and
the visible cells' `expect_cases`) runs the student's code there and is judged here, in
words of the grader's own.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import nbformat
import torch
from nbformat import NotebookNode

from grader.grading.course_cells import CourseCell
from grader.grading.feedback import hidden_failure, timing_summary
from grader.grading.gpu_timing import Sandbox, Servers, timing_points
from grader.grading.hidden import (
    CASE_TIMEOUT_S,
    Draw,
    hidden_cases,
    run_function_check,
    run_hidden,
    student_calls,
)
from grader.grading.hidden_regions import strip_hidden_tests, stripped
from grader.grading.timing_record import (
    BANDS,
    MAX_POINTS,
    SLOWEST_FRACTION,
    Band,
)
from grader.grading.timing_record import SIDECAR as TIMING_SIDECAR
from grader.grading.visible import Remote, course_namespace, rescore
from grader.isolation.cgroups import sandbox_cgroups
from grader.isolation.sandbox import inside, sandboxed
from grader.isolation.scratch import scratch
from learning.workshops.checking.cases import OPS, suite
from learning.workshops.checking.faults import INTERNAL_ERROR, CheckerFault
from learning.workshops.checking.isolation import IsolatedRun, Session
from learning.workshops.checking.kernel_source import submission_kernels
from learning.workshops.checking.records import Failure
from learning.workshops.checking.replay import held_reason
from learning.workshops.checking.sidecars import public_key
from learning.workshops.measuring.timing import NoCudaError
from learning.workshops.notebook.testing import all_pass, record_outcome, record_status, verdict

NOTEBOOK = "strided_softmax.ipynb"
NOT_LOADED = (
    "the notebook's definitions do not load on their own, so no hidden case ran; restart "
    "the kernel and run the notebook top to bottom to see the error."
)
CHECKER_FAILED = (
    "{op}: the checker itself failed on {count} hidden case(s); this is not your code's "
    "fault, and your instructor has the details in the grading log."
)


TIMED_OP = "strided_softmax"
"""The op the timing cell times: its hidden cases say whether its kernels did the work."""
MAX_HELD = 5
"""Held cases named per check: the first say why; the grade is held either way."""
CHECKS_BUDGET_S = 900.0
"""The most time one submission's hidden-check children may take in all, whatever it does:
the course's checks take 5-40 s on 2 cores; a submission that hangs case after case stops
here rather than at the sum of its case timeouts."""


@contextlib.contextmanager
def sandboxed_copy(nb: NotebookNode, draw: Draw) -> Iterator[Runner]:
    """A Runner over a scratch copy of `nb`, without its hidden regions, that sandboxed
    children see as their own folder (/work, a size-limited tmpfs when run as root), and a
    clean room in an empty scratch folder of its own that replays the kernels' launches
    (`learning.workshops.checking.replay`), their source read before any child starts; gone
    afterwards, with every process they started."""

    with scratch() as work, scratch() as room, sandbox_cgroups() as cgroups:
        nbformat.write(stripped(nb), work / NOTEBOOK)
        kernels = submission_kernels(work / NOTEBOOK)  # read here, before any child runs
        wrap = functools.partial(sandboxed, work=work, cgroups=cgroups)
        room_wrap = functools.partial(sandboxed, work=room, cgroups=cgroups)
        impl = Path(inside(work, work / NOTEBOOK))
        budget = CHECKS_BUDGET_S
        with Session(impl, wrap, budget, kernels, room_wrap) as session:
            yield Runner(work, draw, wrap, session)


def _stream(text: str) -> NotebookNode:
    return nbformat.v4.new_output("stream", name="stdout", text=text.rstrip() + "\n")


def _error(exc: BaseException) -> NotebookNode:
    message = str(exc)
    name = type(exc).__name__
    return nbformat.v4.new_output(
        "error", ename=name, evalue=message, traceback=[f"{name}: {line}" for line in [message]]
    )


class Runner:
    """Runs hidden checks on one submission: its notebook in a scratch folder that the
    sandboxed children see as their own, its definitions loaded once in `session`'s child."""

    def __init__(self, work: Path, draw: Draw, wrap: Callable, session: Session) -> None:
        self.work, self.draw, self.wrap, self.session = work, draw, wrap, session
        self.impl = session.impl
        self.done: dict[str, object] = {}  # runs of hidden checks, by op or function
        self.took: dict[str, tuple[float, bool]] = {}  # their seconds, and if run ahead
        self.ahead = False  # whether runs now happen beside the notebook (ChecksAhead)
        self.timing_servers: Servers | None = None  # started ahead, waiting to measure
        self.replay_holds: list[str] = []  # why the check just run held cases for review

    say: Callable[[str], None] = staticmethod(lambda _: None)
    """Where each check's outcome is told in full (the student's grading log)."""
    held: str = ""
    """Said beside every check that passed while the grade is held for review: a held cell
    is never logged as passed without its hold."""

    def run(self, name: str, args: list, kwargs: dict) -> list[NotebookNode]:
        """One check's outputs: a line when it passed, an error when it failed; the log
        tells its seconds too."""

        started = time.monotonic()
        try:
            outputs = getattr(self, name)(*args, **kwargs)
        except (AssertionError, CheckerFault, NoCudaError) as exc:
            said = f"{type(exc).__name__}: {exc}"
            outputs = [_error(exc)]
        else:
            said = "passed" + self.held
        took = f"{time.monotonic() - started:.1f} s"
        seconds, ahead = self.took.get(str(args[0]) if args else "", (0.0, False))
        if ahead:
            took += f", {seconds:.1f} s of it beside the notebook"
        self.say(f"{name}{tuple(args)} ({took}): {said}")
        return outputs

    def hidden_run(self, op: str) -> IsolatedRun:
        """`op`'s hidden cases run against the submission, once (see `ChecksAhead`)."""

        return self._once(op, run_hidden, op)

    def function_run(self, function: str) -> tuple[bool, str]:
        """`function`'s hidden check run against the submission, once."""

        return self._once(function, run_function_check, function)

    def public_run(self, function: str, op: str, names: tuple[str, ...] | None) -> IsolatedRun:
        """The public cases `names` of `op` (all that apply when None) run against the
        submission's `function`, judged here, once (see `ChecksAhead`)."""

        device = "cuda" if torch.cuda.is_available() else "cpu"
        chosen = [c for c in suite(op, None, device) if names is None or c.name in names]
        seed = secrets.randbelow(2**31)

        def run(_name, session, _draw):

            return session.run_cases(op, function, chosen, seed, CASE_TIMEOUT_S)

        return self._once(f"public:{function}:{op}:{names}", run, function)

    def expect_cases(self, fn, op: str, names=None) -> None:
        """The course's `expect_cases`, as a visible cell calls it here: the student's
        function (a `visible.Remote`) run on public cases in the child, judged here."""

        if not isinstance(fn, Remote):
            raise CheckerFault("the course's test cell passes expect_cases no student function")
        wanted = tuple(names) if names is not None else None
        run = self.public_run(fn.name, op, wanted)
        self._note_replay_holds(run)
        if run.load_error:
            raise AssertionError(f"{op}: {NOT_LOADED} ({run.load_error[:300]})")
        record_outcome(public_key(op, wanted), run.results)
        error = verdict(run.results, f"{op}, public cases")
        if error is not None:
            raise error
        print(f"{op}: {all_pass(len(run.results), 'public')}")

    def calls(self, function: str, inputs: list[dict]) -> list[dict]:
        """The student's plain `function` called in the child on each input, as data."""

        return student_calls(self.session, function, inputs)

    def visible(self, cell: CourseCell, smoke_test: bool = False) -> list[NotebookNode]:
        """A visible test cell's outputs, from its course source run here (`visible`); with
        `smoke_test`, the lines of a hidden cell before its hidden region."""

        started = time.monotonic()
        source = strip_hidden_tests(cell.source) if smoke_test else cell.source
        outputs = rescore(source, course_namespace(self.expect_cases), self.calls)
        failed = [o for o in outputs if o.output_type == "error"]
        said = f"failed: {failed[0].ename}: {failed[0].evalue[:200]}" if failed else "passed"
        said += "" if failed else self.held
        took = time.monotonic() - started
        self.say(f"{cell.grade_id}, rescored here ({took:.1f} s): {said}")
        return outputs

    def _note_replay_holds(self, run: IsolatedRun) -> None:
        """Note why cases of `run` were held for review (the clean room could not replay
        them): the cell that ran them holds the grade (`GradeHiddenCells`)."""

        held = [r for r in run.results if r.failure == Failure.HELD]
        reasons = list(dict.fromkeys(held_reason(r.verdict.text) for r in held))
        for reason in reasons[:MAX_HELD]:  # no case's name or view: hidden cases stay hidden
            count = sum(held_reason(r.verdict.text) == reason for r in held)
            self.replay_holds.append(f"{count} case(s) not replayed: {reason}"[:300])

    def _once(self, key: str, check: Callable, name: str):
        if key not in self.done:
            started = time.monotonic()
            self.done[key] = check(name, self.session, self.draw)
            self.took[key] = (time.monotonic() - started, self.ahead)
        return self.done[key]

    def expect_hidden(self, op: str, *_, **__) -> list[NotebookNode]:

        run = self.hidden_run(op)
        self._note_replay_holds(run)
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

        def run(cases: list) -> list:
            seed = secrets.randbelow(2**31)
            function = OPS[op].function
            return self.session.run_cases(op, function, cases, seed, CASE_TIMEOUT_S).results

        return run

    def _function(self, function: str) -> list[NotebookNode]:

        test = f"hidden:{function}"
        try:
            passed, said = self.function_run(function)
        except CheckerFault as fault:
            record_status(test, INTERNAL_ERROR, internal_errors=[str(fault)[:300]])
            raise
        record_status(test, "passed" if passed else "failed")
        if not passed:
            raise AssertionError(said)
        return [_stream(said)]

    def expect_address_table(self, *_, **__) -> list[NotebookNode]:
        return self._function("address_table")

    def expect_worksheet(self, *_, **__) -> list[NotebookNode]:
        return self._function("worksheet")

    def timing_sandbox(self):
        """How this submission's timing server runs (`gpu_timing.Sandbox`): in its sandbox,
        with nothing of the grader's."""

        return Sandbox(self.wrap, str(self.impl), self.draw.key, self.timing_servers)

    bands: tuple[Band, ...] = BANDS
    slowest: float = SLOWEST_FRACTION
    """The timing's bands, as the course configures them (GradeHiddenCells)."""

    def not_kernel_work(self) -> str:
        """Why the timed function's outputs are not its kernels' work, from its hidden cases
        as the clean room replayed them (`not-from-kernel`, `no-kernel`), or "": the timing
        measures kernels, and torch computing the softmax beside one is fast for nothing.
        Only where a GPU times anything (on a CPU the timing cell is skipped unasked)."""

        if not torch.cuda.is_available():
            return ""
        elsewhere = (Failure.NOT_FROM_KERNEL, Failure.NO_KERNEL)
        run = self.hidden_run(TIMED_OP)
        kinds = sorted({str(r.failure) for r in run.results if r.failure in elsewhere})
        if not kinds:
            return ""
        return (
            f"{TIMED_OP}'s outputs in its hidden cases were not its kernels' work "
            f"({', '.join(kinds)}), and the timing times only kernels that do the work"
        )

    def timing_points(self, max_points: float = MAX_POINTS, **__) -> list[NotebookNode]:

        sandbox = self.timing_sandbox()
        sidecar = Path(TIMING_SIDECAR).resolve()
        refused = self.not_kernel_work()
        with contextlib.redirect_stdout(io.StringIO()):  # it names the hidden shapes
            points = timing_points(
                max_points,
                sidecar=sidecar,
                sandbox=sandbox,
                bands=self.bands,
                slowest=self.slowest,
                refused=refused,
            )
        summary = timing_summary(json.loads(sidecar.read_text()))
        result = nbformat.v4.new_output("execute_result", data={"text/plain": repr(points)})
        return [_stream(summary), result]
