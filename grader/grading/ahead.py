"""Hidden and visible checks started beside the sandboxed notebook: `StartChecksAhead`.

Their children need nothing from the notebook's run, so their start (Python, torch, CUDA,
loading the definitions) and their compiles overlap the notebook's own; `GradeHiddenCells`
then writes what they found, in the notebook's order. What runs ahead is planned from the
course's cells alone (`ahead_plan`).
"""

from __future__ import annotations

import contextlib
import copy
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from nbformat import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Integer

from grader.grading.course_cells import CourseCell, course_for
from grader.grading.execute import AHEAD
from grader.grading.grading_log import course_root
from grader.grading.hidden_regions import hidden_checks
from grader.grading.trusted import submission_draw
from grader.seeding import MissingSecret

# The grading engine (grader.grading.runner, which imports torch and triton) is imported where
# a notebook's checks start: every nbgrader command loads nbgrader_config.py, which names this
# module's preprocessor, and importing it costs about 1.4 s that only grading needs.
if TYPE_CHECKING:
    from grader.grading.hidden import Draw
    from grader.grading.runner import Runner

CORES_PER_CHILD = 4
"""Cores per child sharing a submission's hidden checks, up to MOST_CHILDREN. On an H200 host
(16 cores), each kernel compiled once per shape (`one_compile_per_shape`), a submission took
10-14 s with 3 children (its checks done 0.9-1.5 s after its notebook) and 11-13 s with 4; on
2 cores a second child would only take the notebook's time."""
MOST_CHILDREN = 3


def default_children(cores: int) -> int:
    """How many children share a submission's hidden checks on a machine of `cores` cores."""
    return min(MOST_CHILDREN, max(1, cores // CORES_PER_CHILD))


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

        from grader.gpu_lock import gpu_share
        from grader.grading.runner import sandboxed_copy

        self._stack = contextlib.ExitStack()
        self._stack.enter_context(gpu_share())  # no other submission's timing meanwhile
        self._watch_gpu_memory()
        self._runner = self._stack.enter_context(sandboxed_copy(nb, draw))
        self._lanes = [self._runner]
        checks = list(plan)
        for _ in range(min(children, len(checks)) - 1):
            self._lanes.append(self._stack.enter_context(sandboxed_copy(nb, draw)))
        if torch.cuda.is_available() and timed:
            from grader.grading.gpu_timing import start_ahead

            self._runner.timing_servers = start_ahead(self._runner.timing_sandbox())
            self._stack.callback(self._runner.timing_servers.close)
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

    def _watch_gpu_memory(self) -> None:
        """Hold this submission's sandboxes to its share of a GPU that others share too."""
        from grader.isolation.gpu_memory import GpuMemoryWatch, limit_bytes

        limit = limit_bytes()
        if limit is not None:
            said = lambda text: self._runner.say(text)  # noqa: E731 (the runner comes next)
            self._stack.enter_context(GpuMemoryWatch(limit, said))

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
    course's order: each cell's public cases (a visible cell's, a hidden cell's smoke test)
    and each hidden region's correctness checks. From the course's cells alone: nothing a
    submission wrote plans a run."""
    from grader.grading.hidden_regions import strip_hidden_tests
    from grader.grading.visible import public_runs

    plan: list[Planned] = []
    for cell in course:
        if not cell.grade or cell.cell_type != "code" or cell.solution:
            continue
        plan += [("public_run", run) for run in public_runs(strip_hidden_tests(cell.source))]
        if cell.hidden is not None:
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


class StartChecksAhead(NbGraderPreprocessor):
    """Before the sandboxed notebook runs: start its hidden correctness checks beside it
    (`ChecksAhead`, in resources[AHEAD]). Without a course secret nothing starts, and
    `SandboxedExecute` refuses to grade."""

    children = Integer(
        default_value=default_children(os.cpu_count() or 1),
        help="Sandboxed children that share a submission's hidden checks while its notebook "
        "runs. Each more child costs a Python with torch (and a CUDA context) but runs its "
        f"share at the same time: one per {CORES_PER_CHILD} cores, at most {MOST_CHILDREN}.",
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
