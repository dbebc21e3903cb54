"""What a submission makes is its own failure, never the grader's: its exceptions and returned
objects read without letting them raise in the checks, its report decoded as the data it is,
and its child processes started within the submission's budget (issue 48)."""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict

import pytest
import torch

from learning.workshops.checking import child, isolation, pipes
from learning.workshops.checking.cases import OPS, Case, CaseResult, Failure
from learning.workshops.checking.exchange import build_inputs
from learning.workshops.checking.isolation import Session
from learning.workshops.checking.judge import settle
from learning.workshops.checking.raised import raised_text
from learning.workshops.checking.untrusted import (
    MAX_DEPTH,
    Unreadable,
    class_name,
    decoded,
    made,
    text,
)

SOFTMAX = OPS["strided_softmax"]

HOSTILE_OBJECTS = '''
import torch


class Unspeakable(ValueError):
    """A refusal whose message cannot be read."""

    def __str__(self):
        raise RuntimeError("no message for you")


class Nameless(type):
    @property
    def __name__(cls):
        raise RuntimeError("no name for you")


class Anonymous(Exception, metaclass=Nameless):
    pass


class Slippery(str):
    def strip(self, *args):
        raise RuntimeError("no stripping")

    def splitlines(self, *args):
        raise RuntimeError("no lines")


class Wriggles(Exception):
    def __str__(self):
        return Slippery("a message that will not be split")


class Classless:
    @property
    def __class__(self):
        raise RuntimeError("no class for you")


class PassesForATensor:
    __class__ = torch.Tensor


class Booby(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise RuntimeError("every method of this tensor raises")


def strided_softmax(x, num_warps=4):
    if x.dim() != 2:
        raise Unspeakable()
    width = int(x.shape[1])
    if width == 2:
        raise Unspeakable()
    if width == 3:
        raise Anonymous("nameless")
    if width == 4:
        raise Wriggles()
    if width == 5:
        return Classless()
    if width == 6:
        return PassesForATensor()
    if width == 7:
        return torch.zeros(x.shape).as_subclass(Booby)
    if width == 9:
        return torch.empty(x.shape, device="meta")
    if width == 10:
        return torch.zeros(x.shape).to_sparse()
    y = torch.softmax(x.float(), dim=1).to(x.dtype)
    y.is_contiguous = None  # a method shadowed on the object itself
    y.stride = lambda *args: 1 / 0
    return y
'''
"""A submission whose every call makes an object that raises when the checks read it."""
EXPECTED = {
    "unspeakable": (
        Failure.EXCEPTION,
        "raised Unspeakable (its message could not be read: its __str__ raised RuntimeError)",
    ),
    "anonymous": (Failure.EXCEPTION, "raised Anonymous: nameless"),
    "wriggles": (Failure.EXCEPTION, "raised Wriggles: a message that will not be split"),
    "classless": (Failure.NOT_A_TENSOR, "returned Classless, expected a torch.Tensor"),
    "passes": (Failure.NOT_A_TENSOR, "returned PassesForATensor, expected a torch.Tensor"),
    "booby": (Failure.NOT_A_TENSOR, "returned Booby, expected a torch.Tensor"),
    "meta": (Failure.NOT_A_TENSOR, "returned a tensor on meta, expected a torch.Tensor"),
    "sparse": (Failure.NOT_A_TENSOR, "returned a sparse_coo tensor, expected a torch.Tensor"),
    "shadowed": (Failure.NO_KERNEL, "no Triton kernel was launched"),
    "refused": (Failure.UNCLEAR_ERROR, "which does not name the problem"),
}
CASES = [
    Case("unspeakable", "transpose", 3, 2),
    Case("anonymous", "transpose", 3, 3),
    Case("wriggles", "transpose", 3, 4),
    Case("classless", "slice", 3, 5),
    Case("passes", "slice", 3, 6),
    Case("booby", "contiguous", 3, 7),
    Case("meta", "transpose", 3, 9),
    Case("sparse", "transpose", 3, 10),
    Case("shadowed", "contiguous", 3, 8),
    Case("refused", bad_input="3-d"),
]


def test_an_exception_whose_message_or_name_raises_is_read_as_such():
    """Are an exception's class name (a metaclass property that raises) and message (a
    __str__ that raises, or returns a string whose methods raise) read without raising,
    the unreadable part said as such?"""
    namespace: dict = {}
    exec(compile(HOSTILE_OBJECTS, "<student>", "exec"), namespace)  # noqa: S102 - the test's
    anonymous, wriggles = namespace["Anonymous"]("nameless"), namespace["Wriggles"]()
    assert class_name(anonymous) == "Anonymous"
    assert text(namespace["Unspeakable"]()) == (
        "(its message could not be read: its __str__ raised RuntimeError)"
    )
    assert type(text(wriggles)) is str and text(wriggles).splitlines()
    assert raised_text(wriggles) == "raised Wriggles: a message that will not be split"
    assert not made(namespace["Classless"](), BaseException, torch.Tensor)
    assert not made(namespace["PassesForATensor"](), torch.Tensor)


