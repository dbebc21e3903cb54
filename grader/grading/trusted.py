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

import ast
import contextlib
import functools
import io
import json
import secrets
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import nbformat
from nbformat import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from grader.grading.feedback import hidden_failure, timing_summary
from grader.grading.grading_log import course_root, log_for
from grader.grading.hidden import (
    CASE_TIMEOUT_S,
    Draw,
    hidden_cases,
    run_function_check,
    run_hidden,
)
from grader.grading.sandbox import split_hidden_tests
from grader.grading.timing_record import MAX_POINTS
from grader.grading.timing_record import SIDECAR as TIMING_SIDECAR
from grader.seeding import course_secret
from learning.workshops.checking.cases import OPS
from learning.workshops.checking.faults import CheckerFault, fault_text
from learning.workshops.checking.isolation import Session
from learning.workshops.checking.sidecars import HINTS_SIDECAR, RecordError, outcome, write_hints
from learning.workshops.measuring.timing import NoCudaError
from learning.workshops.notebook.testing import all_pass, record_outcome, record_status, verdict

NOTEBOOK = "strided_softmax.ipynb"
CHECKS = ("expect_address_table", "expect_hidden", "expect_worksheet", "timing_points")
"""The checks a hidden region may call; each runs here, not in the grading kernel."""


def hidden_region(source: str) -> str | None:
    """The code between a cell's BEGIN and END HIDDEN TESTS markers, or None: exactly what
    the sandbox cut out of the cell (`grader.grading.sandbox.split_hidden_tests`)."""
    return split_hidden_tests(source)[1]


def hidden_checks(region: str) -> list[tuple[str, list, dict]]:
    """The checks a hidden region calls: (name, positional args, keyword args), each
    argument a literal or, for a bare name, that name as a string."""

    def value(node: ast.expr):
        return node.id if isinstance(node, ast.Name) else ast.literal_eval(node)

    calls = []
    for node in ast.walk(ast.parse(region)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in CHECKS:
            args = [value(a) for a in node.args]
            kwargs = {k.arg: value(k.value) for k in node.keywords}
            calls.append((node.func.id, args, kwargs))
    return calls


def submission_draw(resources: dict, root: Path) -> Draw:
    """The draw of the grading nbgrader is running in the course at `root` (its student and
    gradebook)."""
    info = resources.get("nbgrader", {})
    return draw_for(info.get("db_url"), info.get("assignment"), info.get("student", ""), root)


def draw_for(db_url: str | None, assignment: str | None, student: str, root: Path) -> Draw:
    """The draw of a student's submission: the secret of the course at `root`, the student,
    the submission time. MissingSecret when the course has no secret."""
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
timing itself and its record): the only part of `grader/` a sandbox ever sees, at /course/grader."""
GRADER = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def sandboxed_copy(nb: NotebookNode, draw: Draw) -> Iterator[Runner]:
    """A Runner over a scratch copy of `nb` that sandboxed children see as their own
    folder (/work, a size-limited tmpfs when run as root); gone afterwards, with every
    process the children started."""
    from grader.grading.sandbox import inside, sandbox_cgroups, sandboxed, scratch

    with scratch() as work, sandbox_cgroups() as cgroups, tempfile.TemporaryDirectory() as kit:
        nbformat.write(nb, work / NOTEBOOK)
        Path(kit).chmod(0o755)  # the sandbox's user reads it
        for name in TIMING_KIT:
            (Path(kit) / name).parent.mkdir(mode=0o755, exist_ok=True)
            (Path(kit) / name).write_bytes((GRADER / name).read_bytes())
        extra = [(Path(kit), "/course/grader")]
        wrap = functools.partial(sandboxed, work=work, cgroups=cgroups, extra=extra)
        with Session(Path(inside(work, work / NOTEBOOK)), wrap) as session:
            yield Runner(work, draw, wrap, session)


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

    say: Callable[[str], None] = staticmethod(lambda _: None)
    """Where each check's outcome is told in full (the student's grading log)."""

    def run(self, name: str, args: list, kwargs: dict) -> list[NotebookNode]:
        """One check's outputs: a line when it passed, an error when it failed."""
        try:
            outputs = getattr(self, name)(*args, **kwargs)
        except (AssertionError, CheckerFault, NoCudaError) as exc:
            self.say(f"{name}{tuple(args)}: {type(exc).__name__}: {exc}")
            return [_error(exc)]
        self.say(f"{name}{tuple(args)}: passed")
        return outputs

    def expect_hidden(self, op: str, *_, **__) -> list[NotebookNode]:
        run = run_hidden(op, self.session, self.draw)
        if run.load_error:
            raise AssertionError(f"{op}: the notebook's definitions do not load: {run.load_error}")
        record_outcome(f"hidden:{op}", run.results)
        error = verdict(run.results, f"{op}, hidden cases")
        if isinstance(error, CheckerFault):
            raise error
        if error is not None:  # the student reads kinds, hints and a fresh example
            self.say(f"expect_hidden('{op}') in full: {error}")
            cases = hidden_cases(op, self.draw)
            raise AssertionError(hidden_failure(op, cases, run.results, self._examples(op)))
        return [_stream(f"{op}: {all_pass(len(run.results), 'hidden')}")]

    def _examples(self, op: str) -> Callable[[list], list]:
        """Runs freshly drawn example cases of `op` against the submission, sandboxed."""

        def run(cases: list) -> list:
            seed = secrets.randbelow(2**31)
            function = OPS[op].function
            return self.session.run_cases(op, function, cases, seed, CASE_TIMEOUT_S).results

        return run

    def _function(self, function: str) -> list[NotebookNode]:
        passed, said = run_function_check(function, self.session, self.draw)
        record_status(f"hidden:{function}", "passed" if passed else "failed")
        if not passed:
            raise AssertionError(said)
        return [_stream(said)]

    def expect_address_table(self, *_, **__) -> list[NotebookNode]:
        return self._function("address_table")

    def expect_worksheet(self, *_, **__) -> list[NotebookNode]:
        return self._function("worksheet")

    def timing_points(self, max_points: float = MAX_POINTS, **__) -> list[NotebookNode]:
        from grader.grading.gpu_timing import Sandbox, timing_points

        record = self.work / ".timing.json"
        seen = str(self.impl.with_name(record.name))
        sandbox = Sandbox(self.wrap, str(self.impl), seen, record, self.draw.key)
        sidecar = Path(TIMING_SIDECAR).resolve()
        with contextlib.redirect_stdout(io.StringIO()):  # it names the hidden shapes
            points = timing_points(max_points, sidecar=sidecar, sandbox=sandbox)
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


class GradeHiddenCells(NbGraderPreprocessor):
    """Grade every hidden region of the notebook here, on the trusted side (see the module)."""

    def preprocess(self, nb: NotebookNode, resources: dict):
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
        draw = submission_draw(resources, course_root(self.config))
        with sandboxed_copy(nb, draw) as runner, contextlib.chdir(folder):
            runner.say = say
            for cell in nb.cells:  # the sidecars go beside the graded notebook
                region = hidden_region(cell.source) if cell.cell_type == "code" else None
                if region is not None:
                    graded = [out for check in hidden_checks(region) for out in runner.run(*check)]
                    cell.outputs = kernel_notes(cell.outputs) + graded
        return nb, resources
