"""A hostile submission, autograded with honest ones: every attack fails or is caught.

The attacker's notebook (tests/shared_course.py) is a correct solution whose pass-3 cell
also probes what the grading kernel can reach and prints one `PROBE name: ...` line per
attempt. The shared course is graded with nbgrader's own command, sandboxed as every grading
is; the tests read the attacker's graded notebook, the honest students' scores and the
course folder.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from sandboxing import needs_sandbox

from grader import course
from grader.grading.grading_log import read_record

pytestmark = [
    pytest.mark.nbgrader,
    needs_sandbox,
]


@pytest.fixture(scope="module")
def attacked(shared_course):
    """The shared course, in which the attacker was graded between honest solutions: its
    folder, nbgrader's run, the attacker's probes and every student's cell scores."""
    root = shared_course.root
    graded = json.loads(
        (root / "autograded" / "attacker" / course.ASSIGNMENT / course.NOTEBOOK).read_text()
    )
    lines = [
        line
        for c in graded["cells"]
        for o in c.get("outputs", [])
        for line in "".join(o.get("text", "")).splitlines()
        if line.startswith("PROBE ")
    ]
    probes = dict(line[6:].split(": ", 1) for line in lines)
    scores = {
        student: {cell: score for cell, (score, _) in cells.items()}
        for student, cells in shared_course.scores.items()
    }
    return root, shared_course.run, probes, scores


@pytest.mark.parametrize(
    "probe",
    [
        "read-gradebook",
        "read-secret",
        "import-grader",
        "read-other-student",
        "list-autograded",
        "read-source",
        "write-gradebook",
        "write-course",
        "write-grader",
        "network-host",
        "network-out",
        "environment",
        "environment-secret",
    ],
)
def test_the_attack_is_denied(attacked, probe):
    """Does the sandboxed kernel fail to reach what is not its own?"""
    _, _, probes, _ = attacked
    assert probes[probe].startswith("DENIED"), probes


def test_forks_and_disk_stay_inside_the_limits(attacked):
    """Are a fork bomb and a disk filler stopped by the sandbox's limits?"""
    _, _, probes, _ = attacked
    assert probes["fork-bomb"].startswith("DENIED") or int(probes["fork-bomb"][5:-1]) < 1500
    assert probes["fill-disk-mb"].startswith("DENIED"), probes["fill-disk-mb"]


def test_nothing_the_attacker_started_outlives_its_grading(attacked):
    """Is the process the attacker left behind dead before it could write (and nothing
    written outside the sandbox at all)?"""
    root, _, probes, _ = attacked
    assert probes["late-writer"] == "started"
    assert not (root / "late.txt").exists()
    assert not (root / "pwned.txt").exists()
    assert not (course.REPO / "grader" / "pwned.py").exists()
    assert subprocess.run(["pgrep", "-f", "sleep 4; echo late"], check=False).returncode == 1


def test_scores_are_the_work_and_nothing_else(attacked):
    """Does the honest student graded after the attacker score exactly what the solution
    scores, and does the attacker, whose probes reach for the process, the network and the
    checker, lose every test cell to the source screen's flags, named in its log?"""
    root, run, _, scores = attacked
    assert not {"solution", "attacker", "zz-honest"} & set(run.failed)
    assert scores["solution"] == scores["zz-honest"]
    assert all(not score for cell, score in scores["attacker"].items() if cell.startswith("test_"))
    record = read_record(root, course.ASSIGNMENT, "attacker")
    assert record.flags and any("[process]" in flag for flag in record.flags)