def test_objects_that_raise_when_read_fail_the_students_cases_not_the_checks(tmp_path):
    """Does every call whose exception or returned object raises when the checks read it
    (its name, its message, its class, its methods, a device or layout no check reads) fail
    that case as the student's, with the cause named, and never as an internal error, in the
    child and in the parent?"""
    impl = tmp_path / "hostile.py"
    impl.write_text(HOSTILE_OBJECTS)
    sent = {c.name: build_inputs("new", c, 3) for c in CASES}
    job = {
        "op": "strided_softmax",
        "function": "strided_softmax",
        "seed": 3,
        "cases": [{**asdict(c), "inputs": sent[c.name].to_wire()} for c in CASES],
    }
    events = []
    child.serve(impl, [job], lambda event, **fields: events.append((event, fields)))
    kinds = [event for event, _ in events]
    assert "internal-error" not in kinds, events
    results = [json.loads(json.dumps(fields)) for event, fields in events if event == "result"]
    assert [r["name"] for r in results] == [c.name for c in CASES]
    for case, event in zip(CASES, results, strict=True):
        settled = settle(
            SOFTMAX, case, sent[case.name], CaseResult.from_event(event), event["seen"]
        )
        failure, said = EXPECTED[case.name]
        assert (settled.failure, case.name) == (failure, case.name), settled.detail
        assert said in settled.detail, settled.detail


def test_a_method_of_the_students_that_raises_in_the_checks_is_the_students(monkeypatch):
    """When the checks themselves run the student's code and it raises (here a returned
    tensor's method, had it reached the checks), is the case the student's exception, naming
    its line, and not the checker's internal error?"""
    from learning.workshops.checking import cases

    def reads_a_students_method(fn, op, case, *args, **kwargs):
        fn(None, num_warps=4)  # the checks running the student's code outside the call

    def student(x, num_warps=4):
        raise ZeroDivisionError("a method of the student's raised")

    monkeypatch.setattr(cases, "run_case", reads_a_students_method)
    events = []
    case = Case("contiguous")
    child.run_one(
        student,
        {"op": "strided_softmax", "seed": 1},
        case,
        {"storages": []},
        torch.device("cpu"),
        lambda event, **fields: events.append((event, fields)),
    )
    [(event, fields)] = [e for e in events if e[0] != "start"]
    assert event == "result" and fields["failure"] == "exception"
    assert "your code raised ZeroDivisionError: a method of the student's raised" in fields["text"]
    assert "test_untrusted.py" in fields["text"]  # the student's line: here, this file's


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"[" * 100_000 + b"]" * 100_000, f"JSON nested deeper than {MAX_DEPTH} levels"),
        (b'{"a": ' * 40 + b"1" + b"}" * 40, f"JSON nested deeper than {MAX_DEPTH} levels"),
        (b"null", "JSON null, not an object"),
        (b'"eof"', "JSON string, not an object"),
        (b"\xff\xfe", "not JSON"),
        (b"{'event': 'result'}", "not JSON"),
    ],
    ids=["deep-array", "deep-object", "null", "a-string", "not-utf8", "not-json"],
)
def test_a_report_line_that_is_not_what_was_asked_is_refused_with_its_cause(line, why):
    """Is a report line that nests too deep, or is not a JSON object, refused with a named
    cause (never a RecursionError, never a sentinel the reader uses, like "eof")?"""
    with pytest.raises(Unreadable, match=why) as refused:
        decoded(line)
    with tempfile.TemporaryFile() as report:  # a pipe would hold only 64 KiB of it
        report.write(line + b"\n")
        report.seek(0)
        reader = pipes.EventReader(os.dup(report.fileno()))
    try:
        assert reader.next(time.monotonic() + 5) == f"garbled ({refused.value})"
    finally:
        reader.close()


RESULT = {
    "event": "result",
    "name": "transpose",
    "passed": False,
    "detail": "transpose: wrong",
    "failure": "values",
    "features": ["transpose"],
    "launches": 1,
    "cols": 5,
    "text": "wrong",
}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("text", ["not", "text"]),
        ("failure", "no-such-failure"),
        ("failure", 3),
        ("features", [["nested"]]),
        ("launches", "1"),
        ("launches", True),
        ("cols", None),
        ("name", {"a": 1}),
    ],
)
def test_a_result_with_a_field_of_another_type_is_garbled(field, value):
    """Is a result event whose field is missing or of another type refused (ValueError, read
    as a garbled report: the student's crash), before any of it is used?"""
    assert CaseResult.from_event(dict(RESULT)).failure is Failure.VALUES
    with pytest.raises(ValueError):
        CaseResult.from_event({**RESULT, field: value})
    with pytest.raises(ValueError):
        CaseResult.from_event({k: v for k, v in RESULT.items() if k != field})


