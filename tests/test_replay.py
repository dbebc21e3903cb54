"""The clean room decides "the kernel computed it": launches replayed on values the child never
saw (learning.workshops.checking.replay, launch_record, kernel_source, clean_room).

Most tests run the child's side and the room's side in this process (the room's functions
are plain functions); one runs both as the processes a grading starts."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from grader.shapes import __file__ as SHAPES_INIT
from learning.workshops.checking import cases, clean_room
from learning.workshops.checking.cases import OPS, Case, Failure
from learning.workshops.checking.exchange import Observation, build_inputs
from learning.workshops.checking.isolation import Session
from learning.workshops.checking.kernel_source import KernelSource, kernel_source
from learning.workshops.checking.loader import load_module
from learning.workshops.checking.replay import confirm

ROOT = Path(__file__).resolve().parents[1]
SHAPES = sorted(p for p in Path(SHAPES_INIT).parent.glob("*.py") if p.name != "__init__.py")
VIEWS = (
    Case("transpose", "transpose", 7, 5),
    Case("slice", "slice", 6, 9, dtype="float16"),
    Case("row-broadcast", "row-broadcast", 4, 33),
    Case("wide", "transpose", 3, 300, fill="neg-inf"),
)
SOFTMAX = OPS["strided_softmax"]
HEADER = """
import torch
import triton
import triton.language as tl

from learning.workshops.contracts import device_context, matrix, warps
"""
WRAPPER = """
def strided_softmax(x, num_warps=4):
    M, N = matrix(x)
    warps(num_warps)
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0:
        return y
    with device_context(x):
        {launch}
    return y
