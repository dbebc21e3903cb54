"""Every test cell, graded on the trusted side of `nbgrader autograde`.

The grading kernel runs the student's notebook in a sandbox with every hidden region cut
out (`grader.grading.execute.SandboxedExecute`). This preprocessor, next in the pipeline,
grades each of the course's test cells itself, outside the sandbox, from the gradebook's copy
of the course (`course_cells`): a hidden region's checks on cases drawn from the course
secret, the student and the submission time; a visible cell's assertions run again here
(`visible`); the student's definitions called in sandboxed children and judged here
(`runner`); the GPU timing. It writes the cells' outputs and the sidecars beside the graded
notebook, where the student's code cannot write: whatever the kernel printed or raised in a
test cell cannot change its score, and `SaveAutoGrades` scores what is written here. The
source screen (`screening`) reads the submission's code first: what it finds holds the grade
for an instructor's review, with the line and the reason, and changes no point. A timing
check that finds no CUDA device is recorded in the grading record (`run_check`).
"""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from nbformat import NotebookNode
from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Float, List, Tuple

from grader.grading.course_cells import course_for, graded_regions
from grader.grading.execute import AHEAD
from grader.grading.grading_log import GradingLog, Hold, course_root, log_for
from grader.grading.timing_record import (
    BANDS,
    SLOWEST_FRACTION,
    bands_from_config,
)
from grader.grading.timing_record import SIDECAR as TIMING_SIDECAR
from grader.seeding import course_secret
from learning.workshops.checking.sidecars import HINTS_SIDECAR, write_hints

# torch, triton and the modules that import them (grader.grading.hidden, the checking's cases,
# faults and isolation, the timing, the notebook's testing), and the source screen (it loads
# IPython's shell), are imported where used: every nbgrader command loads nbgrader_config.py,
# which names this module's preprocessors, and importing them costs about 1.4 s that only
# grading needs.
if TYPE_CHECKING:
    from grader.grading.hidden import Draw
    from grader.grading.hidden_regions import Check
    from grader.grading.runner import Runner
    from learning.workshops.screen import Screened

NOTEBOOK = "strided_softmax.ipynb"
SMOKE_FAILED = (
    "The quick check before the hidden tests failed; run the cell in your notebook to see why."
)
"""What a hidden cell says of its failed smoke test: the grader's words alone. The error's own
line is the child's to choose (a class name, a message), and once listed a student's hidden
cases."""


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
        from grader.gradebook import open_gradebook

        with open_gradebook(db_url) as gradebook:
            submission = gradebook.find_submission(assignment, student)
            stamp = submission.timestamp.isoformat() if submission.timestamp else ""
    return Draw(course_secret(root), student, stamp)


def as_notes(outputs: list) -> list[NotebookNode]:
    """What the smoke test before a hidden region showed (run here, `Runner.visible`), kept
    for the student to read but unable to score: what the course's cell printed here stays,
    an error becomes SMOKE_FAILED (the grading log has its line), anything else goes."""
    kept = []
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream" and output.get("name") == "stdout":
            kept.append(output)
        elif kind == "error":
            kept.append(new_output("stream", name="stdout", text=SMOKE_FAILED + "\n"))
    return kept


def run_check(runner: Runner, check: Check, log: GradingLog | None) -> list[NotebookNode]:
    """One hidden check's outputs (`Runner.run`); when it is the timing and it raised
    NoCudaError, the grading record says the timing ran without a GPU."""
    from learning.workshops.measuring.timing import NoCudaError

    outputs = runner.run(*check)
    no_cuda = any(out.get("ename") == NoCudaError.__name__ for out in outputs)
    if log is not None and check[0] == "timing_points" and no_cuda:
        log.timed_without_gpu()
    return outputs


def restart_sidecars(folder: Path) -> None:
    """The sidecars beside the graded notebook start afresh for this grading (a submitted or
    earlier file is gone): the timing record and the hints file are written here alone, the
    hints from the cases this side ran for each test cell."""
    (folder / TIMING_SIDECAR).unlink(missing_ok=True)
    write_hints(folder / HINTS_SIDECAR, {})


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
            return self._grade(nb, resources, log)
        except Exception as exc:
            if log:
                log.cause(f"internal error: grading the hidden cells failed: {fault_text(exc)}")
            raise

    def _grade(self, nb: NotebookNode, resources: dict, log):
        # the grading engine imports torch and triton: here, where a notebook is graded, not
        # where nbgrader loads nbgrader_config.py, which names this shell (every command)
        from grader.grading.runner import sandboxed_copy
        from grader.grading.visible import visible_cells

        folder = Path(resources["metadata"]["path"]).resolve()
        course = course_for(resources)
        restart_sidecars(folder)
        ahead = resources.pop(AHEAD, None)
        with contextlib.ExitStack() as stack:
            from grader.grading.screening import screen_notebook

            # the screen's child reads while the checks run ahead finish: about 1 s saved
            reading = stack.enter_context(ThreadPoolExecutor(1)).submit(screen_notebook, nb)
            if ahead is not None:
                stack.callback(ahead.close)
                waited = time.monotonic()
                runner = ahead.runner()
                if log:
                    waited = time.monotonic() - waited
                    log.say(f"the checks beside the notebook were done {waited:.1f} s after it")
            else:
                draw = submission_draw(resources, course_root(self.config))
                runner = stack.enter_context(sandboxed_copy(nb, draw))
            stack.enter_context(contextlib.chdir(folder))
            runner.say = log.say if log else lambda _: None
            runner.held = self._held(reading.result(), log)
            runner.bands = bands_from_config(self.timing_bands, self.timing_slowest_fraction)
            runner.slowest = self.timing_slowest_fraction
            hidden = {i: (gid, checks) for i, gid, checks in graded_regions(nb, course)}
            by_id = {c.grade_id: c for c in course}
            visible = dict(visible_cells(nb, course))
            for index in sorted({*hidden, *visible}):  # the sidecars go beside the notebook
                cell = nb.cells[index]
                if index in hidden:  # the kernel's own outputs go: they were never scored
                    gid, checks = hidden[index]
                    smoke = as_notes(runner.visible(by_id[gid], smoke_test=True))
                    ran = [out for check in checks for out in run_check(runner, check, log)]
                    cell.outputs = smoke + ran
                else:  # the course's assertions, run here: the kernel's outputs cannot score
                    gid = visible[index].grade_id
                    cell.outputs = runner.visible(visible[index])
                if runner.replay_holds and log:
                    why = runner.replay_holds
                    log.hold(Hold("replay", "replay", gid, 0, w, (gid,)) for w in why)
                runner.replay_holds = []
        return nb, resources

    def _held(self, screened: Screened, log) -> str:
        """The source screen's reading of the submission (`screening`): each finding a hold
        in its grading record, said in the log before any check's outcome. The words each
        passed check gets beside it when the grade is held, else ""."""
        from grader.grading.screening import screen_holds, screen_summary

        holds = screen_holds(screened)
        if log is not None:
            log.say(screen_summary(screened))
            log.hold(holds)
        count = f"{len(holds)} source-screen hold{'s' * (len(holds) != 1)}"
        return f", held for review ({count} above)" if holds else ""
