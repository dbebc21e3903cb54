"""Tests that need a CUDA device: real kernels, real timing. Skipped without one."""

from __future__ import annotations

import json

import pytest
import torch

from grader.zoo import Edit

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
    from grader.zoo import DECOMPOSITIONS, base_path
    from learning.workshops.checking.loader import load_function

    for shape in DECOMPOSITIONS:
        softmax = load_function(base_path(shape), "strided_softmax")
        for rows, cols in SHAPES:
            x = torch.randn(cols, rows, device="cuda").t()
            got = softmax(x)
            torch.testing.assert_close(got, torch.softmax(x, dim=1), msg=f"{shape} {rows}x{cols}")


def test_timing_points_for_the_reference(tmp_path):
    """Does the reference, timed against itself, earn full points and write a sidecar?"""
    from grader.grading.gpu_timing import timing_points
    from grader.zoo import REFERENCE

    sidecar = tmp_path / "i1_timing.json"
    points = timing_points(2, impl=REFERENCE, sidecar=sidecar)
    record = json.loads(sidecar.read_text())
    assert points == 2
    assert record["points"] == 2
    assert all(s["correct"] and 0.9 < s["ratio"] < 1.1 for s in record["shapes"])


def test_timing_catches_a_copy_first_kernel(tmp_path):
    """Does a kernel that copies its input first score below full points on transposes?"""
    from grader.grading.gpu_timing import timing_points
    from grader.zoo import COPY_FIRST, REFERENCE, apply

    impl = tmp_path / "copy_first.py"
    impl.write_text(apply(REFERENCE.read_text(), COPY_FIRST))
    assert timing_points(2, impl=impl, sidecar=tmp_path / "t.json") < 2


_LAUNCH = (
    "softmax_kernel[(M,)](x, y, x.stride(0), x.stride(1), N, BLOCK=block, num_warps=num_warps)"
)
_TWICE = """\
    import grader.reference as ref

    if not hasattr(ref, "original"):
        ref.original = ref.softmax_kernel

        class Twice:  # the reference's kernel, launched twice per call
            def __getitem__(self, grid):
                def launch(*args, **kwargs):
                    ref.original[grid](*args, **kwargs)
                    ref.original[grid](*args, **kwargs)

                return launch

        ref.softmax_kernel = Twice()
"""
TIMING_CHEATS = {
    "hides-work-on-a-side-stream": (
        "work ran outside the timed events",
        (
            Edit(
                "strided_softmax",
                f"        {_LAUNCH}\n",
                "        side = torch.cuda.Stream()\n"
                "        with torch.cuda.stream(side):\n"
                f"            {_LAUNCH}\n"
                "        side.synchronize()\n",
            ),
        ),
    ),
    "slows-the-reference": (
        "replaced grader.reference.softmax_kernel",
        (Edit("strided_softmax", "    M, N = matrix(x)\n", _TWICE + "    M, N = matrix(x)\n"),),
    ),
}
"""Timings faked from inside the submission: what the timing must say, and the edits."""


@pytest.mark.parametrize("cheat", TIMING_CHEATS)
def test_timing_catches_faked_timings(cheat, tmp_path):
    """Does a submission that fakes its timing from inside the timing process score 0, with
    the way it cheated named, though its events beat the reference's?"""
    from grader.grading.gpu_timing import timing_points
    from grader.zoo import REFERENCE, apply

    expected, edits = TIMING_CHEATS[cheat]
    impl = tmp_path / f"{cheat.replace('-', '_')}.py"
    impl.write_text(apply(REFERENCE.read_text(), edits))
    sidecar = tmp_path / "t.json"
    assert timing_points(2, impl=impl, sidecar=sidecar) == 0
    shapes = json.loads(sidecar.read_text())["shapes"]
    assert shapes and all(expected in s["reason"] for s in shapes), shapes
    assert all(s["ratio"] < 0.8 for s in shapes), "the cheat did not even move the events"


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
    from grader.zoo import REFERENCE, apply
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
    """Does a kernel that replays its first result get no timing points?"""
    from grader.grading.gpu_timing import timing_points
    from grader.zoo import BUGS, write_bug

    impl = write_bug(next(b for b in BUGS if b.hint == "stale-output"), tmp_path)
    assert timing_points(2, impl=impl, sidecar=tmp_path / "t.json") == 0


def test_timing_gives_zero_for_a_crash(tmp_path):
    """Does a kernel that segfaults score 0 with its cause, leaving this process alive?"""
    from grader.grading.gpu_timing import timing_points
    from grader.zoo import BUGS, write_bug

    impl = write_bug(next(b for b in BUGS if b.hint == "crash"), tmp_path)
    sidecar = tmp_path / "t.json"
    assert timing_points(2, impl=impl, sidecar=sidecar) == 0
    assert json.loads(sidecar.read_text())["error"]


def _verdicts(tmp_path, name: str, **env: str) -> dict:
    """`python -m grader.agreement` in a fresh process, with `env` on top of this one's."""
    import subprocess
    import sys

    from learning.workshops.checking.child import child_env

    out = tmp_path / f"{name}.json"
    command = [sys.executable, "-m", "grader.agreement", "--out", str(out)]
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
    from grader.zoo import DECOMPOSITIONS, base_path

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


@pytest.mark.parametrize(
    ("name", "points"), [("reference", 2), ("slows-the-reference", 0)], ids=["honest", "cheat"]
)
def test_timing_started_ahead_scores_as_one_started_late(name, points, tmp_path):
    """Started ahead (loaded and compiled on the shapes, then waiting), and only then told to
    measure, does the reference still earn full points and a cheat still score 0?"""
    from dataclasses import replace

    from grader.grading.gpu_timing import Sandbox, start_ahead, timing_points
    from grader.zoo import REFERENCE, apply

    impl = REFERENCE
    if name in TIMING_CHEATS:
        impl = tmp_path / f"{name.replace('-', '_')}.py"
        impl.write_text(apply(REFERENCE.read_text(), TIMING_CHEATS[name][1]))
    record = tmp_path / "child.json"
    sandbox = Sandbox(list, str(impl), str(record), record, f"ahead/{name}")
    sandbox = replace(sandbox, started=start_ahead(sandbox))
    assert sandbox.started.poll() is None, "the child waits to be told to measure"
    assert timing_points(2, sidecar=tmp_path / "t.json", sandbox=sandbox) == points
    assert sandbox.started.returncode == 0