"""
KERNEL = """
@triton.jit
def softmax_kernel(X, Y, SR, SC, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * SR + cols * SC, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    tl.store(Y + row * N + cols, (numerator / tl.sum(numerator, axis=0)).to(Y.dtype.element_ty),
             mask=mask)
"""
LAUNCH = "softmax_kernel[(M,)](x, y, *x.stride(), N, BLOCK=triton.next_power_of_2(N))"


class LocalRoom:
    """The clean room's own functions, run in this process."""

    def __init__(self, source: KernelSource) -> None:
        self.kernels = source
        spec = {"source": source.text, "filename": "<kernels>", "kernels": source.kernels}
        self.loaded = clean_room.load(spec)

    def replay(self, plans: list[dict]) -> list[dict | str]:
        left = []

        def emit(event: str, **fields) -> None:
            left.append(fields["call"] if event == "replayed" else f"a launch raised {fields}")

        for plan in plans:
            clean_room.replay_call(self.loaded, plan, "cpu", emit)
        return left


def replayed(path: Path, case: Case, op=SOFTMAX):
    """(the in-process verdict on `case`, the replay's verdict), for the submission at `path`."""
    fn = getattr(load_module(path), op.function)
    seen = Observation()
    result = cases.run_case(fn, op.name, case, "cpu", 11, build_inputs(op.kind, case, 11), seen)
    return result, confirm(op, case, seen.to_wire(), LocalRoom(kernel_source(path)))


def submission(tmp_path: Path, body: str, launch: str = LAUNCH, kernel: str = KERNEL) -> Path:
    path = tmp_path / "strided_softmax.py"
    text = HEADER + textwrap.dedent(body) + kernel + WRAPPER.format(launch=launch)
    path.write_text(text)
    return path


@pytest.mark.parametrize("path", SHAPES, ids=lambda p: p.stem)
def test_every_correct_decomposition_replays(path):
    """Does each correct decomposition (other grids, persistent loops, tiles, compiled
    handles, autotune, heuristics) replay to right values on every kind of view?"""
    for case in VIEWS:
        result, verdict = replayed(path, case)
        assert result.passed, result.detail
        assert verdict is None, f"{case.name}: {verdict}"


def test_the_optional_ops_replay():
    """Do the in-place and backward references replay, the in-place one over its own view?"""
    reference = ROOT / "grader" / "reference.py"
    for op, case in (
        ("strided_softmax_", Case("slice", "slice", 6, 9)),
        ("strided_softmax_backward", Case("t", "transpose", 5, 7, grad_layout="slice")),
    ):
        result, verdict = replayed(reference, case, OPS[op])
        assert result.passed and verdict is None, (op, result.detail, verdict)


TORCH_IN_A_HEURISTIC = """
def _block(args):
    args["Y"].copy_(torch.softmax(args["X"].float(), dim=1).to(args["Y"].dtype))
    return triton.next_power_of_2(args["N"])
"""
NOTHING = """
@triton.heuristics({"BLOCK": _block})
@triton.jit
def hollow_kernel(X, Y, SR, SC, N, BLOCK: tl.constexpr):
    pass
"""
SCALARS = """
@triton.jit
def write_values(Y, V0, V1, V2, V3, V4, N):
    tl.store(Y + 0, V0)
    tl.store(Y + 1, V1)
    tl.store(Y + 2, V2)
    tl.store(Y + 3, V3)
    tl.store(Y + 4, V4)
"""


def test_torch_in_a_heuristic_is_not_the_kernel(tmp_path):
    """Is a softmax computed by torch in a triton.heuristics function, around a kernel that
    does nothing, failed as not the kernel's, though its values are right?"""
    launch = "hollow_kernel[(M,)](x, y, *x.stride(), N)"
    path = submission(tmp_path, TORCH_IN_A_HEURISTIC + NOTHING, launch)
    _, verdict = replayed(path, VIEWS[0])
    assert verdict.failure is Failure.NOT_FROM_KERNEL, verdict


def test_answers_passed_as_arguments_fail_on_new_values(tmp_path):
    """Does a kernel that stores values its wrapper computed and passed as scalars (the
    child's answer smuggled through the launch) fail the replay on values it never saw?"""
    launch = (
        "want = torch.softmax(x.double(), 1).to(x.dtype).flatten()\n        "
        "write_values[(1,)](y, *[float(v) for v in want[:5]], N)\n        "
        "y.view(-1)[5:] = want[5:]"
    )
    path = submission(tmp_path, SCALARS, launch)
    _, verdict = replayed(path, Case("tiny", "contiguous", 1, 5))
    assert verdict.failure is Failure.NOT_FROM_KERNEL, verdict


def test_a_call_with_no_launch_is_no_kernel(tmp_path):
    """Is a call that launches nothing failed as no-kernel, whatever its values?"""
    launch = "y.copy_(torch.softmax(x.float(), 1))"
    _, verdict = replayed(submission(tmp_path, "", launch), VIEWS[0])
    assert verdict.failure is Failure.NO_KERNEL, verdict


def test_an_output_no_launch_wrote_is_no_kernel(tmp_path):
    """Is a returned tensor that was never passed to any launch failed as no-kernel?"""
    launch = LAUNCH + "\n        y = torch.softmax(x.float(), 1).to(x.dtype)"
    _, verdict = replayed(submission(tmp_path, "", launch), VIEWS[0])
    assert verdict.failure is Failure.NO_KERNEL and "never passed" in verdict.text, verdict


def test_a_copy_made_in_python_is_held(tmp_path):
    """Is a kernel that reads a copy its wrapper made (x.contiguous()) held for review, not
    passed: the clean room cannot know what that buffer should hold?"""
    launch = "c = x.contiguous()\n        " + LAUNCH.replace(
        "(x, y, *x.stride()", "(c, y, *c.stride()"
    )
    _, verdict = replayed(submission(tmp_path, "", launch), VIEWS[0])
    assert verdict.failure is Failure.HELD and "filled before the first launch" in verdict.text


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("    import ctypes", "uses an import"),
        ("    z = X.handle", "uses .handle"),
        ("    z = tl.core.builtins", "core.builtins"),
        ("    z = triton.knobs", "not part of triton.language"),
        ("    z = helper(N)", "reads helper"),
        ("    z = [i for i in range(3)]", "uses a comprehension"),
        ("    z = X.__class__", "uses .__class__"),
    ],
)
def test_a_kernel_outside_what_triton_compiles_is_held(tmp_path, line, words):
    """Is a kernel body that reaches Python outside Triton's language (which only the
    interpreter would run) not replayed, and held with the line's reason?"""
    kernel = KERNEL.replace("    row = tl", f"{line}\n    row = tl", 1)
    path = submission(tmp_path, "def helper(n):\n    return n\n", kernel=kernel)
    source = kernel_source(path)
    assert "softmax_kernel" not in source.kernels
    assert words in source.why_not("softmax_kernel")


