"""Tests that need a CUDA device: real kernels, real timing. Skipped without one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from grader.edits import Edit

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def test_reference_on_cuda_views():
    """Does the reference compute every public view right on a real GPU, in place and
    backward too, and pass the gradient checks there?"""
    import grader.reference as reference
    from learning.workshops.notebook.gradients import (
        TOLERANCES,
        compare_with_torch,
        gradcheck_views,
    )
    from learning.workshops.notebook.testing import expect_cases

    expect_cases(reference.strided_softmax, "strided_softmax")
    expect_cases(reference.strided_softmax_, "strided_softmax_")
    expect_cases(reference.strided_softmax_backward, "strided_softmax_backward")
    assert all(gradcheck_views(reference.strided_softmax_backward, "cuda").values())
    differences = compare_with_torch(reference.StridedSoftmax.apply, "cuda")
    assert all(d <= t for d, t in zip(differences.values(), TOLERANCES.values(), strict=True))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_input_on_non_current_device():
    """With two GPUs, is an input on the non-current one computed right, on its device?"""
    import grader.reference as reference

    torch.cuda.set_device(0)
    x = torch.randn(300, 700, device="cuda:1").t()
    y = reference.strided_softmax(x)
    assert y.device == x.device
    torch.testing.assert_close(y.double(), torch.softmax(x.double(), dim=1), rtol=1e-5, atol=1e-6)


def test_every_decomposition_computes_every_timing_shape():
    """Does each correct decomposition compute each shape the timing cell may draw, as a
    transposed fp32 view (65536 rows included: over CUDA's 65535 programs on grid axis 1)?"""
    from grader.grading.gpu_timing import SHAPES
    from grader.zoo.bug import DECOMPOSITIONS, base_path
    from learning.workshops.checking.loader import load_function

    for shape in DECOMPOSITIONS:
        softmax = load_function(base_path(shape), "strided_softmax")
        for rows, cols in SHAPES:
            x = torch.randn(cols, rows, device="cuda").t()
            got = softmax(x)
            torch.testing.assert_close(got, torch.softmax(x, dim=1), msg=f"{shape} {rows}x{cols}")


def _timed(tmp_path, edits=(), name="reference", sandbox=None) -> tuple[float, dict]:
    """timing_points of the reference with `edits`, unsandboxed unless `sandbox`; the record."""
    from grader.edits import apply
    from grader.grading.gpu_timing import timing_points
    from grader.zoo.bug import REFERENCE

    impl = tmp_path / f"{name.replace('-', '_')}.py"
    impl.write_text(apply(REFERENCE.read_text(), edits))
    sidecar = tmp_path / f"{name}.json"
    points = timing_points(2, impl=impl, sidecar=sidecar, sandbox=sandbox)
    record = json.loads(sidecar.read_text())
    print(name, points, [(s["ratio"], s["reason"]) for s in record["shapes"]], record.get("error"))
    return points, record


def test_timing_points_for_the_reference(tmp_path):
    """Does the reference, timed against itself from outside both processes, earn full points,
    its harness's cost and the copy's roof recorded beside it?"""
    points, record = _timed(tmp_path)
    assert points == 2
    assert all(s["correct"] and 0.95 < s["ratio"] < 1.05 for s in record["shapes"]), record
    assert all(0 < s["copy_ms"] < s["reference_ms"] for s in record["shapes"]), record


def test_timing_catches_a_copy_first_kernel(tmp_path):
    """Does a kernel that copies its input first score 1.5 (the 3/4 band) on transposes?"""
    from grader.zoo.bug import COPY_FIRST

    assert _timed(tmp_path, COPY_FIRST, "copy-first")[0] == 1.5


WILD_STORE = Edit(
    "softmax_kernel",
    "tl.store(Y + row * N + cols, y",
    "tl.store(Y + row * N + cols + ((cols * 0 + N) // 201).to(tl.int64) * (1 << 40), y",
)
"""A store a terabyte past the output for rows wider than 200: an illegal address."""


def wide_public_cases() -> list[str]:
    """The public strided_softmax cases wider than 200 columns, where the wild store and the
    runaway allocation start (transpose-wide and neg-inf-head-wide, both 1000 wide)."""
    from learning.workshops.checking.cases import suite

    return [c.name for c in suite("strided_softmax", None, "cuda") if c.cols > 200]


def test_an_illegal_address_costs_only_its_case(tmp_path):
    """Does a kernel that stores to a wild address (only on the wide public cases) fail those
    cases as crashes naming the CUDA error, while every other case still passes in a fresh
    child?"""
    from grader.edits import apply
    from grader.zoo.bug import REFERENCE
    from learning.workshops.check import run_check

    impl = tmp_path / "wild_store.py"
    impl.write_text(apply(REFERENCE.read_text(), (WILD_STORE,)))
    report = run_check("strided_softmax", impl)
    failed = [r for r in report.results if not r.passed]
    assert [r.name for r in failed] == wide_public_cases(), failed
    assert all(r.failure == "crash" and "illegal memory access" in r.detail for r in failed)
    assert [h.id for h in report.hints] == ["crash"]


def test_a_runaway_allocation_fails_its_case_with_the_memory_hint(tmp_path):
    """On a GPU, does allocating without end fail only the wide cases, as out of memory?"""
    from grader.zoo import BUGS, write_bug
    from learning.workshops.check import run_check

    impl = write_bug(next(b for b in BUGS if b.name == "hoards-memory-on-wide-rows"), tmp_path)
    report = run_check("strided_softmax", impl)
    assert [r.name for r in report.results if not r.passed] == wide_public_cases()
    assert [h.id for h in report.hints] == ["memory"]


def test_timing_gives_zero_for_a_stale_kernel(tmp_path):
    """Does a kernel that replays its first result for each shape get no timing points?"""
    from grader.grading.gpu_timing import timing_points
    from grader.zoo import BUGS, write_bug

    impl = write_bug(next(b for b in BUGS if b.hint == "stale-output"), tmp_path)
    sidecar = tmp_path / "t.json"
    assert timing_points(2, impl=impl, sidecar=sidecar) == 0
    assert "wrong output" in json.loads(sidecar.read_text())["shapes"][0]["reason"]


def test_timing_gives_zero_for_a_crash(tmp_path):
    """Does a kernel that segfaults score 0 with its cause, leaving this process alive?"""
    from grader.grading.gpu_timing import timing_points
    from grader.zoo import BUGS, write_bug

    impl = write_bug(next(b for b in BUGS if b.hint == "crash"), tmp_path)
    sidecar = tmp_path / "t.json"
    assert timing_points(2, impl=impl, sidecar=sidecar) == 0
    assert json.loads(sidecar.read_text())["error"]


def _verdicts(tmp_path, name: str, **env: str) -> dict:
    """`python tests/agreement.py` in a fresh process, with `env` on top of this one's."""
    import subprocess
    import sys

    from learning.workshops.checking.child import child_env

    out = tmp_path / f"{name}.json"
    command = [sys.executable, str(Path(__file__).with_name("agreement.py")), "--out", str(out)]
    subprocess.run(command, env=child_env(**env), check=True, timeout=500)
    return json.loads(out.read_text())


def _agreement_table(gpu: dict, cpu: dict) -> tuple[list[str], list[str]]:
    """One line per member (passed cases and hints on each device), and the disagreements."""
    lines, disagree = [], []
    on_cpu = {m["name"]: m for m in cpu["members"]}
    for g in gpu["members"]:
        c = on_cpu[g["name"]]
        common = sorted(set(g["cases"]) & set(c["cases"]))
        cases = [n for n in common if g["cases"][n]["passed"] != c["cases"][n]["passed"]]
        passed = [sum(m["cases"][n]["passed"] for n in common) for m in (c, g)]
        lines.append(
            f"{g['name']:38} cpu {passed[0]:2}/{len(common)} {','.join(c['hints']) or '-':14} "
            f"gpu {passed[1]:2}/{len(common)} {','.join(g['hints']) or '-'}"
        )
        if cases or g["hints"] != c["hints"]:
            disagree.append(f"{g['name']}: cases {cases}, hints {c['hints']} vs {g['hints']}")
    return lines, disagree


def test_cpu_and_gpu_reach_the_same_verdicts(tmp_path):
    """Do the family of correct decompositions and the zoo's bugs get the same pass/fail per
    case and the same hints compiled on the GPU as in the interpreter on the CPU?"""
    gpu = _verdicts(tmp_path, "gpu")
    cpu = _verdicts(tmp_path, "cpu", TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
    assert (gpu["mode"], cpu["mode"]) == ("gpu", "interpreter")
    lines, disagree = _agreement_table(gpu, cpu)
    print("\n".join(["member  cpu passed, hints  gpu passed, hints", *lines]))
    assert disagree == []
    for member in gpu["members"]:
        if member["hint"] is None:
            assert all(c["passed"] for c in member["cases"].values()), member["name"]
        else:
            assert member["hint"] in member["hints"], member["name"]


def test_every_decomposition_is_graded_by_its_speed(tmp_path):
    """Is each correct decomposition timed against the reference and given the points of its
    ratio, full points when it is at least as fast?"""
    from grader.grading.gpu_timing import band, timing_points
    from grader.zoo.bug import DECOMPOSITIONS, base_path

    rows = []
    for shape in DECOMPOSITIONS:
        sidecar = tmp_path / f"{shape}.json"
        points = timing_points(2, impl=base_path(shape), sidecar=sidecar)
        record = json.loads(sidecar.read_text())
        ratios = [s["ratio"] for s in record["shapes"]]
        rows.append(f"{shape:16} points {points:4} ratios {', '.join(f'{r:.3f}' for r in ratios)}")
        assert all(s["correct"] for s in record["shapes"]), shape
        assert points == round(2 * sum(band(r) for r in ratios) / len(ratios), 3), shape
        if max(ratios) <= 1.0:
            assert points == 2, shape
    print("\n".join(rows))


def test_timing_started_ahead_scores_as_one_started_late(tmp_path):
    """Started ahead (loaded and compiled on the shapes, then stopped), and only then told to
    measure, does the reference still earn full points?"""
    from grader.grading.gpu_timing import Sandbox, start_ahead, timing_points
    from grader.zoo.bug import REFERENCE

    sandbox = Sandbox(list, str(REFERENCE), "ahead/reference")
    sandbox.started = start_ahead(sandbox)
    assert sandbox.started.ready.wait(120) and not sandbox.started.failure
    assert sandbox.started.student.stopped, "the student's server waits, stopped"
    assert timing_points(2, sidecar=tmp_path / "t.json", sandbox=sandbox) == 2


def test_timing_ratios_agree_run_to_run(tmp_path):
    """Do three timings of the copy-first kernel give ratios within 3% of each other?"""
    from grader.zoo.bug import COPY_FIRST

    runs = [_timed(tmp_path, COPY_FIRST, f"copy-first-{i}")[1]["shapes"] for i in range(3)]
    for shape in zip(*runs, strict=True):
        ratios = [s["ratio"] for s in shape]
        assert max(ratios) / min(ratios) < 1.03, ratios


HOG = """\
_hog = torch.empty(int(torch.cuda.mem_get_info()[0] * 0.3), dtype=torch.uint8, device="cuda")
_hog_a = torch.ones(4096, 4096, device="cuda")
with torch.cuda.stream(torch.cuda.Stream()):
    for _ in range(6000):  # about 18 s of the GPU, queued as each process loads this cell
        torch.mm(_hog_a, _hog_a)


"""


def test_a_neighbour_on_the_gpu_costs_no_timing_points(tmp_path):
    """Graded by grader.parallel beside a submission that holds GPU memory and keeps the SMs
    busy in every process that loads it, does an honest solution keep its 2/2 timing?"""
    import subprocess
    import sys

    from grader import course
    from learning.workshops.checking.child import child_env

    root = course.new_course(tmp_path / "course")
    course.submit(root, "honest", course.solved_notebook(root))
    hog = Edit(
        "strided_softmax",
        "def strided_softmax(x, num_warps=4):",
        HOG + "def strided_softmax(x, num_warps=4):",
    )
    course.submit(root, "hog", course.solved_notebook(root, (hog,)))
    command = [sys.executable, "-m", "grader.parallel", course.ASSIGNMENT]
    command += ["--course", str(root), "--workers", "2"]
    subprocess.run(command, env=child_env(), check=True, timeout=400)
    scores = {(c.student, c.cell): c.score for c in course.cell_scores(root)}
    sidecar = root / "autograded" / "honest" / course.ASSIGNMENT / "i1_timing.json"
    print(json.loads(sidecar.read_text()))
    assert scores[("honest", "hidden_timing")] == 2


def test_a_check_compiles_a_kernel_once_whatever_its_strides(monkeypatch):
    """In a check's process (`one_compile_per_shape`), do a stride of 1, of 16 and of 17 and a
    pointer one element in share one compile, with the right values from each?"""
    import triton
    import triton.language as tl
    from triton.runtime import jit

    from learning.workshops.notebook.interpreter import one_compile_per_shape

    monkeypatch.setattr(jit.JITFunction, "create_binder", jit.JITFunction.create_binder)
    one_compile_per_shape()

    @triton.jit
    def every_nth(X, Y, step, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.store(Y + i, tl.load(X + i * step))

    storage = torch.arange(4096.0, device="cuda")
    for step, shift in ((1, 0), (16, 0), (17, 0), (17, 1)):
        x = storage[shift:]
        y = torch.empty(64, device="cuda")
        every_nth[(1,)](x, y, step, BLOCK=64)
        assert torch.equal(y, x[: 64 * step : step])
    compiled = every_nth.device_caches[torch.cuda.current_device()][0]
    assert len(compiled) == 1, list(compiled)
