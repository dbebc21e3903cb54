"""A hostile submission, autograded with honest ones: every attack fails or is caught.

The attacker's notebook is a correct solution whose pass-3 cell also probes what the
grading kernel can reach and prints one `PROBE name: ...` line per attempt. The course is
graded with nbgrader's own command, sandboxed as every grading is; the test then reads the
attacker's graded notebook, the honest students' scores and the course folder.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time

import pytest

from grader import course

pytestmark = [
    pytest.mark.nbgrader,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (bwrap)"),
]

PROBES = """
import os as _os, socket as _socket, subprocess as _subprocess, pathlib as _pathlib
def _probe(name, action):
    try:
        print(f"PROBE {name}: GOT {str(action())[:60]!r}")
    except BaseException as exc:
        print(f"PROBE {name}: DENIED {type(exc).__name__}")
_COURSE, _REPO = _pathlib.Path('@COURSE@'), _pathlib.Path('@REPO@')
_probe("read-gradebook", lambda: (_COURSE / "gradebook.db").read_bytes()[:16])
_probe("read-secret", lambda: (_COURSE / "course_secret.txt").read_text())
_probe("import-grader", lambda: __import__("grader.seeding").secret.course_secret(_COURSE))
_probe("read-other-student", lambda: (_COURSE / "submitted" / "honest").iterdir().__next__())
_probe("list-autograded", lambda: list((_COURSE / "autograded").iterdir()))
_probe("read-source", lambda: list((_COURSE / "source").iterdir()))
_probe("write-gradebook", lambda: open(_COURSE / "gradebook.db", "ab").write(b"x"))
_probe("write-course", lambda: (_COURSE / "pwned.txt").write_text("pwned"))
_probe("write-grader", lambda: (_REPO / "grader" / "pwned.py").write_text("x = 1"))
_probe("network-host", lambda: _socket.create_connection(("127.0.0.1", @PORT@), timeout=2))
_probe("network-out", lambda: _socket.create_connection(("1.1.1.1", 53), timeout=2))
_probe("environment", lambda: _os.environ["I1_CANARY"])
_probe("environment-secret", lambda: _os.environ["I1_COURSE_SECRET"])
def _forks(limit=1500):
    pids = []
    try:
        for _ in range(limit):
            pid = _os.fork()
            if pid == 0:
                import time as _t; _t.sleep(20); _os._exit(0)
            pids.append(pid)
    finally:
        for pid in pids:
            _os.kill(pid, 9); _os.waitpid(pid, 0)
    return len(pids)
_probe("fork-bomb", _forks)
def _fill(path="/work/fill.bin", chunk=b"x" * 2**20, limit=4096):
    written = 0
    try:
        with open(path, "wb") as out:
            while written < limit:
                out.write(chunk); out.flush(); written += 1
    finally:
        _os.remove(path)
    return written
_probe("fill-disk-mb", _fill)
_subprocess.Popen(["sh", "-c", "sleep 4; echo late > @COURSE@/late.txt"], start_new_session=True)
print("PROBE late-writer: started")
"""


def _grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    """Grade an honest solution, the attacker and a second honest solution, once."""
    root = course.new_course(tmp_path_factory.mktemp("attacked"))
    server = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=server.accept, daemon=True).start()  # a service on the host
    solved = course.solved_notebook(root)
    course.submit(root, "honest", solved)
    hostile = course.solved_notebook(root)
    cell = next(c for c in hostile.cells if _grade_id(c) == "pass3")
    port = str(server.getsockname()[1])
    probes = PROBES.replace("@COURSE@", str(root)).replace("@REPO@", str(course.REPO))
    cell.source += probes.replace("@PORT@", port)
    course.submit(root, "attacker", hostile)
    course.submit(root, "zz-honest", solved)
    run = course.autograde(root, env={"I1_CANARY": "the grader's secret environment"})
    time.sleep(6)  # past the late writer's sleep
    server.close()
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
    scores = {}
    for s in course.cell_scores(root):
        scores.setdefault(s.student, {})[s.cell] = s.score
    return root, run, probes, scores


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
    """Do the honest students and the attacker score exactly what a correct solution
    scores, the attack changing nothing?"""
    _, run, _, scores = attacked
    assert run.failed == ()
    assert scores["honest"] == scores["zz-honest"] == scores["attacker"]
