"""The class board (grader/queue/board.py): each student's best verified benchmark by GPU
model, under a chosen or an anonymous name; the instructor's view with roster names; the
static export; and /board in a real browser (Debian's chromium, skipped without it)."""

from __future__ import annotations

import json
import os
import re

import pytest
from browser_lab import CHROMIUM
from in_process import run_main
from queue_server import call, course, serving, store

from grader import seeding
from grader.gradebook import open_gradebook
from grader.queue import board, cli, receipt
from grader.queue.store import Store

ROSTER = {"alice": ("Alice", "Adams"), "bob": ("Bob", "Brown"), "carol": ("Carol", "Chen")}


def rows(direct_ms: float, torch_ms: float = 0.2, roof_ms: float = 0.05) -> dict:
    """A benchmark result of two cells, the student's kernel timed at `direct_ms` (4 warps)
    and twice as slow at 8."""
    made = []
    for layout in ("transpose", "contiguous"):
        cell = {"rows": 4096, "cols": 4096, "layout": layout, "mode": "warm", "checked": True}
        made += [
            {**cell, "variant": "direct", "num_warps": 4, "median_ms": direct_ms},
            {**cell, "variant": "direct", "num_warps": 8, "median_ms": 2 * direct_ms},
            {**cell, "variant": "torch_softmax", "num_warps": None, "median_ms": torch_ms},
            {**cell, "variant": "roof", "num_warps": None, "median_ms": roof_ms},
        ]
    return {"schema": "i1-benchmark/1", "op": "strided_softmax", "device": "GPU", "rows": made}


def timed(student_ms: float, reference_ms: float = 0.2, copy_ms: float = 0.05, **shape) -> dict:
    """The course's verified timing of a job: two shapes, the student's kernel at
    `student_ms`, `shape` (correct, reason) set on both."""
    shapes = [
        {"rows": r, "cols": c, "student_ms": student_ms, "reference_ms": reference_ms}
        | {"copy_ms": copy_ms, "ratio": student_ms / reference_ms, "correct": True, "reason": ""}
        | shape
        for r, c in ((4096, 4096), (65536, 512))
    ]
    return {"device": None, "shapes": shapes, "error": ""}


def run_benchmark(root, queue: Store, student: str, ms: float, gpu: str, **kw) -> str:
    """A benchmark job of `student` whose kernel the course timed at `ms` (its own results
    say `kw["claimed"]`, else the same), run by a stand-in worker on `gpu` and finished."""
    job = queue.submit(student, "benchmark", "strided_softmax", "s.ipynb", b"{}", {})
    assert queue.claim("stand-in").id == job.id
    result = rows(kw.get("claimed", ms))
    facts = {"job": job.id, "student": student, "kind": "benchmark", "op": job.op}
    facts |= {"gpu": {"name": gpu}, "verified": timed(ms, **kw.get("shape", {}))}
    signed = receipt.sign(root, facts, result)
    queue.finish(job.id, kw.get("shown", result), signed, kw.get("exit_status", 0))
    return job.id


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A course with a roster and a class's runs: alice twice on an H100 (her second the
    faster), bob once on an H100 and once on an H200, carol's runs unverifiable (an edited
    result, a failed run), dave's a check, not a benchmark; eve's own results claim a
    time her kernel never ran at (her code bent the clock in her process), frank's kernel
    was fast and wrong."""
    made = course(tmp_path_factory.mktemp("board") / "course", tuple(ROSTER))
    with open_gradebook(f"sqlite:///{made / 'gradebook.db'}") as gradebook:
        for student, (first, last) in ROSTER.items():
            gradebook.add_student(student, first_name=first, last_name=last)
    queue = store(made)
    run_benchmark(made, queue, "alice", 0.2, "NVIDIA H100")  # ratio 1
    run_benchmark(made, queue, "alice", 0.1, "NVIDIA H100")  # ratio 2, half the roof
    run_benchmark(made, queue, "bob", 0.4, "NVIDIA H100")  # ratio 0.5
    run_benchmark(made, queue, "bob", 0.05, "NVIDIA H200")  # ratio 4
    run_benchmark(made, queue, "carol", 0.4, "NVIDIA H100", shown=rows(0.01))
    run_benchmark(made, queue, "carol", 0.01, "NVIDIA H100", exit_status=1)
    run_benchmark(made, queue, "eve", 0.8, "NVIDIA H100", claimed=0.001)  # ratio 0.25
    wrong = {"correct": False, "reason": "its outputs differ from the reference's"}
    run_benchmark(made, queue, "frank", 0.01, "NVIDIA H100", shape=wrong)
    queue.submit("dave", "check", "strided_softmax", "s.ipynb", b"{}", {})
    queue.set_name("alice", "Kernel Queen")
    queue.close()
    return made


def test_the_board_holds_each_students_best_verified_run_by_gpu(root):
    """Does the board show each student's best run per GPU model, with its ratio to the
    reference and share of the copy roof from the course's own timing (never the student's
    results), and leave out a run whose receipt fails or whose outputs were wrong?"""
    queue = store(root)
    data = board.board(root, queue)
    queue.close()
    by_gpu = {group["gpu"]: group["entries"] for group in data["gpus"]}
    assert list(by_gpu) == ["NVIDIA H100", "NVIDIA H200"]
    h100 = by_gpu["NVIDIA H100"]
    names = ["Kernel Queen", *(board.anonymous_name(key(root), s) for s in ("bob", "eve"))]
    assert [e["name"] for e in h100] == names
    assert [e["rank"] for e in h100] == [1, 2, 3]
    assert h100[0]["ratio_to_reference"] == pytest.approx(2.0)
    assert h100[0]["share_of_copy_roof"] == pytest.approx(0.5)
    assert h100[1]["ratio_to_reference"] == pytest.approx(0.5)
    assert h100[2]["ratio_to_reference"] == pytest.approx(0.25)  # not her claimed 200
    assert by_gpu["NVIDIA H200"][0]["ratio_to_reference"] == pytest.approx(4.0)
    assert "carol" not in json.dumps(data)  # her edited and her failed run count for nothing
    assert "frank" not in json.dumps(data) and len(h100) == 3  # wrong outputs: no place


def key(root) -> bytes:
    return receipt.course_key(root, board.NAME_KEY)


def test_an_anonymous_name_is_stable_and_needs_the_course_secret(root, monkeypatch):
    """Is a student's anonymous name the same each time, unlike another student's, and
    another under another course's secret (so nobody can work it out from the id)?"""
    bob = board.anonymous_name(key(root), "bob")
    assert re.fullmatch(r"student-[0-9a-f]{6}", bob)
    assert bob == board.anonymous_name(key(root), "bob") != board.anonymous_name(key(root), "ann")
    monkeypatch.setenv(seeding.ENV, "ab" * 32)
    assert board.anonymous_name(key(root), "bob") != bob


