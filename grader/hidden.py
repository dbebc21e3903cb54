"""Hidden test cases, drawn at autograde time from a secret seed, and the cells' assertions.

The seed lives in `grader/secret_seed.txt` (or `I1_SECRET_SEED`), which never ships. The
same seed draws the same cases and values for every student, so grades are reproducible;
students never see which views, widths and dtypes are drawn.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from learning.workshops.cases import BAD_INPUTS, DTYPES, OPS, Case, suite
from learning.workshops.child import child_env
from learning.workshops.contracts import default_device
from learning.workshops.isolation import IsolatedRun, run_isolated
from learning.workshops.testing import failure_message, quiet, record_outcome
from learning.workshops.views import LAYOUTS

SEED_FILE = Path(__file__).with_name("secret_seed.txt")
WIDTHS = (1, 2, 3, 17, 31, 64, 100, 255, 256, 513)
ROW_COUNTS = (1, 2, 9, 33)


def secret_seed() -> int:
    """The course's secret seed: `I1_SECRET_SEED` if set, else `grader/secret_seed.txt`."""
    text = os.environ.get("I1_SECRET_SEED") or SEED_FILE.read_text()
    return int(text.strip())


def hidden_cases(op: str) -> list[Case]:
    """The hidden cases for `op`: every layout with drawn shapes, dtypes and fills, plus
    the wide, large-magnitude, half-precision, repeated and contract cases."""
    rng = random.Random(f"{secret_seed()}/{op}")
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
        Case("hidden-wide", rng.choice(("transpose", "slice")), 3, rng.randint(300, 2000)),
        Case("hidden-large", "transposed-slice", 5, rng.choice(WIDTHS[3:]), fill="large"),
        Case("hidden-large-half", "slice", 4, 40, dtype="float16", fill="large"),
        Case("hidden-bfloat16", "transpose", 6, rng.choice(WIDTHS[2:]), dtype="bfloat16"),
        Case("hidden-repeat", "slice", 4, rng.choice(WIDTHS[2:]), repeat=True),
        Case("hidden-zero-rows", "contiguous", 0, rng.choice(WIDTHS)),
        Case("hidden-zero-rows-wide", "transpose", 0, 700),
    ]
    cases += [Case(f"hidden-reject-{kind}", bad_input=kind) for kind in BAD_INPUTS]
    return suite(op, tuple(cases), default_device().type)


SUBMISSION = "strided_softmax.ipynb"
CASE_TIMEOUT_S = 120.0


def expect_hidden(op: str, impl: Path | str = SUBMISSION) -> None:
    """Assert that the submission passes `op`'s hidden cases, run in a child process.

    The child loads the definitions from `impl` (the notebook nbgrader is grading, in the
    current folder): a crash or hang there fails this cell with its cause and the rest of
    the notebook still grades, and nothing a notebook cell patches in the grading kernel
    (the grader, torch, the traceback machinery) reaches the checks.
    """
    path = Path(impl).resolve()
    if not path.is_file():
        raise AssertionError(f"{op}: hidden tests need the graded notebook at {path}.")
    run = run_hidden(op, path)
    if run.load_error:
        raise AssertionError(
            f"{op}: the notebook's definitions do not load on their own: {run.load_error}"
        )
    record_outcome(f"hidden:{op}", run.results)
    if not all(r.passed for r in run.results):
        raise AssertionError(failure_message(run.results, f"{op}, hidden cases"))
    print(f"{op}: {len(run.results)} hidden cases pass.")


def run_hidden(op: str, impl: Path) -> IsolatedRun:
    """`op`'s hidden cases against the definitions in `impl`, in child processes.

    Every case has a result: one that crashed, hung or never ran is a failed result.
    """
    cases = hidden_cases(op)
    return run_isolated(impl, op, OPS[op].function, cases, secret_seed(), CASE_TIMEOUT_S)


