"""The smallest failing view: smaller than the failed public case, failing the same way, the
same for a seed, within its budget, drawn on request, and never sought for the reference."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from test_check_cli import check

from grader.zoo import BUGS, write_bug
from grader.zoo.bug import REFERENCE
from learning.workshops.check import Report, format_report, run_check
from learning.workshops.checking.cases import OPS, Case, CaseResult, Failure, Verdict
from learning.workshops.checking.hints import Hint, HintId
from learning.workshops.checking.loader import load_module
from learning.workshops.checking.shrink import (
    LAYOUT_ORDER,
    MAX_RUNS,
    MAX_SECONDS,
    shrink,
    starting_case,
)
from learning.workshops.notebook.testing import run_cases

SEED = 7
SMALLEST = {
    "ignores-column-stride": ("transpose", 2, 2),
    "pads-with-zero": ("contiguous", 1, 3),
    "adds-storage-offset": ("slice", 1, 1),
}
"""Each bug's smallest failing view: two columns two apart, three columns (not a power of
two), one element read through a storage offset."""


def fails_when(predicate, failure: Failure = Failure.VALUES):
    """A runner that fails a case with `failure` when `predicate` holds, and its batches."""
    batches: list[int] = []

    def run(cases: list[Case]) -> list[CaseResult]:
        batches.append(len(cases))
        return [
            CaseResult.of(c, Verdict(failure if predicate(c) else None, "judged")) for c in cases
        ]

    return run, batches


def failed(case: Case, failure: Failure = Failure.VALUES) -> CaseResult:
    return CaseResult.of(case, Verdict(failure, "judged"))


def test_a_failure_from_a_width_is_found_by_bisection():
    """Does a failure that starts at 129 columns shrink to exactly 129, in batches, within
    the run cap?"""
    run, batches = fails_when(lambda c: c.cols > 128)
    start = Case("transpose-wide", "transpose", 3, 1000)
    found = shrink(run, start, failed(start))
    assert (found.case.layout, found.case.rows, found.case.cols) == ("contiguous", 1, 129)
    assert found.runs == sum(batches) <= MAX_RUNS
    assert len(batches) < found.runs  # candidates go to the child in batches


def test_dtype_and_warps_go_back_to_defaults():
    """Are a half dtype and eight warps dropped when the failure does not need them?"""
    run, _ = fails_when(lambda c: c.geometry.strides[1] != 1 and c.cols > 1)
    start = Case("float16-transpose", "transpose", 7, 5, dtype="float16", num_warps=8)
    found = shrink(run, start, failed(start))
    assert (found.case.dtype, found.case.num_warps) == ("float32", 4)
    assert (found.case.layout, found.case.rows, found.case.cols) == ("transpose", 2, 2)


def test_another_failure_is_not_the_same_way():
    """Does a smaller case failing with another Failure leave the search where it was?"""
    run, _ = fails_when(lambda c: True, Failure.OUT_OF_BOUNDS)
    start = Case("transpose", "transpose", 7, 5)
    found = shrink(run, start, failed(start, Failure.VALUES))
    assert found.case == start and not found.smaller
    assert found.failure == Failure.VALUES
    assert found.stopped == "nothing smaller fails the same way"


def test_the_run_cap_ends_the_search():
    """Does the search stop at its run cap, with the best case found so far?"""
    run, batches = fails_when(lambda c: c.cols > 128)
    start = Case("transpose-wide", "transpose", 3, 1000)
    found = shrink(run, start, failed(start), max_runs=5)
    assert found.runs == sum(batches) == 5
    assert found.stopped == "run cap (5 runs)"
    assert found.failure == Failure.VALUES and found.case.cols > 128


def test_the_time_cap_ends_the_search():
    """Does the search start no batch once its seconds are spent?"""
    ticks = iter(range(0, 1000, 4))
    run, batches = fails_when(lambda c: c.cols > 128)
    start = Case("transpose-wide", "transpose", 3, 1000)
    found = shrink(run, start, failed(start), max_seconds=10, clock=lambda: next(ticks))
    assert found.stopped == "time cap"
    assert len(batches) <= 3


def test_a_crashing_candidate_ends_the_search():
    """Does a candidate that crashed the child (a restart each) stop the search there?"""

    def run(cases: list[Case]) -> list[CaseResult]:
        return [failed(c, Failure.CRASH if c.rows == 1 else Failure.VALUES) for c in cases]

    start = Case("transpose", "transpose", 7, 5)
    found = shrink(run, start, failed(start))
    assert found.stopped.startswith("a candidate ended with crash")


def test_the_start_is_the_first_view_a_hint_names():
    """Is the search started from a hint's evidence, never from a bad input, a crash or the
    stub?"""
    cases = [
        Case("reject-3-d", bad_input="3-d"),
        Case("wide", "contiguous", 2, 300),
        Case("transpose", "transpose", 7, 5),
    ]
    results = [
        failed(cases[0], Failure.NOT_RAISED),
        failed(cases[1], Failure.CRASH),
        failed(cases[2], Failure.VALUES),
    ]
    hint = Hint(HintId.COLUMN_STRIDE, "", (results[2].detail,))
    assert starting_case(cases, results, [hint]) == (cases[2], results[2])
    assert starting_case(cases, results[:2], []) is None
    stub = Hint(HintId.UNFINISHED, "", (results[2].detail,))
    assert starting_case(cases, results, [stub]) is None


@pytest.fixture(scope="module")
def bug_files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bugs")
    return {b.name: write_bug(b, folder) for b in BUGS if b.name in SMALLEST}


@pytest.fixture(scope="module")
def reports(bug_files) -> dict[str, Report]:
    """Each bug checked once, with the search, for the seed."""
    return {
        name: run_check("strided_softmax", path, seed=SEED, shrink_failures=True)
        for name, path in bug_files.items()
    }


def start_result(report: Report) -> CaseResult:
    return next(r for r in report.results if r.name == report.smallest.start.name)


@pytest.mark.parametrize("bug", list(SMALLEST))
def test_the_smallest_view_is_smaller_and_fails_the_same_way(bug, reports, bug_files):
    """Is the view found smaller than the failed public case, its own failure the same,
    also when run again alone in this process, and found within the budget?"""
    found = reports[bug].smallest
    start = found.start
    assert (found.case.layout, found.case.rows, found.case.cols) == SMALLEST[bug]
    rank = LAYOUT_ORDER.index
    assert found.case.rows * found.case.cols < start.rows * start.cols
    assert rank(found.case.layout) <= rank(start.layout)
    assert found.failure == start_result(reports[bug]).failure
    fn = getattr(load_module(bug_files[bug]), OPS["strided_softmax"].function)
    [again] = run_cases(fn, "strided_softmax", [found.case], seed=SEED)
    assert again.failure == found.failure, again.detail
    assert found.runs <= MAX_RUNS and found.seconds <= MAX_SECONDS


def test_the_same_seed_finds_the_same_view(reports, bug_files):
    """Does a second check with the same seed find the same view, verdict and run count?"""
    bug = "ignores-column-stride"
    again = run_check("strided_softmax", bug_files[bug], seed=SEED, shrink_failures=True)
    first, second = reports[bug].smallest.to_json(), again.smallest.to_json()
    first.pop("seconds"), second.pop("seconds")
    assert first == second


def test_the_report_shows_the_view_beside_the_hint(reports):
    """Does the text report give the smallest view, in words, after the hint's evidence?"""
    text = format_report(reports["ignores-column-stride"], show_hints=True)
    section = text[text.index("evidence: ") :]
    assert "Smallest failing view (from case transpose, " in section
    assert "a (2, 2) transpose of a (2, 2) tensor, strides (1, 2), offset 0, float32" in section
    assert "    values: 4 of 4 values differ" in section


