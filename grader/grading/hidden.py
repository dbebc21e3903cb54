"""Hidden test cases, drawn at autograde time from the course secret, and the cells' assertions.

The secret lives outside git, in the course folder (`grader.seeding`; or `I1_COURSE_SECRET`),
and never ships. The same secret, student and submission time draw the same cases and
values, so grades are reproducible; students never see which views, widths and dtypes are
drawn. An exception in a check's own code is the checker's: the cell raises `CheckerFault`
saying so, and the hints sidecar records the test as `internal-error`.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import functools
import hashlib
import io
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from grader.seeding import course_folder, course_secret
from learning.workshops.checking.cases import (
    BACKWARD_BAD_INPUTS,
    BAD_INPUTS,
    DTYPES,
    OPS,
    Case,
    suite,
)
from learning.workshops.checking.faults import (
    CheckerFault,
    call_student,
    fault_text,
    internal_message,
)
from learning.workshops.checking.isolation import CallsFailed, IsolatedRun, Session
from learning.workshops.checking.layouts import LAYOUTS
from learning.workshops.contracts import default_device
from learning.workshops.notebook.testing import (
    all_pass,
    checker_faults,
    quiet,
    record_outcome,
    record_status,
    verdict,
)

WIDTHS = (1, 2, 3, 17, 31, 64, 100, 255, 256, 513)
ROW_COUNTS = (1, 2, 9, 33)


@dataclass(frozen=True)
class Draw:
    """What one grading's hidden cases are drawn from: the course secret, the student and
    the submission's time. Every student meets the same kinds of views, each with fresh
    shapes, offsets and values, so what one grading shows is no use for the next."""

    secret: str
    student: str = ""
    submitted: str = ""

    @property
    def key(self) -> str:
        text = f"{self.secret}/{self.student}/{self.submitted}"
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def seed(self) -> int:
        """The seed of the cases' values."""
        return int(self.key[:8], 16)


def course_draw(root: Path | None = None) -> Draw:
    """The draw of no submission in particular: the secret alone of the course at `root`
    (default: the course around the current folder). MissingSecret without one."""
    return Draw(course_secret(course_folder() if root is None else root))


def hidden_cases(op: str, draw: Draw | None = None) -> list[Case]:
    """The hidden cases for `op`: every layout with drawn shapes, dtypes and fills, plus
    the wide, large-magnitude, half-precision, repeated and contract cases."""
    rng = random.Random(f"{(draw or course_draw()).key}/{op}")
    if OPS[op].kind == "in-place":
        return suite(op, _in_place_cases(rng), default_device().type)
    if OPS[op].kind == "backward":
        return suite(op, _backward_cases(rng), default_device().type)
    cases = []
    for layout in LAYOUTS:
        for i in range(2):
            cases.append(
                Case(
                    f"hidden-{layout}-{i}",
                    layout,
                    rng.choice(ROW_COUNTS),
                    rng.choice(WIDTHS),
                    dtype=rng.choice(list(DTYPES)),
                    fill=rng.choice(("normal", "neg-inf")),
                    num_warps=rng.choice((1, 2, 4, 8, 16)),
                )
            )
    cases += [
        Case("hidden-wide", "transpose", 3, rng.randint(300, 2000)),
        Case("hidden-wide-slice", "slice", 2, rng.randint(300, 2000)),
        Case(
            "hidden-neg-inf-head",
            "transpose",
            rng.randint(2, 9),
            rng.randint(300, 2000),
            fill="neg-inf-head",
        ),
        Case("hidden-large", "transposed-slice", 5, rng.choice(WIDTHS[3:]), fill="large"),
        Case("hidden-large-half", "slice", 4, 40, dtype="float16", fill="large"),
        Case("hidden-bfloat16", "transpose", 6, rng.choice(WIDTHS[2:]), dtype="bfloat16"),
        Case("hidden-repeat", "slice", 4, rng.choice(WIDTHS[2:]), repeat=True),
        Case("hidden-zero-rows", "contiguous", 0, rng.choice(WIDTHS)),
        Case("hidden-zero-rows-wide", "transpose", 0, 700),
    ]
    cases += [Case(f"hidden-reject-{kind}", bad_input=kind) for kind in BAD_INPUTS]
    return suite(op, tuple(cases), default_device().type)


