"""The checker judges a child's cases from data: the child's word can fail a case, never pass it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from grader.edits import apply
from grader.zoo import BUGS
from grader.zoo.bug import REFERENCE
from learning.workshops.checking.cases import OPS, Case, CaseResult, Failure, Verdict
from learning.workshops.checking.exchange import Inputs, Observation, build_inputs, view_of
from learning.workshops.checking.isolation import Session
from learning.workshops.checking.judge import judge, settle

WIDE = Case("transpose", "transpose", 7, 5)
REPEAT = Case("repeat", "transpose", 5, 7, repeat=True)
SOFTMAX = OPS["strided_softmax"]


def observed(*calls: tuple[object, list[torch.Tensor]]) -> dict:
    seen = Observation()
    for returned, storages in calls:
        seen.saw(returned, storages)
    return seen.to_wire()


def right_answer(case: Case, inputs: Inputs) -> torch.Tensor:
    x = view_of(inputs.storages[0], case.geometry)
    return torch.softmax(x.double(), dim=1).to(x.dtype)


def test_right_data_passes():
    """Does the parent pass a case whose output and storage are what the case requires?"""
    inputs = build_inputs("new", WIDE, 7)
    seen = observed((right_answer(WIDE, inputs), inputs.storages))
    assert judge(SOFTMAX, WIDE, inputs, seen).failure is None


@pytest.mark.parametrize(
    ("change", "failure"),
    [
        (lambda out, storage: (out * 2, storage), Failure.VALUES),
        (lambda out, storage: (out.double(), storage), Failure.DTYPE),
        (lambda out, storage: (out.t().contiguous().t(), storage), Failure.LAYOUT),
        (lambda out, storage: (out[:, :3], storage), Failure.SHAPE),
        (lambda out, storage: (out, storage.clone().fill_(0)), Failure.INPUT_WRITTEN),
        (lambda out, storage: ([1.0], storage), Failure.NOT_A_TENSOR),
    ],
)
def test_wrong_data_fails(change, failure):
    """Does each way the data can be wrong fail the case, with its own failure?"""
    inputs = build_inputs("new", WIDE, 7)
    out, storage = change(right_answer(WIDE, inputs), inputs.storages[0])
    assert judge(SOFTMAX, WIDE, inputs, observed((out, [storage]))).failure is failure


def test_a_child_that_says_pass_without_data_fails():
    """Is a child's passing verdict with no observed call settled as a failure?"""
    inputs = build_inputs("new", WIDE, 7)
    said = CaseResult.of(WIDE, Verdict(None, "ok"), launches=1, cols=5)
    result = settle(SOFTMAX, WIDE, inputs, said, {"calls": []})
    assert not result.passed and result.failure is Failure.CRASH


def test_the_childs_failure_stands_even_with_right_data():
    """Does a failure the child found (no kernel ran, say) stand when the values are right?"""
    inputs = build_inputs("new", WIDE, 7)
    said = CaseResult.of(WIDE, Verdict(Failure.NO_KERNEL, "no Triton kernel was launched"))
    seen = observed((right_answer(WIDE, inputs), inputs.storages))
    assert settle(SOFTMAX, WIDE, inputs, said, seen).failure is Failure.NO_KERNEL


def test_a_replayed_answer_fails_the_repeat():
    """Does returning the first call's answer again fail a repeat (fresh values each call)?"""
    inputs = build_inputs("new", REPEAT, 3)
    first = right_answer(REPEAT, inputs)
    seen = Observation()
    seen.saw(first, inputs.storages)
    seen.saw(first, [inputs.second])
    seen.saw_again(first)
    verdict = judge(SOFTMAX, REPEAT, inputs, seen.to_wire())
    assert verdict.failure is Failure.STALE_OUTPUT


def test_garbled_data_is_a_failure_not_a_crash_of_the_checker():
    """Does data that does not fit what it claims (bytes for another shape) fail the case
    instead of raising in the checker?"""
    inputs = build_inputs("new", WIDE, 7)
    seen = observed((right_answer(WIDE, inputs), inputs.storages))
    seen["calls"][0]["returned"]["tensor"]["shape"] = [70, 5]
    assert judge(SOFTMAX, WIDE, inputs, seen).failure is not None
    assert judge(SOFTMAX, WIDE, inputs, {"calls": "nonsense"}).failure is Failure.CRASH