def test_what_students_write_in_kernels_is_replayed(tmp_path):
    """Are the things honest kernels use kept: aliases of tl functions, constexpr constants,
    libdevice, math constants, tl.static_range, jit options and helper kernels?"""
    body = """
    import math
    from triton.language.extra import libdevice

    LOG2E: tl.constexpr = 1.4426950408889634
    exp = tl.exp

    @triton.jit
    def _shift(x):
        return x - tl.max(x, axis=0)
    """
    kernel = KERNEL.replace(
        "    x = x - tl.max(x, axis=0)",
        "    x = _shift(x) * LOG2E / LOG2E + 0 * math.pi\n"
        "    for _ in tl.static_range(1):\n"
        "        x = tl.where(mask, x + 0.0 * libdevice.abs(x), x)",
    ).replace("@triton.jit", "@triton.jit(do_not_specialize=['N'])")
    path = submission(tmp_path, body, kernel=kernel)
    source = kernel_source(path)
    assert set(source.kernels) == {"_shift", "softmax_kernel"}, source.refused
    _, verdict = replayed(path, VIEWS[1])
    assert verdict is None, verdict


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("BLOCK = compute()", "reads BLOCK, which the clean room cannot rebuild"),
        ("BLOCK = open('x').read()", "reads BLOCK, which the clean room cannot rebuild"),
    ],
)
def test_a_constant_the_room_cannot_rebuild_is_named(tmp_path, text, why):
    """Does a kernel that reads a module-level value computed by code say which value?"""
    kernel = KERNEL.replace("tl.arange(0, BLOCK)", "tl.arange(0, BLOCK2)").replace(
        "BLOCK: tl.constexpr", "BLOCK2: tl.constexpr, B=BLOCK"
    )
    path = submission(tmp_path, "def compute():\n    return 64\n" + text + "\n", kernel=kernel)
    assert why in kernel_source(path).why_not("softmax_kernel")


def test_a_session_replays_in_a_process_of_its_own(tmp_path):
    """Through the processes a grading starts: does the reference pass, and does a softmax
    computed in a heuristic behind checks the child switched off fail as not the kernel's?"""
    forged = "class _Quiet:\n    cases = __import__('learning.workshops.checking.cases').workshops"
    forged += ".checking.cases\n    cases.CHECKS = ()\n"
    launch = "hollow_kernel[(M,)](x, y, *x.stride(), N)"
    cheat = submission(tmp_path, forged + TORCH_IN_A_HEURISTIC + NOTHING, launch)
    for path, failure in ((ROOT / "grader" / "reference.py", None), (cheat, "not-from-kernel")):
        with Session(path) as session:
            run = session.run_cases("strided_softmax", "strided_softmax", VIEWS[:2], 5, 120)
        assert [r.failure for r in run.results] == [failure] * 2, [r.detail for r in run.results]


def test_timing_is_refused_when_the_kernels_did_not_do_the_work(monkeypatch, tmp_path):
    """Does the timing cell give no points, saying why, where the timed function's hidden
    cases were not its kernels' work, and time as before where they were?"""
    import json

    import torch

    from grader.grading import gpu_timing
    from grader.grading.runner import Runner
    from learning.workshops.checking.cases import CaseResult, Verdict
    from learning.workshops.checking.isolation import IsolatedRun

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(gpu_timing, "require_cuda", lambda: None)
    runner = Runner.__new__(Runner)
    made_elsewhere = CaseResult.of(VIEWS[0], Verdict(Failure.NOT_FROM_KERNEL, "torch did it"))
    runner.done = {"strided_softmax": IsolatedRun(results=[made_elsewhere])}
    why = runner.not_kernel_work()
    assert "not-from-kernel" in why
    sidecar = tmp_path / "timing.json"
    points = gpu_timing.timing_points(2, sidecar=sidecar, sandbox=object(), refused=why)
    record = json.loads(sidecar.read_text())
    assert points == 0.0 and record["points"] == 0.0 and record["error"] == why
    passed = CaseResult.of(VIEWS[0], Verdict(None, "ok"))
    runner.done = {"strided_softmax": IsolatedRun(results=[passed])}
    assert runner.not_kernel_work() == ""
