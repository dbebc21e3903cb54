"""The workshop page's names are the course's API: its module, its two names and its three
commands work verbatim, whatever the layout beneath them (shared/seeds/000_*.txt)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import docs_commands
import pytest

from learning.workshops.checking.child import child_env

REPO = Path(__file__).resolve().parents[1]
PAGE_COMMANDS = (
    "python -m learning.workshops.check strided_softmax --hint",
    "python -m learning.workshops.check strided_softmax",
    "python -m learning.workshops.benchmark --op strided_softmax --output results/local/i1.json",
)
"""The three commands the page prints, character for character."""

PAGE_SOLUTION = """
import contextlib

import torch
import triton
import triton.language as tl

from learning.workshops.contracts import matrix, warps


@triton.jit
def softmax_kernel(X, Y, SR, SC, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * SR + cols * SC, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(Y + row * N + cols, y.to(Y.dtype.element_ty), mask=mask)


def strided_softmax(x, num_warps=4):
    M, N = matrix(x)
    warps(num_warps)
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0:
        return y
    on_device = torch.cuda.device(x.device) if x.is_cuda else contextlib.nullcontext()
    with on_device:
        softmax_kernel[(M,)](
            x, y, x.stride(0), x.stride(1), N, BLOCK=triton.next_power_of_2(N),
            num_warps=num_warps,
        )
    return y
"""
"""A solution written from the page alone: its imports are the page's."""


def test_page_module_and_names_import():
    """Does `from learning.workshops.contracts import matrix, warps` work, as the page says?"""
    from learning.workshops.contracts import matrix, warps

    assert matrix.__module__ == "learning.workshops.contracts"
    assert callable(warps)


def page_command(command: str, folder: Path) -> subprocess.CompletedProcess:
    """One of the page's commands, run verbatim in `folder` with this Python as `python`."""
    argv = shlex.split(command)
    assert argv[0] == "python"
    env = child_env()
    env.pop("TRITON_INTERPRET", None)  # the commands choose their mode themselves
    return subprocess.run(
        [sys.executable, *argv[1:]], cwd=folder, env=env, capture_output=True, text=True
    )


@pytest.fixture(scope="module")
def student_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("student")
    (folder / "strided_softmax.py").write_text(PAGE_SOLUTION)
    return folder


@pytest.mark.parametrize("command", PAGE_COMMANDS[:2])
def test_page_check_commands_pass_a_page_solution(command, student_folder):
    """Do the page's two check commands, run verbatim beside strided_softmax.py, pass a
    solution written from the page?"""
    done = page_command(command, student_folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "strided_softmax" in done.stdout


def test_page_benchmark_command(student_folder):
    """Does the page's benchmark command run verbatim: on a GPU it writes the results file,
    without one it says in one line that timing needs a CUDA device (exit 2)?"""
    done = page_command(PAGE_COMMANDS[2], student_folder)
    results = student_folder / "results" / "local" / "i1.json"
    if os.environ.get("CUDA_VISIBLE_DEVICES") != "" and _cuda():
        assert done.returncode == 0, done.stderr
        assert results.is_file()
    else:
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.startswith("benchmark: ") and "CUDA device" in done.stderr
        assert "Traceback" not in done.stderr


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


# What else is public: the student guide's "What stays stable", held to the lists below.
# Changing one is a decision: the guide, this test and the code change together (the results
# file gets a new schema name).

GUIDE = docs_commands.doc("student-guide.md")
STABLE = "What stays stable"
HINTS = "The hints"
CONTRACT_NAMES = ("matrix", "warps", "select_mode", "default_device", "device_context")
JSON_KEYS = {
    "object": (
        "op",
        "impl",
        "saved",
        "device",
        "seed",
        "passed",
        "cases",
        "hints",
        "internal_errors",
    ),
    "case": ("name", "passed", "detail"),
    "hint": ("id", "message", "evidence"),
    "internal error": ("case", "detail"),
}
"""The keys `check --json` keeps, by the part of the object that has them."""
JSON_TYPES = {
    "op": str, "impl": str, "saved": str, "device": str, "seed": int, "passed": bool,
    "cases": list, "hints": list, "internal_errors": list, "name": str, "detail": str,
    "id": str, "message": str, "evidence": list, "case": str,
}  # fmt: skip
SCHEMA = "i1-benchmark/1"
RESULTS_FIELDS = (
    "op", "impl", "device", "capability", "dtype", "created", "versions", "rows", "note",
    "variant_impls",
)  # fmt: skip
ROW_FIELDS = (
    "variant", "rows", "cols", "layout", "mode", "num_warps", "median_ms", "min_ms", "max_ms",
    "samples", "gbps_logical", "gbps_traffic", "checked",
)  # fmt: skip


def stable_bullets() -> dict[str, str]:
    """The student guide's "What stays stable" bullets, by their bold label, lines joined."""
    section = GUIDE.section(STABLE).text
    bullets = re.findall(r"^- \*\*(.+?)\*\*:? (.*?)(?=^- |\Z)", section, re.M | re.S)
    return {label.strip("`"): " ".join(text.split()) for label, text in bullets}


def quoted(text: str) -> tuple[str, ...]:
    return tuple(re.findall(r"`([^`]+)`", text))


def test_the_student_guide_says_what_stays_stable():
    """Does the student guide's list name exactly the contracts' names, the check's JSON keys, and
    the results file's schema and fields this test keeps?"""
    bullets = stable_bullets()
    assert set(quoted(bullets["Names"])) >= set(CONTRACT_NAMES)
    first = bullets["check --json"].split(". ")[0]
    parts = [part.strip() for part in first.split(";")]
    documented = {re.match(r"(?:one|each) (.+?) with", p)[1]: quoted(p) for p in parts}
    assert documented == JSON_KEYS
    results = bullets["The results file"]
    head, rows = results.split("each row exactly")
    assert quoted(head) == ("benchmark --output", f'"schema": "{SCHEMA}"', *RESULTS_FIELDS)
    assert quoted(rows.split(". ")[0]) == ROW_FIELDS


def test_the_contracts_module_has_the_names_the_notebook_imports():
    """Does `learning.workshops.contracts` give every name the student guide keeps stable?"""
    from learning.workshops import contracts

    assert [n for n in CONTRACT_NAMES if not callable(getattr(contracts, n, None))] == []


BUGGY_SOLUTION = PAGE_SOLUTION.replace("cols * SC", "cols")
"""The page's solution with the column stride left out: a hint's worth of failures."""


def check_json(folder: Path, solution: str) -> tuple[int, dict]:
    (folder / "strided_softmax.py").write_text(solution)
    done = page_command("python -m learning.workshops.check strided_softmax --hint --json", folder)
    return done.returncode, json.loads(done.stdout)


def keys_and_types(part: str, found: dict) -> None:
    """Every stable key of `part` is in `found`, with its stable type."""
    missing = [key for key in JSON_KEYS[part] if key not in found]
    assert missing == [], f"{part} lost {missing}"
    for key in JSON_KEYS[part]:
        assert isinstance(found[key], JSON_TYPES[key]), (part, key, found[key])
        assert not (JSON_TYPES[key] is int and isinstance(found[key], bool)), (part, key)


@pytest.mark.parametrize("solution", ["passing", "failing"])
def test_check_json_keeps_its_keys(solution, tmp_path):
    """Does `check --json` on a solution written from the page, and on the same with its
    column stride left out (exit 1, with a hint), give every stable key with its type, hints
    whose ids are the student guide's, and a `saved` time that reads as ISO 8601?"""
    code, report = check_json(tmp_path, PAGE_SOLUTION if solution == "passing" else BUGGY_SOLUTION)
    assert code == (0 if solution == "passing" else 1), report
    keys_and_types("object", report)
    assert report["passed"] is (solution == "passing") and report["op"] == "strided_softmax"
    datetime.fromisoformat(report["saved"])
    assert report["cases"], "a check runs cases"
    for case in report["cases"]:
        keys_and_types("case", case)
    for error in report["internal_errors"]:
        keys_and_types("internal error", error)
    for hint in report["hints"]:
        keys_and_types("hint", hint)
    ids = {hint["id"] for hint in report["hints"]}
    assert (ids == set()) is (solution == "passing"), report["hints"]
    assert ids <= documented_hint_ids()


def documented_hint_ids() -> set[str]:
    """The ids of the student guide's hint table."""
    table = GUIDE.section(HINTS).text
    return set(re.findall(r"^\| `([a-z-]+)` \|", table, re.M))


def test_every_documented_hint_id_is_one_the_check_gives():
    """Is every id of the student guide's hint table still a hint id of the check (a rename breaks
    every tool and cohort chart that reads them)?"""
    from learning.workshops.checking.hints import HintId

    assert documented_hint_ids() - {h.value for h in HintId} == set()


def test_every_hint_id_the_check_gives_is_documented():
    """Does the student guide's hint table explain every hint id the check can give?"""
    from learning.workshops.checking.hints import HintId

    assert {h.value for h in HintId} - documented_hint_ids() == set()


def test_the_results_file_keeps_its_schema():
    """Are the results file's schema name and fields the stable ones, does a file that the
    benchmark writes hold exactly them, do the committed sample files still load, and is a
    file of another schema or with another row field refused, naming it?"""
    from dataclasses import fields

    from learning.workshops.measuring import results

    assert results.SCHEMA == SCHEMA
    assert tuple(f.name for f in fields(results.Results)) == (*RESULTS_FIELDS, "schema")
    assert tuple(f.name for f in fields(results.Row)) == ROW_FIELDS
    samples = [results.H200_SAMPLE, results.H200_BEYOND, results.H200_BACKWARD]
    loaded = [results.load(path) for path in samples]
    written = json.loads(json.dumps(loaded[0].to_json()))
    assert set(written) == {*RESULTS_FIELDS, "schema"}
    assert set(written["rows"][0]) == set(ROW_FIELDS)
    with pytest.raises(results.ResultsError, match="i1-benchmark/2"):
        results.from_json(dict(written, schema="i1-benchmark/2"))
    extra = dict(written, rows=[dict(written["rows"][0], p99_ms=1.0)])
    with pytest.raises(results.ResultsError, match="p99_ms"):
        results.from_json(extra)