def _drawn(rng: random.Random, name: str, layout: str, **fields) -> Case:
    """A case of `layout` with a drawn row count, width, dtype and num_warps."""
    return Case(
        name,
        layout,
        rng.choice(ROW_COUNTS),
        rng.choice(WIDTHS),
        dtype=rng.choice(list(DTYPES)),
        num_warps=rng.choice((1, 2, 4, 8, 16)),
        **fields,
    )


def _in_place_cases(rng: random.Random) -> tuple[Case, ...]:
    """strided_softmax_'s hidden cases: every layout (those whose elements share addresses
    must be refused), drawn shapes and fills, a wide row, large values, no rows, bad input."""
    cases = [
        _drawn(rng, f"hidden-{layout}-{i}", layout, fill=rng.choice(("normal", "neg-inf")))
        for layout in (*LAYOUTS, "overlapping")
        for i in range(2)
    ]
    cases += [
        Case("hidden-wide", "transpose", 3, rng.randint(300, 2000)),
        Case("hidden-large", "transposed-slice", 5, rng.choice(WIDTHS[3:]), fill="large"),
        Case("hidden-zero-rows", "slice", 0, rng.choice(WIDTHS)),
    ]
    return (*cases, *(Case(f"hidden-reject-{kind}", bad_input=kind) for kind in BAD_INPUTS))


def _backward_cases(rng: random.Random) -> tuple[Case, ...]:
    """strided_softmax_backward's hidden cases: y in every layout paired with a drawn
    layout for dy (the same strides or others), a wide pair, no rows, bad input."""
    cases = [
        _drawn(rng, f"hidden-{layout}-{i}", layout, grad_layout=rng.choice(LAYOUTS))
        for layout in LAYOUTS
        for i in range(2)
    ]
    cases += [
        Case("hidden-wide", "transpose", 3, rng.randint(300, 2000), grad_layout="slice"),
        Case("hidden-zero-rows", "contiguous", 0, rng.choice(WIDTHS), grad_layout="transpose"),
    ]
    return (*cases, *(Case(f"hidden-reject-{k}", bad_input=k) for k in BACKWARD_BAD_INPUTS))


UNSANDBOXED = (
    "{check} ran inside the kernel nbgrader is autograding, beside the student's code: "
    "nbgrader did not load the course's nbgrader_config.py (its log says 'Exception while "
    "loading config file'), so nothing here is sandboxed. This cell is not graded; fix the "
    "config and autograde again."
)


def refuse_in_autograde(check: str) -> None:
    """Raise CheckerFault when a hidden cell calls `check` in the kernel nbgrader autogrades:
    with the course's config, hidden cells are cut out there and graded on the trusted side
    (grader.grading.trusted), so reaching here means the config did not load."""
    if os.environ.get("NBGRADER_EXECUTION") == "autograde":
        raise CheckerFault(UNSANDBOXED.format(check=check))


def kernel_entry(name: str, check: Callable) -> Callable:
    """`check` as a hidden cell calls it, by `name`, in the notebook's kernel (refused under
    autograde)."""

    @functools.wraps(check)
    def entry(*args, **kwargs):
        refuse_in_autograde(name)
        return check(*args, **kwargs)

    return entry


SUBMISSION = "strided_softmax.ipynb"
CASE_TIMEOUT_S = 120.0


def expect_hidden(op: str, impl: Path | str = SUBMISSION) -> None:
    """Assert that the submission passes `op`'s hidden cases, run in a child process.

    The child loads the definitions from `impl` (the notebook nbgrader is grading, in the
    current folder): a crash or hang there fails this cell with its cause and the rest of
    the notebook still grades, and nothing a notebook cell patches in the grading kernel
    (the grader, torch, the traceback machinery) reaches the checks.
    """
    refuse_in_autograde("expect_hidden")
    path = Path(impl).resolve()
    if not path.is_file():
        raise AssertionError(f"{op}: hidden tests need the graded notebook at {path}.")
    with checker_faults(f"hidden:{op}"), Session(path) as session:
        run = run_hidden(op, session)
    if run.load_error:
        raise AssertionError(
            f"{op}: the notebook's definitions do not load on their own: {run.load_error}"
        )
    record_outcome(f"hidden:{op}", run.results)
    error = verdict(run.results, f"{op}, hidden cases")
    if error is not None:
        raise error
    print(f"{op}: {all_pass(len(run.results), 'hidden')}")


def run_hidden(op: str, session: Session, draw: Draw | None = None) -> IsolatedRun:
    """`op`'s hidden cases against the submission `session` serves.

    Every case has a result: one that crashed, hung or never ran is a failed result.
    """
    draw = draw or course_draw()
    cases = hidden_cases(op, draw)
    return session.run_cases(op, OPS[op].function, cases, draw.seed, CASE_TIMEOUT_S)


