"""The GPU timing's trusted side, judged on CPU against fake servers (`fake_timed_calls`).

The parent times each command by its own clock, so sleeps stand in for kernels: what these
tests hold is what the parent does with what it measures and what the servers say."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

import grader.grading.gpu_timing as gpu_timing
from grader.grading import timing_record, timing_servers
from learning.workshops.checking.faults import CheckerFault

REFERENCE = {"call_ms": 60, "null_ms": 10, "copy_ms": 35}
"""Net of the harness: the reference 50 ms a command, a copy 25: far above a loaded machine's
scheduling noise."""


@pytest.fixture
def timed(monkeypatch, tmp_path):
    """timing_points of a fake student (`how`) against a fake reference: points, record."""
    monkeypatch.setattr(gpu_timing, "SERVER", "tests.fake_timed_calls")
    monkeypatch.setattr(timing_servers, "SPIN_S", 0.0)  # polling costs CPU here, not time
    monkeypatch.setattr(gpu_timing, "require_cuda", lambda: None)
    monkeypatch.setattr(gpu_timing, "_versions", lambda: {"torch": "fake"})
    monkeypatch.setattr(gpu_timing, "REPS", 5)
    monkeypatch.setattr(gpu_timing, "ALONE_REPS", 3)
    monkeypatch.setattr(gpu_timing, "ROW_SAMPLES", 1)

    def run(how: dict, reference: dict = REFERENCE) -> tuple[float, dict]:
        ref = tmp_path / "reference.json"
        ref.write_text(json.dumps(reference))
        monkeypatch.setattr(gpu_timing, "REFERENCE", ref)
        impl = tmp_path / "student.json"
        impl.write_text(json.dumps({**REFERENCE, **how}))
        sandbox = gpu_timing.Sandbox(list, str(impl), "0" * 64)
        out = tmp_path / timing_record.SIDECAR
        points = gpu_timing.timing_points(2, sidecar=out, sandbox=sandbox)
        timing_record.load(out)  # what the cohort report and recheck read
        return points, json.loads(out.read_text())

    return run


def test_times_are_the_parents_net_of_the_harness(timed):
    """Is the ratio the parent's: (student - null) / (reference - null), scored by the bands?"""
    points, record = timed({"call_ms": 110})  # net 100 against 50 ms: ratio 2, the 1/2 band
    assert points == 1.0
    for shape in record["shapes"]:
        assert 1.6 < shape["ratio"] < 2.4 and shape["reason"] == "", shape
        assert shape["copy_ms"] > 0 and shape["harness_ms"] > 0
        assert shape["reference_alone_ms"] > 0


def test_a_wrong_checksum_earns_nothing(timed):
    """Does a wrong answer earn nothing, and stop its shape's timing at once?"""
    points, record = timed({"sums_offset": 1.0})
    assert points == 0
    assert all("checksum differs" in s["reason"] for s in record["shapes"])
    assert all(s["student_min_ms"] == s["student_max_ms"] for s in record["shapes"])  # once


def test_an_answer_from_before_the_gate_opens_earns_nothing(timed):
    """Is a command's seed out of reach until the parent starts its clock: an answer from
    what the gate held before is wrong?"""
    points, record = timed({"answers_early": True})
    assert points == 0
    assert all("checksum differs" in s["reason"] for s in record["shapes"])


def test_a_function_that_cannot_queue_ahead_is_timed_from_the_gate(timed):
    """A function that synchronises the device cannot queue its work before the gate opens:
    is it still timed, from the opening, and does the wait before it cost it nothing?"""
    points, record = timed({"synchronises": True})
    assert points == 2
    assert all(0.8 < s["ratio"] < 1.25 and not s["reason"] for s in record["shapes"])


def test_rows_that_differ_earn_nothing(timed):
    points, record = timed({"rows_byte": 64})  # each float 3.0, not 0.0
    assert points == 0
    assert all("rows compared in full differ" in s["reason"] for s in record["shapes"])


def test_a_time_below_the_copy_is_refused(timed):
    """Is a student faster than a plain copy of the same bytes refused, never rewarded?"""
    points, record = timed({"call_ms": 20})  # net 10 ms against a copy's 25
    assert points == 0
    assert all("faster than a plain copy" in s["reason"] for s in record["shapes"])


