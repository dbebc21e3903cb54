"""nbgrader's Execute step, run in the sandbox (`grader.isolation.sandbox`): the submission
folder is copied to a scratch folder with every notebook's hidden tests cut out, the
notebook runs there (`learning.workshops.checking.notebook_runner`), and only its outputs
come back onto the graded notebook, whose sources stay as they were. The hidden tests run
on the trusted side afterwards (`grader.grading.trusted`).

A tiny notebook takes 1.7 s through `SandboxedExecute` against 1.0 s through nbgrader's
Execute (the runner's start and imports).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

import nbformat
from nbclient.exceptions import DeadKernelError
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute

from grader.grading.grading_log import log_for
from grader.grading.hidden_regions import stripped
from grader.grading.submission_files import refuse_irregular_submissions
from grader.isolation.limits import DEFAULT_LIMITS, MiB
from grader.isolation.process import SandboxRun
from grader.isolation.sandbox import REPORT_FD, SandboxUnavailable, inside, run_sandboxed
from grader.isolation.scratch import scratch
from learning.workshops.checking.notebook_runner import CASES_RUN_OUTSIDE, DEAD_KERNEL

# Wherever grading runs through SandboxedExecute (ready_to_grade requires it of the course's
# config), nbgrader also refuses submissions that are not regular files, whatever the config.
refuse_irregular_submissions()

RUNNER_MODULE = "learning.workshops.checking.notebook_runner"
RESULT_LIMIT_BYTES = 64 * MiB
"""The largest executed notebook read back from the sandbox; a larger one is refused."""


def copy_submission(folder: Path, work: Path, limit_bytes: int) -> list[str]:
    """Copy the regular files under `folder` into `work` (symlinks are not followed, other
    notebooks lose their hidden tests), up to `limit_bytes` in all; return what was skipped."""
    skipped, total = [], 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        for name in files:
            source = Path(root, name)
            relative = source.relative_to(folder)
            size = source.lstat().st_size
            if source.is_symlink() or not source.is_file() or total + size > limit_bytes:
                skipped.append(str(relative))
                continue
            total += size
            target = work / relative
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
            _copy_one(source, target)
    return skipped


def _copy_one(source: Path, target: Path) -> None:
    """Copy one submitted file, a notebook without its hidden tests, readable by the sandbox."""
    if source.suffix == ".ipynb":
        try:
            nbformat.write(stripped(nbformat.read(source, as_version=4)), target)
        except Exception:  # not a notebook nbgrader wrote: the student's own bytes, as they are
            shutil.copyfile(source, target, follow_symlinks=False)
    else:
        shutil.copyfile(source, target, follow_symlinks=False)
    target.chmod(0o644)


@dataclass
class SandboxRecord:
    """What grading one notebook in the sandbox did (kept in `resources["i1_sandbox"]`)."""

    seconds: float
    returncode: int | None
    timed_out: bool
    result: str  # "ok", or why the executed notebook was not used
    skipped_files: list[str]


AHEAD = "i1_checks_ahead"
"""The resources key of the hidden checks running beside the notebook
(`grader.grading.trusted.ChecksAhead`): closed here when the notebook cannot be graded."""


class SandboxedExecute(Execute):
    """nbgrader's Execute, run in a sandbox that sees only a scratch copy of the submission
    folder, with the hidden tests cut out (they run on the trusted side); the outputs come
    back onto the graded notebook, whose sources stay as they were."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        try:
            return self._execute(nb, resources)
        except BaseException:  # this notebook is not graded: neither are its hidden cells
            ahead = resources.pop(AHEAD, None)
            if ahead is not None:
                ahead.close()
            raise

    def _execute(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        self._require_secret(resources)
        folder = Path(resources["metadata"]["path"])
        name = f"{resources.get('unique_key') or 'notebook'}.ipynb"
        with scratch() as work:
            skipped = copy_submission(folder, work, DEFAULT_LIMITS.work_bytes)
            nbformat.write(stripped(nb), work / name)
            (work / name).chmod(0o644)
            run = run_sandboxed(
                self._runner(inside(work, work / name)),
                work=work,
                timeout_s=self._wall_s(nb, resources),
                report_limit_bytes=RESULT_LIMIT_BYTES,
                env={
                    "NBGRADER_EXECUTION": os.environ.get("NBGRADER_EXECUTION", "autograde"),
                    CASES_RUN_OUTSIDE: "1",  # the trusted side runs them (trusted.py)
                },
            )
        executed, why = read_result(run, len(nb.cells))
        if executed is not None and kernel_died(executed):
            executed, why = None, f"the student's code killed the kernel {killing_cell(executed)}"
        record = SandboxRecord(run.seconds, run.returncode, run.timed_out, why, skipped)
        resources["i1_sandbox"] = asdict(record)
        log = log_for(self.config, resources)
        if executed is None:  # as nbgrader's Execute: the student is not graded, and says why
            self.log.error("Sandboxed execution of %s failed: %s", name, why)
            if log:
                log.cause(failure_cause(run, why))
            raise DeadKernelError(f"Kernel died or timed out in the sandbox: {why}")
        if log:
            log.say(f"ran the notebook in the sandbox: {len(nb.cells)} cells, {run.seconds:.1f} s")
            log.say(f"its slowest cells: {slowest_cells(executed)}")
        copy_outputs(executed, nb)
        return nb, resources

    def _require_secret(self, resources: dict) -> None:
        """Refuse to grade, before any student code runs, when the course has no secret."""
        from grader.grading.grading_log import course_root
        from grader.seeding import MissingSecret, course_secret

        try:
            course_secret(course_root(self.config))
        except MissingSecret as exc:
            log = log_for(self.config, resources)
            if log:
                log.cause(f"no course secret: {exc}")
            raise SandboxUnavailable(str(exc)) from None

    def _runner(self, notebook: str) -> list[str]:
        """The runner's command: the notebook as the sandbox sees it, and the timeouts."""
        timeouts = [f"--timeout={self.timeout or 0}", f"--startup-timeout={self.startup_timeout}"]
        return [sys.executable, "-m", RUNNER_MODULE, notebook, "--report-fd", REPORT_FD, *timeouts]

    def _wall_s(self, nb: NotebookNode, resources: dict) -> float | None:
        """The whole run's time limit: start-up and the timeout of every code cell of the
        COURSE's notebook, with slack. Never the submission's cells: a student who adds
        cells does not get more time. Outside an autograde (no course), `nb`'s own cells."""
        from grader.grading.grading_log import course_root

        if not self.timeout or self.timeout <= 0:
            return None
        if resources.get("nbgrader", {}).get("assignment"):
            cells = course_code_cells(course_root(self.config), resources)
        else:
            cells = sum(cell.cell_type == "code" for cell in nb.cells)
        return wall_s(cells, self.timeout, self.startup_timeout)


def wall_s(course_cells: int, timeout_s: float, startup_timeout_s: float) -> float:
    """A submission's deadline: start-up, then `timeout_s` and 10 s of slack for each of the
    course's `course_cells` code cells, and a minute more."""
    return startup_timeout_s + course_cells * (timeout_s + 10) + 60


def course_code_cells(root: Path, resources: dict) -> int:
    """How many code cells the course's notebook being graded has: its release notebook's
    (`release/<assignment>/<notebook>.ipynb`, which nbgrader made from the source), else
    the gradebook's code cells of it. Read-only; never the submission's count."""
    info = resources["nbgrader"]
    release = Path(root) / "release" / info["assignment"] / f"{info['notebook']}.ipynb"
    try:
        notebook = nbformat.read(release, as_version=4)
        return sum(cell.cell_type == "code" for cell in notebook.cells)
    except (OSError, ValueError):
        from nbgrader.api import Gradebook

        with Gradebook(info["db_url"]) as gradebook:
            saved = gradebook.find_notebook(info["notebook"], info["assignment"])
            return sum(cell.cell_type == "code" for cell in saved.source_cells)


def failure_cause(run: SandboxRun, why: str) -> str:
    """The grading log's cause for a sandboxed run that gave no usable notebook."""
    if run.timed_out:
        return f"timeout: the notebook was still running after {run.seconds:.0f} s"
    return f"dead kernel: {why} (after {run.seconds:.0f} s)"


def read_result(run: SandboxRun, cells: int) -> tuple[NotebookNode | None, str]:
    """The executed notebook the sandbox reported, with "ok"; or None and why it is unusable."""
    if run.timed_out:
        return None, "timed out"
    if run.report_overflow:
        return None, f"the executed notebook is over {RESULT_LIMIT_BYTES} bytes"
    if not run.report:
        return None, f"no executed notebook (exit status {run.returncode})"
    try:
        executed = nbformat.reads(run.report.decode(), as_version=4)
        nbformat.validate(executed)
    except Exception as exc:
        return None, f"the executed notebook is unreadable: {type(exc).__name__}"
    if len(executed.cells) != cells:
        return None, f"the executed notebook has {len(executed.cells)} cells, not {cells}"
    return executed, "ok"


def slowest_cells(executed: NotebookNode, count: int = 4) -> str:
    """The `count` cells that ran longest, by the timestamps nbclient records in each
    cell's metadata: 'test_pass1 4.2 s, cell 7 1.0 s'."""
    took = []
    for index, cell in enumerate(executed.cells):
        stamps = cell.get("metadata", {}).get("execution", {})
        try:
            busy = datetime.fromisoformat(stamps["iopub.status.busy"].replace("Z", "+00:00"))
            idle = datetime.fromisoformat(stamps["iopub.status.idle"].replace("Z", "+00:00"))
        except (KeyError, TypeError, ValueError):
            continue
        name = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or f"cell {index}"
        took.append(((idle - busy).total_seconds(), name))
    return ", ".join(f"{name} {seconds:.1f} s" for seconds, name in sorted(took)[::-1][:count])


def copy_outputs(executed: NotebookNode, nb: NotebookNode) -> None:
    """Put each executed code cell's outputs and count onto the same cell of `nb`."""
    for ran, cell in zip(executed.cells, nb.cells, strict=True):
        if cell.cell_type == "code":
            cell.outputs = ran.get("outputs", []) if ran.cell_type == "code" else []
            cell.execution_count = ran.get("execution_count")
    if "language_info" in executed.metadata:
        nb.metadata["language_info"] = executed.metadata["language_info"]


SHOWN_LINE_CHARS = 60
"""How much of the code of the cell that killed the kernel its grading log shows."""


def killing_cell(executed: NotebookNode) -> str:
    """Where the kernel died, for the grading log: "in test_pass3 (cell 26 of 60: 'its code,
    comments aside, on one line')", the first code cell with the runner's dead-kernel error
    (the runner gives it to the cell that was running and to every code cell after it, which
    never ran)."""
    for index, cell in enumerate(executed.cells):
        if any(o.get("ename") == DEAD_KERNEL["ename"] for o in cell.get("outputs", [])):
            gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            code = [x for x in cell.source.splitlines() if not x.lstrip().startswith("#")]
            line = " ".join(" ".join(code).split())
            if len(line) > SHOWN_LINE_CHARS:
                line = line[:SHOWN_LINE_CHARS] + "..."
            where = f"cell {index + 1} of {len(executed.cells)}: {line!r}"
            return f"in {gid} ({where})" if gid else f"in {where}"
    return "in no cell the notebook records"


def kernel_died(executed: NotebookNode) -> bool:
    """Whether the executed notebook records the kernel's death in some cell."""
    return any(
        output.get("ename") == DEAD_KERNEL["ename"]
        for cell in executed.cells
        for output in cell.get("outputs", [])
    )