def hidden_views() -> list[torch.Tensor]:
    """Views for the address-table cell: slices, broadcasts, transposes of a numbered base."""
    rng = random.Random(f"{secret_seed()}/addresses")
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


def expect_address_table(address_table: Callable) -> None:
    """Assert that `address_table(view)` lists (row, col, storage index) for hidden views."""
    for view in hidden_views():
        rows, cols = view.shape
        sr, sc = view.stride()
        want = [
            (r, c, view.storage_offset() + r * sr + c * sc)
            for r in range(rows)
            for c in range(cols)
        ]
        with quiet():
            got = address_table(view)
        got = [tuple(int(v) for v in entry) for entry in got]
        if sorted(got) != want:
            wrong = next((w for w in want if w not in set(got)), None)
            raise AssertionError(
                f"address_table is wrong for a {tuple(view.shape)} view with strides "
                f"{(sr, sc)} and storage offset {view.storage_offset()}: expected entry "
                f"{wrong} (row, column, storage index) among {len(want)}, got "
                f"{sorted(got)[:6]}{' ...' if len(got) > 6 else ''}. The index is "
                "storage_offset + row*stride(0) + col*stride(1)."
            )
    print(f"address_table: {len(hidden_views())} hidden views pass.")


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


def expect_worksheet(worksheet: Callable) -> None:
    """Assert that `worksheet` computes from the results it is given, copy included."""
    from grader.reference import worksheet as reference_worksheet
    from learning.workshops.results import H200_SAMPLE, load

    sample = load(H200_SAMPLE)
    for factors in ({}, {"copy": 1.7, "direct": 0.8}, {"copy": 0.6, "direct": 1.9}):
        results = _rescaled(sample, factors)
        want = reference_worksheet(results)
        with quiet():
            got = worksheet(results)
        if not isinstance(got, dict) or set(got) != set(want):
            raise AssertionError(f"worksheet must return a dict with keys {sorted(want)}")
        for key, value in want.items():
            same = got[key] == value if isinstance(value, str) else abs(got[key] - value) < 1e-9
            if not same:
                raise AssertionError(
                    f"worksheet[{key!r}] is {got[key]!r} for a measurement where it should be "
                    f"{value!r}: compute every entry from the results passed in (the copy "
                    "variant's median includes the copy)."
                )
    print("worksheet: 3 hidden measurements pass.")


FUNCTION_CHECKS = {"address_table": expect_address_table, "worksheet": expect_worksheet}
"""The hidden checks that test one plain function, by the function's name."""


def run_function_check(function: str, impl: Path) -> tuple[bool, str]:
    """`function`'s hidden check on its definition in `impl`, in a child process:
    (passed, the child's last line)."""
    command = [sys.executable, "-m", "grader.hidden", function, str(impl)]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env=child_env(), timeout=CASE_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return False, f"{function}: no result after {CASE_TIMEOUT_S:.0f} s"
    return done.returncode == 0, last_line(done.stdout + done.stderr) or (
        f"exit status {done.returncode}"
    )


def last_line(text: str) -> str:
    """The last line of a child's output that says anything, cut to 300 characters."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def main(argv: list[str] | None = None) -> int:
    """The child of `run_function_check`: exit 0 when the check passes, 1 with why."""
    from learning.workshops.contracts import select_mode
    from learning.workshops.loader import LoadError, load_function

    parser = argparse.ArgumentParser(description="Run one function's hidden check.")
    parser.add_argument("function", choices=sorted(FUNCTION_CHECKS))
    parser.add_argument("impl", help="the graded notebook or a .py file")
    args = parser.parse_args(argv)
    select_mode(verbose=False)
    try:
        FUNCTION_CHECKS[args.function](load_function(Path(args.impl), args.function))
    except (LoadError, AssertionError) as exc:
        print(" ".join(str(exc).split()), file=sys.stderr)
        return 1
    except Exception as exc:  # the student's function raised: that is the evidence
        print(f"{args.function} raised {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