def hidden_views(draw: Draw | None = None) -> list[torch.Tensor]:
    """Views for the address-table cell: slices, broadcasts, transposes of a numbered base."""
    rng = random.Random(f"{(draw or course_draw()).key}/addresses")
    base = torch.arange(200.0)
    rows, cols = rng.randint(3, 5), rng.randint(4, 7)
    return [
        base[: 4 * 7].view(4, 7)[1:, 1::2],
        base[:5].view(1, 5).expand(3, 5),
        base[:rows].view(rows, 1).expand(rows, cols),
        base[: 2 * cols * (rows + 1)].view(2 * cols, rows + 1).t()[1:, ::2],
        base[10 : 10 + rows * cols].view(cols, rows).t(),
        base[:0].view(0, 4),
    ]


def function_check(function: str) -> Callable[[Callable], Callable]:
    """Decorate the hidden check of `function`: record its status (passed, failed, or
    internal-error when the check's own code raised, which becomes a CheckerFault)."""
    test = f"hidden:{function}"

    def decorate(check: Callable) -> Callable:
        @functools.wraps(check)
        def checked(*args, **kwargs) -> None:
            with checker_faults(test):
                try:
                    check(*args, **kwargs)
                except AssertionError:
                    record_status(test, "failed")
                    raise
            record_status(test, "passed")

        return checked

    return decorate


@function_check("address_table")
def check_address_table(address_table: Callable, views: list | None = None) -> None:
    """Assert that `address_table(view)` lists (row, col, storage index) for hidden views."""
    views = hidden_views() if views is None else views
    for view in views:
        rows, cols = view.shape
        sr, sc = view.stride()
        want = [
            (r, c, view.storage_offset() + r * sr + c * sc)
            for r in range(rows)
            for c in range(cols)
        ]
        with quiet():
            got = _triples(call_student("address_table", address_table, view))
        if sorted(got) != want:
            wrong = next((w for w in want if w not in set(got)), None)
            raise AssertionError(  # the grader's words alone: never what the function returned
                f"address_table is wrong for a {tuple(view.shape)} view with strides "
                f"{(sr, sc)} and storage offset {view.storage_offset()}: expected entry "
                f"{wrong} (row, column, storage index) among {len(want)}, and your table "
                f"has {len(got)} entries{' without it' if wrong else ''}. The index is "
                "storage_offset + row*stride(0) + col*stride(1)."
            )
    print(f"address_table: {len(views)} hidden views pass.")


def _triples(got) -> list[tuple[int, ...]]:
    """The entries of an address table as tuples of ints; AssertionError when they are not."""
    try:
        return [tuple(int(v) for v in entry) for entry in got]
    except (TypeError, ValueError, OverflowError) as exc:  # int(inf) overflows
        raise AssertionError(
            f"address_table must return (row, column, storage index) entries of ints; reading "
            f"what it returned as such raised {type(exc).__name__}"
        ) from exc


def _rescaled(results, factors: dict[str, float]):
    """A copy of `results` with each variant's times multiplied by its factor."""
    rows = [
        dataclasses.replace(
            row,
            median_ms=row.median_ms * factors.get(row.variant, 1.0),
            min_ms=row.min_ms * factors.get(row.variant, 1.0),
            max_ms=row.max_ms * factors.get(row.variant, 1.0),
        )
        for row in results.rows
    ]
    return dataclasses.replace(results, rows=rows)


def worksheet_inputs() -> list:
    """The measurements the worksheet is checked on: the course's run, and two rescalings in
    which direct and copy trade places."""
    from learning.workshops.measuring.results import H200_SAMPLE, load

    sample = load(H200_SAMPLE)
    factors = ({}, {"copy": 1.7, "direct": 0.8}, {"copy": 0.6, "direct": 1.9})
    return [_rescaled(sample, f) for f in factors]


@function_check("worksheet")
def check_worksheet(worksheet: Callable) -> None:
    """Assert that `worksheet` computes from the results it is given, copy included."""
    from grader.reference import worksheet as reference_worksheet

    for results in worksheet_inputs():
        want = reference_worksheet(results)
        with quiet():
            got = call_student("worksheet", worksheet, results)
        if not isinstance(got, dict) or set(got) != set(want):
            raise AssertionError(f"worksheet must return a dict with keys {sorted(want)}")
        for key, value in want.items():
            if not _same(got[key], value):
                raise AssertionError(  # the grader's words alone: never the returned value
                    f"worksheet[{key!r}] should be {value!r} for one of the hidden "
                    "measurements, and is not: compute every entry from the results passed "
                    "in (the copy variant's median includes the copy)."
                )
    print("worksheet: 3 hidden measurements pass.")


