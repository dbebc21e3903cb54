"""Assertions for notebook test cells: run cases in this process and fail with hints.

nbgrader scores a test cell zero when it writes to stderr, so the function under test
runs with stderr and warnings captured; what it wrote shows up in the failure message.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import secrets
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator

from learning.workshops.cases import PUBLIC_CASES, Case, CaseResult, run_case, suite
from learning.workshops.contracts import default_device
from learning.workshops.hints import diagnose


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
    """Run `cases` against `fn` in this process, quietly; return their results."""
    device = default_device()
    seed = secrets.randbelow(2**31) if seed is None else seed
    with quiet():
        return [run_case(fn, op, case, device, seed) for case in cases]


HINTS_SIDECAR = "i1_hints.json"
"""Written beside a notebook while nbgrader autogrades it: each test's outcome and hint ids."""


def record_outcome(test: str, results: list[CaseResult]) -> None:
    """While nbgrader autogrades, add this test's outcome and hint ids to the sidecar."""
    if os.environ.get("NBGRADER_EXECUTION") != "autograde":
        return
    path = os.path.join(os.getcwd(), HINTS_SIDECAR)
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError):
        record = {"schema": "i1-hints/1", "tests": {}}
    record["tests"][test] = {
        "passed": all(r.passed for r in results),
        "failed": [r.name for r in results if not r.passed],
        "hints": [h.id for h in diagnose(results)],
    }
    with open(path, "w") as f:
        json.dump(record, f, indent=2)


def failure_message(results: list[CaseResult], title: str) -> str:
    """What a failed test cell shows: each failing case, then the hints."""
    failed = [r for r in results if not r.passed]
    lines = [f"{title}: {len(failed)} of {len(results)} cases fail."]
    lines += [f"  FAIL {r.detail}" for r in failed]
    for hint in diagnose(results):
        lines.append(f"Hint [{hint.id}]: {hint.message}")
    return "\n".join(lines)


def expect_cases(fn: Callable, op: str, names: Iterable[str] | None = None) -> None:
    """Assert that `fn` passes the named public cases of `op` (all that apply by default)."""
    wanted = set(names) if names is not None else None
    chosen = [
        c
        for c in suite(op, PUBLIC_CASES, default_device().type)
        if wanted is None or c.name in wanted
    ]
    if wanted is not None and len(chosen) != len(wanted):
        unknown = wanted - {c.name for c in chosen}
        raise ValueError(f"no public case named {sorted(unknown)} for {op}")
    results = run_cases(fn, op, chosen)
    record_outcome(f"public:{op}" + (f":{'+'.join(sorted(wanted))}" if wanted else ""), results)
    if not all(r.passed for r in results):
        raise AssertionError(failure_message(results, f"{op}, public cases"))
    print(f"{op}: {len(results)} public cases pass.")