def wrong_kernel_with(payload: str, tmp_path: Path) -> Path:
    """The column-stride bug (wrong on every transpose) with `payload` run when it loads."""
    edits = next(b.edits for b in BUGS if b.name == "ignores-column-stride")
    source = apply(REFERENCE.read_text(), edits)
    impl = tmp_path / "impl.py"
    impl.write_text(source + "\n\n" + textwrap.dedent(payload))
    return impl


FORGERIES = {
    "replaced-runner": """
        import learning.workshops.checking.cases as cases
        from learning.workshops.checking.cases import CaseResult, Verdict

        cases.run_case = lambda fn, op, case, *a, **k: CaseResult.of(case, Verdict(None, "ok"), 1)
    """,
    "forged-events": """
        import json, os, sys, threading

        report = int(sys.argv[sys.argv.index("--report-fd") + 1])
        jobs = int(sys.argv[sys.argv.index("--job-fd") + 1])
        def forge():
            out = os.fdopen(report, "w", buffering=1)
            loaded = {"event": "loaded", "mode": "interpreter", "device": "cpu"}
            out.write(json.dumps(loaded) + "\\n")
            for line in os.fdopen(jobs):
                for case in json.loads(line)["cases"]:
                    out.write(json.dumps({"event": "result", "name": case["name"], "passed": True,
                        "detail": "ok", "failure": None, "features": [], "launches": 1,
                        "cols": case["cols"], "text": "ok"}) + "\\n")
                out.write(json.dumps({"event": "done"}) + "\\n")
            os._exit(0)
        forge()
    """,
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_forged_verdicts_in_the_child_change_nothing(forgery, tmp_path):
    """Does a wrong kernel whose child forges its verdicts (a replaced case runner, or result
    events written straight to the report pipe) still fail the views it gets wrong?"""
    impl = wrong_kernel_with(FORGERIES[forgery], tmp_path)
    cases = [WIDE, Case("contiguous", "contiguous", 5, 7)]
    with Session(impl) as session:
        run = session.run_cases("strided_softmax", "strided_softmax", cases, 11, 60.0)
    assert run.load_error is None
    by_name = {r.name: r for r in run.results}
    assert not by_name["transpose"].passed, by_name["transpose"].detail


START_EVENTS = """
import json, os, sys, time

report = int(sys.argv[sys.argv.index("--report-fd") + 1])

def strided_softmax(x, num_warps=4):
    out = os.fdopen(os.dup(report), "w", buffering=1)
    while True:
        out.write(json.dumps({"event": "start", "case": "again"}) + "\\n")
        time.sleep(@EVERY@)
"""
"""A child whose function sends start events forever, one every @EVERY@ seconds."""


@pytest.mark.parametrize(
    ("every_s", "failure", "why"),
    [
        (0.5, Failure.TIMEOUT, "no result after 3 s"),  # 6 events: under the cap
        (0.01, Failure.CRASH, "it flooded its report to the checker with events"),
    ],
    ids=["deadline", "event-cap"],
)
def test_endless_start_events_do_not_reset_the_deadline(tmp_path, every_s, failure, why):
    """Does a child that sends start events forever, and no result, fail the case at its
    timeout (start events come too seldom for the cap) or at the cap on its events (they
    come fast), instead of holding the checker?"""
    impl = tmp_path / "impl.py"
    impl.write_text(START_EVENTS.replace("@EVERY@", str(every_s)))
    with Session(impl) as session:
        run = session.run_cases("strided_softmax", "strided_softmax", [WIDE], 1, 3.0)
    assert [(r.failure, r.detail) for r in run.results] == [(failure, f"transpose: {why}")]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_any_view_crosses_as_its_values(dtype):
    """Does a view of any strides (0, size 1, transposed) cross to the parent as its values?"""
    base = torch.arange(6.0).to(dtype)
    for view in (
        base[:1].view(1, 1).expand(1, 1),
        base[:1].view(1, 1).expand(3, 4),
        base.view(2, 3).t(),
    ):
        from learning.workshops.checking.exchange import tensor_from_wire, tensor_to_wire

        assert torch.equal(tensor_from_wire(tensor_to_wire(view)), view.contiguous())