def test_the_api_board_shows_names_and_the_instructor_view_needs_its_token(root):
    """Does /api/board give a student the class view (names, no ids), refuse the
    instructor's view without the instructor's token, and give it roster names with it?"""
    with serving(root) as url:
        status, data, _ = call(url, "GET", "/api/board", "tok-bob")
        assert status == 200
        assert data["view"] == "class"
        assert "bob" not in json.dumps(data) and "Brown" not in json.dumps(data)
        assert call(url, "GET", "/api/board")[0] == 401
        for token in ("tok-bob", None):
            status, answer, _ = call(url, "GET", "/api/board?view=instructor", token)
            assert (status, answer["bound"]) == (401, "token")
        assert call(url, "GET", "/board?view=instructor", "tok-bob")[0] == 401
        status, data, _ = call(url, "GET", "/api/board?view=instructor", "tok-instructor")
    assert status == 200
    entries = {e["student"]: e for g in data["gpus"] for e in g["entries"]}
    assert entries["alice"]["roster_name"] == "Alice Adams"
    assert entries["alice"]["name"] == "Kernel Queen"
    assert entries["bob"]["roster_name"] == "Bob Brown"


def test_a_student_chooses_a_board_name_within_the_rules(root):
    """Can a student choose a name, and go back to anonymous, but not take markup, another
    student's name, or one that poses as an anonymous name?"""
    with serving(root) as url:
        for bad in ("<script>x</script>", "kernel queen", "student-abc123", "x", 7):
            status, answer, _ = call(url, "PUT", "/api/name", "tok-bob", {"name": bad})
            assert status == 422, bad
            assert answer["bound"] in ("name", "request")
        chosen = call(url, "PUT", "/api/name", "tok-bob", {"name": "  Warp Nine "})
        assert chosen[:2] == (200, {"name": "Warp Nine"})
        assert "Warp Nine" in names_shown(url)
        assert call(url, "PUT", "/api/name", "tok-bob", {"name": None})[1] == {"name": None}
        page = call(url, "GET", "/board")[1]
    assert "Warp Nine" not in page
    assert board.anonymous_name(key(root), "bob") in page


def names_shown(url: str) -> list[str]:
    data = call(url, "GET", "/api/board", "tok-carol")[1]
    return [entry["name"] for group in data["gpus"] for entry in group["entries"]]


def test_the_static_board_for_the_lms(root, tmp_path):
    """Does `board --out` write a page with the class's names and no ids, and with
    --instructor the roster's names?"""
    out = tmp_path / "board.html"
    done = run_main(cli.main, ("board", "--out", str(out)), cwd=root)
    assert done.returncode == 0, done.stderr
    assert "4 student result(s) on 2 GPU model(s)" in done.stdout
    page = out.read_text()
    assert "Kernel Queen" in page
    assert "<script" not in page
    assert "Adams" not in page and ">alice<" not in page
    done = run_main(cli.main, ("board", "--out", str(out), "--instructor", "--course", str(root)))
    assert done.returncode == 0, done.stderr
    assert "Alice Adams" in out.read_text()


try:
    from playwright.sync_api import sync_playwright
except ImportError:
    sync_playwright = None


@pytest.mark.browser
@pytest.mark.skipif(sync_playwright is None, reason="Playwright's Python driver is missing")
@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"no chromium at {CHROMIUM}")
def test_the_board_in_a_browser(root):
    """Does chromium show the served board: a table per GPU model, the best first, under
    the chosen and the anonymous names?"""
    with serving(root) as url, sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = chromium.new_page()
            page.goto(f"{url}/board")
            captions = page.locator("caption").all_inner_texts()
            h100 = page.locator('table[data-gpu="NVIDIA H100"] tr').all_inner_texts()
        finally:
            chromium.close()
    assert captions == ["NVIDIA H100", "NVIDIA H200"]
    assert h100[1].split("\t")[:3] == ["1", "Kernel Queen", "2.00"]
    assert h100[2].split("\t")[1] == board.anonymous_name(key(root), "bob")