def test_the_reference_gets_no_search():
    """Does a passing implementation get no smallest view, in text or JSON?"""
    report = run_check("strided_softmax", REFERENCE, seed=SEED, shrink_failures=True)
    assert report.passed and report.smallest is None
    assert "Smallest failing view" not in format_report(report, show_hints=True)
    assert report.to_json()["smallest_failing"] is None


def test_json_gives_the_view_and_draw_saves_its_picture(bug_files, tmp_path):
    """Does --json carry the smallest view and its verdict, and --draw write a PNG of it?"""
    picture = tmp_path / "smallest.png"
    impl = str(bug_files["pads-with-zero"])
    args = ("strided_softmax", "--json", "--seed", str(SEED), "--draw", str(picture))
    done = check(*args, "--impl", impl)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    smallest = report["smallest_failing"]
    assert smallest["case"]["layout"] == "contiguous"
    assert (smallest["case"]["rows"], smallest["case"]["cols"]) == (1, 3)
    assert smallest["failure"] == "sum-low" and "sums to" in smallest["text"]
    assert report["picture"] == str(picture)
    assert picture.read_bytes().startswith(b"\x89PNG")


def test_draw_needs_a_png_name(tmp_path):
    """Is a --draw name that is not a .png refused before anything runs?"""
    done = check("strided_softmax", "--draw", str(tmp_path / "v.jpg"), "--impl", str(REFERENCE))
    assert done.returncode == 2
    assert "--draw" in done.stderr and ".png" in done.stderr


def test_a_load_off_the_view_is_drawn_where_it_read(tmp_path):
    """Does the smallest view of a kernel that loads one element past each row name the
    storage index it read, and does its picture mark that index in red on the strip, past the
    storage's end where it lies there?"""
    from learning.workshops.checking.shrink import build_view, stray_index
    from learning.workshops.notebook.pictures import draw_view

    impl = tmp_path / "reads_past.py"
    load = "tl.load(X + row * SR + cols * SC, mask=mask)"
    impl.write_text(REFERENCE.read_text().replace(load, load.replace("SC,", "SC + 1,"), 1))
    report = run_check("copy_rows", impl, seed=SEED, shrink_failures=True)
    smallest = report.smallest
    assert smallest.failure == Failure.OUT_OF_BOUNDS
    assert (smallest.case.rows, smallest.case.cols) == (1, 1)
    assert stray_index(smallest) == 1  # element 0's neighbour, past a storage of one
    storage = next(
        ax
        for ax in draw_view(build_view(smallest.case, SEED), stray=1).axes
        if ax.get_label() == "storage"
    )
    assert "stray:1" in {p.get_gid() for p in storage.patches}
    assert "red = index 1, which the kernel read, past the storage's end" in storage.get_title(
        loc="left"
    )
    values = failed(Case("transpose"))
    assert stray_index(replace(smallest, result=values)) is None