@pytest.mark.parametrize(
    ("kind", "event"),
    [
        ("internal-error", {"case": "x", "detail": {"a": 1}, "where": 3}),
        ("note", {"text": {"deep": [1]}}),
        ("missing", {"detail": ["strided_softmax"]}),
        ("answers", {"answers": {"value": 1}}),
        ("answers", {"answers": [{"raised": 3, "message": "x"}]}),
        ("answers", {"answers": [{"message": "no value, nothing raised"}]}),
    ],
)
def test_other_events_with_fields_of_another_type_are_garbled(kind, event):
    """Is an internal-error, note, missing or answers event whose fields are not text (or
    not answers) refused with ValueError, the garbled report it is?"""
    run = isolation.IsolatedRun()
    case = Case("transpose", "transpose", 7, 5)
    with pytest.raises(ValueError):
        if kind == "internal-error":
            isolation._result(kind, event, SOFTMAX, case, build_inputs("new", case, 1))
        else:
            isolation._other(kind, event, run, [])


GARBLES = """
import os, sys, time

report = int(sys.argv[sys.argv.index("--report-fd") + 1])


def strided_softmax(x, num_warps=4):
    if x.shape[1] == 5:  # a report line nested 100,000 deep
        os.write(report, b"[" * 100_000 + b"]" * 100_000 + b"\\n")
        time.sleep(60)
    return x.clone()
"""


def test_a_deeply_nested_report_fails_its_case_as_a_crash_and_the_next_runs(tmp_path):
    """Does a child that sends a line nested 100,000 deep fail that case as a crash naming
    the cause, where it once raised RecursionError in the parent, and a fresh child run the
    next case?"""
    impl = tmp_path / "garbles.py"
    impl.write_text(GARBLES)
    cases = [Case("transpose", "transpose", 7, 5), Case("contiguous", "contiguous", 5, 7)]
    with Session(impl) as session:
        run = session.run_cases("strided_softmax", "strided_softmax", cases, 1, 60.0)
    first, second = run.results
    assert first.failure is Failure.CRASH
    assert first.verdict.text == (
        f"its report to the checker was garbled (JSON nested deeper than {MAX_DEPTH} levels)"
    )
    assert second.failure is not Failure.CRASH and second.failure != "internal-error"


SLEEPS_AND_DIES = """
import os, time

time.sleep(@SLEEP@)  # at load, in every child


def strided_softmax(x, num_warps=4):
    os._exit(1)  # in every call
"""


def sleeps_and_dies(tmp_path, sleep_s: float):
    impl = tmp_path / "sleeps.py"
    impl.write_text(SLEEPS_AND_DIES.replace("@SLEEP@", str(sleep_s)))
    return impl


JOBS = [
    [Case(f"{layout}-{i}", layout, 3, 5) for i in range(2)] for layout in ("slice", "transpose")
]


def test_child_starts_stop_at_the_sessions_cap(tmp_path, monkeypatch):
    """Does a child that sleeps at load and dies in every call get at most MAX_STARTS
    children per session, the cases after that failed as not run with the reason?"""
    monkeypatch.setattr(isolation, "MAX_STARTS", 2)
    results = []
    with Session(sleeps_and_dies(tmp_path, 0.2)) as session:
        for cases in JOBS:
            results += session.run_cases("strided_softmax", "strided_softmax", cases, 1, 60).results
        assert session.starts == 2
    assert [r.failure for r in results] == [Failure.CRASH] * 2 + [Failure.TIMEOUT] * 2
    assert results[-1].verdict.text == (
        "not run: its process was started 2 times already, crashing or hanging"
    )


BUDGET_S = 6.0


def test_a_child_start_waits_no_longer_than_the_sessions_budget(tmp_path):
    """Does a child's load wait no longer than the session's budget has left (it once waited
    LOAD_TIMEOUT_S, 180 s, whatever the budget), and once the budget is spent does no child
    start, every case left failed as not run with the reason?"""
    started = time.monotonic()
    results = []
    with Session(sleeps_and_dies(tmp_path, 60.0), budget_s=BUDGET_S) as session:
        for cases in JOBS:
            results += session.run_cases("strided_softmax", "strided_softmax", cases, 1, 60).results
    took = time.monotonic() - started
    assert took < BUDGET_S + 2, took  # the loading child killed at the budget, nothing more
    assert session.starts == 1 and session.load_error is None
    assert [r.failure for r in results] == [Failure.TIMEOUT] * 4
    assert {r.verdict.text for r in results} == {
        "not run: the submission's time for its checks ran out"
    }
