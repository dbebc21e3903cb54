"""The course's own timing of a queue job (grader/queue/verified_timing.py), judged on CPU
against fake timing servers (`fake_timed_calls`, as tests/test_timing_protocol.py does):
what the board reads is what the trusted side measured, never what the upload says of
itself. The fake needs the grader, which the sandbox never holds, so here the upload's
server runs in its scratch folder unsandboxed; on a GPU, tests/test_queue_worker.py runs the
real one in the sandbox."""

from __future__ import annotations

import json

import pytest

import grader.grading.gpu_timing as gpu_timing
from grader.grading import timing_servers
from grader.queue import board, verified_timing

REFERENCE = {"call_ms": 60, "null_ms": 10, "copy_ms": 35}


@pytest.fixture
def timed(monkeypatch, tmp_path):
    """verified_timing of a fake upload (`how`) against the fake reference."""
    monkeypatch.setattr(gpu_timing, "SERVER", "tests.fake_timed_calls")
    monkeypatch.setattr(timing_servers, "SPIN_S", 0.0)
    monkeypatch.setattr(gpu_timing, "_versions", lambda: {"torch": "fake"})
    monkeypatch.setattr(gpu_timing, "REPS", 5)
    monkeypatch.setattr(gpu_timing, "ALONE_REPS", 3)
    monkeypatch.setattr(gpu_timing, "ROW_SAMPLES", 1)
    monkeypatch.setattr(verified_timing, "SHAPES", ((64, 32),))
    reference = tmp_path / "reference.json"
    reference.write_text(json.dumps(REFERENCE))
    monkeypatch.setattr(gpu_timing, "REFERENCE", reference)

    def unsandboxed(argv, work, **_):  # the scratch folder as the sandbox's /work
        return [f"{work}/upload.json" if a == "/work/upload.json" else a for a in argv]

    monkeypatch.setattr(verified_timing, "sandboxed", unsandboxed)

    def run(how: dict) -> dict:
        content = json.dumps({**REFERENCE, **how}).encode()
        return verified_timing.verified_timing(content, "upload.json", "job-1")

    return run


def test_a_slower_upload_is_timed_by_the_course(timed):
    """Does an upload twice as slow as the reference get the course's ratio (about 2, its
    outputs right), and the board the reference's time over its own?"""
    found = timed({"call_ms": 110})
    assert found["error"] == "" and len(found["shapes"]) == 1, found
    shape = found["shapes"][0]
    assert (shape["rows"], shape["cols"], shape["correct"], shape["reason"]) == (64, 32, True, "")
    assert 1.6 < shape["ratio"] < 2.5, shape
    assert 0.4 < board.figures(found)["ratio_to_reference"] < 0.63


def test_an_upload_that_answers_wrong_has_no_place_on_the_board(timed):
    """Do outputs whose checksums differ from the reference's give the shape its reason, and
    the job no board figures, however fast it was?"""
    found = timed({"call_ms": 20, "sums_offset": 1.0})
    assert found["shapes"] and "checksum differs" in found["shapes"][0]["reason"], found
    assert board.figures(found) is None


def test_an_upload_that_never_loads_says_why_in_one_line(timed):
    """Does an upload whose server never gets ready give no shapes and a one-line cause?"""
    found = timed({"load_error": "NameError: strided_softmax is not defined"})
    assert found["shapes"] == [] and found["error"] and "\n" not in found["error"], found
    assert board.figures(found) is None