expect_address_table = kernel_entry("expect_address_table", check_address_table)
expect_worksheet = kernel_entry("expect_worksheet", check_worksheet)


def _same(got, want) -> bool:
    """Whether a worksheet entry matches: strings exactly, numbers within 1e-9."""
    if isinstance(want, str):
        return got == want
    try:
        return abs(got - want) < 1e-9
    except TypeError:  # the student's entry is not a number
        return False


FUNCTION_CHECKS = {"address_table": check_address_table, "worksheet": check_worksheet}
"""The hidden checks that test one plain function, by the function's name."""


def run_function_check(
    function: str, session: Session, draw: Draw | None = None
) -> tuple[bool, str]:
    """`function`'s hidden check: the submission's definition runs in `session`'s child on
    the hidden inputs; the answers are checked here. Returns (passed, what the check said
    last)."""
    unrecorded = FUNCTION_CHECKS[function].__wrapped__  # the caller records its status
    if function == "address_table":
        views = hidden_views(draw)
        inputs, check = [view_input(v) for v in views], (lambda f: unrecorded(f, views))
    else:
        inputs = [{"results": r.to_json()} for r in worksheet_inputs()]
        check = unrecorded
    try:
        answers = in_grader_words(session.call(function, inputs, CASE_TIMEOUT_S))
    except CallsFailed:  # its reason quotes the child (a load error, its last output line)
        return False, f"{function}: {NOT_CALLED}"
    try:
        with contextlib.redirect_stdout(io.StringIO()) as said:
            check(replay(answers))
    except (AssertionError, CheckerFault) as exc:
        return False, " ".join(str(exc).split())[:300]
    except Exception as exc:  # the check's own code raised: the checker's fault
        raise CheckerFault(internal_message([f"hidden:{function}: {fault_text(exc)}"])) from exc
    return True, last_line(said.getvalue())


NOT_CALLED = (
    "it could not be called on the hidden inputs: the notebook's definitions did not load on "
    "their own, or the process running it crashed or ran out of time. Restart the kernel and "
    "run the notebook top to bottom to see why."
)
"""What a hidden function check says when the child gave no answers: the grader's words."""


def in_grader_words(answers: list[dict]) -> list[dict]:
    """`answers` as a hidden cell may tell of them: an exception named by its class when that
    is one of Python's own (else "Exception"), with no message: a hidden cell shows only the
    grader's words, never text the child chose."""
    return [
        {"raised": _builtin_exception(a["raised"]), "message": ""} if "raised" in a else a
        for a in answers
    ]


def _builtin_exception(name: str) -> str:
    known = getattr(builtins, name, None)
    return name if isinstance(known, type) and issubclass(known, BaseException) else "Exception"


def view_input(view: torch.Tensor) -> dict:
    """A view as the calls child rebuilds it: its whole storage, shape, strides and offset."""
    storage = view.untyped_storage()
    values = torch.empty(0, dtype=view.dtype).set_(storage).tolist()
    return {
        "view": {
            "storage": values,
            "shape": list(view.shape),
            "stride": list(view.stride()),
            "offset": view.storage_offset(),
        }
    }


def student_calls(session: Session, function: str, inputs: list[dict]) -> list[dict]:
    """The student's `function` called on each input in `session`'s child; each call's
    answer. AssertionError when the child could not answer at all."""
    try:
        return session.call(function, inputs, CASE_TIMEOUT_S)
    except CallsFailed as exc:
        raise AssertionError(f"{function}: {exc}") from None


def replay(answers: list[dict]) -> Callable:
    """A stand-in for the student's function that answers, call by call, what the function
    answered in the child: the value it returned, or the exception it raised."""
    queue = iter(answers)

    def answered(*args, **kwargs):
        answer = next(queue)
        if "raised" in answer:  # a name, as a class's name may be, and its message
            name = answer["raised"].replace("\0", "?")[:100]
            raise type(name, (Exception,), {})(answer["message"])
        return answer["value"]

    return answered


def last_line(text: str) -> str:
    """The last line of a child's output that says anything, cut to 300 characters."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