def test_a_reference_slowed_beside_the_submission_earns_nothing(timed, monkeypatch):
    """When the reference ran slower beside the submission than alone, is the timing run
    again, and does it then earn nothing, saying why?"""
    starts = []
    real = gpu_timing._start_now

    def counted(sandbox, shapes=None):
        starts.append(sandbox)
        return real(sandbox, shapes)

    monkeypatch.setattr(gpu_timing, "_start_now", counted)
    monkeypatch.setattr(gpu_timing, "INTERFERENCE", 0.5)  # alone is never twice as fast here
    points, record = timed({})
    assert points == 0 and len(starts) == 1 + gpu_timing.RETRIES
    assert all("kept the GPU busy" in s["reason"] for s in record["shapes"])


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ({"silent": True}, "no reply in time"),
        ({"bad_length": True}, "not its length"),
        ({"load_error": "NameError: tl"}, "do not load in the timing's process"),
    ],
)
def test_a_student_server_that_fails_scores_0_with_its_cause(timed, monkeypatch, how, why):
    monkeypatch.setattr(timing_servers, "CALL_TIMEOUT_S", 2.0)
    points, record = timed(how)
    assert points == 0 and why in record["error"]


LEAK = "hidden 4096x4096 leaked"
"""Text the student's server chose: it must not reach the timing cell, a hidden cell."""


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ({"first_reply": "null"}, "not what was asked for: JSON null, not an object"),
        ({"first_reply": f"{LEAK}, not JSON"}, "not what was asked for: not JSON"),
        ({"first_reply": "[" * 100_000 + "]" * 100_000}, "nested deeper than 32 levels"),
        ({"first_reply": '{"loaded": "' + LEAK + '"}'}, "do not load in the timing's process"),
        ({"load_error": LEAK}, "do not load in the timing's process"),
        ({"call_error": LEAK}, "a timed call raised an error"),
    ],
    ids=["null", "not-json", "deep", "not-loaded", "load-error", "call-error"],
)
def test_a_servers_garbled_or_failed_reply_is_the_students_in_the_graders_words(timed, how, why):
    """Is a first reply that is null, not JSON, nested too deep or not a load, and a failed
    load or call, the student's failure (0 points) with its cause named in the grader's
    words alone, never the checker's fault and never the server's own text?"""
    points, record = timed(how)
    assert points == 0 and why in record["error"], record
    assert not record.get("internal_error") and LEAK not in json.dumps(record)


def test_running_out_of_gpu_memory_once_is_retried(timed, tmp_path):
    """A server that ran out of GPU memory (a neighbour's doing, say) is started again, and
    the timing that follows counts."""
    points, record = timed({"out_of_memory_once": str(tmp_path / "ran-out")})
    assert (tmp_path / "ran-out").exists()
    assert points == 2 and not record.get("error")


def test_the_references_failure_is_the_checkers(timed, monkeypatch):
    """When the reference's server fails, does the cell raise CheckerFault, not score 0?"""
    with pytest.raises(CheckerFault, match="the definitions do not load"):
        timed({}, {"load_error": "ImportError: triton"})


def test_the_students_server_is_stopped_between_its_calls(monkeypatch, tmp_path):
    """Between its commands, is every process of the student's server stopped (SIGSTOP)?"""
    monkeypatch.setattr(gpu_timing, "SERVER", "tests.fake_timed_calls")
    impl = tmp_path / "student.json"
    impl.write_text(json.dumps(REFERENCE))
    server = timing_servers.Server(gpu_timing._server_argv(str(impl)), stoppable=True)
    try:
        server.first()
        server.call("call", 8, 8, 2, 1)
        stat = Path(f"/proc/{server.process.pid}/stat")
        for _ in range(100):  # a signal is delivered soon after it is sent, not at once
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "T":
                break
            time.sleep(0.01)
        assert stat.read_text().rsplit(")", 1)[1].split()[0] == "T"
        assert len(server.call("call", 8, 8, 2, 2)[0]["sums"]) == 2  # woken for the next one
    finally:
        server.close()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_real_server_holds_its_work_until_the_gate_opens():
    """On a GPU, does the real server's work wait for the gate (queued, then no reply until
    the parent writes the seed), with the same seed giving the same sums and another seed
    others?"""
    argv = gpu_timing._server_argv(str(gpu_timing.REFERENCE))
    server = timing_servers.Server(argv, stoppable=False)
    try:
        server.first()
        server.call("warm", 256, 128, 2, 1, timing_servers.LOAD_TIMEOUT_S)
        server.generation += 1
        server._send(f"call 256 128 2 {server.generation}")
        assert json.loads(server.read(30)) == {"queued": 2}
        assert not server._arrives(0.5)  # the device waits on the gate
        server.word.value = server.generation << timing_servers.SEED_BITS | 5
        sums = json.loads(server.read(30))["sums"]
        assert sums == server.call("call", 256, 128, 2, 5)[0]["sums"]
        assert sums != server.call("call", 256, 128, 2, 6)[0]["sums"]
    finally:
        server.close()
