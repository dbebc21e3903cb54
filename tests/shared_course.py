"""The one graded course the end-to-end tests share, built and autograded once a session.

A full `nbgrader autograde` costs tens of seconds a submission on 2 cores, so every
submission here serves several test modules, and a fact that needs no nbgrader is proven
below it (which cells each bug loses: tests/test_cell_losses.py). The cohort:

- the sample cohort (`grader.sample_cohort`): the solution, a late one, eight bugs, the
  copy-first shortcut, the untouched release, a crasher, a student who sent nothing;
- submissions nbgrader itself must handle: a noisy solution (stderr, warnings), deleted and
  moved cells, a deleted solution cell, a file that is not JSON, and an autotuned kernel
  (a decorator over the kernel, loaded from the notebook);
- tampering from the kernel (tests/test_recheck.py), and an attacker graded between honest
  solutions (tests/test_sandbox_e2e.py), with a service on the host and a canary in the
  grader's environment for it to reach for.
"""

from __future__ import annotations

import copy
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from grader import course, sample_cohort
from grader.zoo import BUGS, Edit

CANARY = "the grader's secret environment"
TAMPERED_BUG = "bug-ignores-column-stride"
"""The sample student whose bug the tampering submissions carry: visible tests miss it
(they use contiguous inputs) and the hidden ones catch it."""
SHAPES_GRADED = ("autotuned",)
"""Decompositions graded through nbgrader too (all of them: tests/test_cell_losses.py)."""


def grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def without(notebook, *grade_ids: str):
    """`notebook` with the cells of `grade_ids` deleted."""
    notebook = copy.deepcopy(notebook)
    notebook.cells = [c for c in notebook.cells if grade_id(c) not in grade_ids]
    return notebook


def rearranged(notebook):
    """The solution with a visible and a hidden test cell deleted, a test cell and a
    solution cell moved to the end, a markdown cell moved to the top, and a cell added."""
    notebook = without(notebook, "test_pass1", "hidden_pass3")
    cells = notebook.cells
    for moved in ("test_pass2", "worksheet_solution"):
        cell = next(c for c in cells if grade_id(c) == moved)
        cells.remove(cell)
        cells.append(cell)
    markdown = next(c for c in cells if c.source.startswith("## 4."))
    cells.remove(markdown)
    cells.insert(0, markdown)
    cells.insert(5, nbformat.v4.new_code_cell("print('a cell of my own')"))
    return notebook


def tamper(payload: str) -> tuple[Edit, ...]:
    """The tampered bug plus `payload`, run at the top level of the wrapper's cell."""
    bug = next(b for b in BUGS if f"bug-{b.name}" == TAMPERED_BUG)
    payload_edit = Edit("strided_softmax", "\n    return y", f"\n    return y\n\n\n{payload}\n")
    return (*bug.edits, payload_edit)


TAMPERING = {
    "patches-grader": tamper(
        "import grader.grading.hidden as hidden\n"
        "hidden.expect_hidden = lambda *args, **kwargs: print('all hidden cases pass')"
    ),
    "patches-torch": tamper(
        "torch.isclose = lambda a, b, **kwargs: torch.ones_like(a, dtype=torch.bool)\n"
        "torch.allclose = lambda *args, **kwargs: True"
    ),
    "hides-tracebacks": tamper("get_ipython().showtraceback = lambda *args, **kwargs: None"),
    "rewrites-later-cells": tamper(
        'get_ipython().input_transformers_post.append(lambda lines: ["pass\\n"])'
    ),
}

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
_probe("read-other-student", lambda: (_COURSE / "submitted" / "solution").iterdir().__next__())
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
"""The attacker's probes, one `PROBE name: ...` line per attempt (@COURSE@, @REPO@ and
@PORT@ are filled in)."""


@dataclass(frozen=True)
class SharedCourse:
    """The graded course: its folder, nbgrader's run, and every (student, cell) score."""

    root: Path
    run: course.AutogradeRun
    scores: dict[str, dict[str, tuple[float | None, float]]]


def _on_time(path: Path) -> None:
    (path.parent / "timestamp.txt").write_text(sample_cohort.ON_TIME + "\n")


def _submit(root: Path, student: str, notebook) -> Path:
    path = course.submit(root, student, notebook)
    _on_time(path)
    return path


def build(root: Path, port: int) -> None:
    """Every submission of the shared course, in the course at `root` (the attacker reaches
    for a service on the host at `port`)."""
    sample_cohort.build(root)
    solved = course.solved_notebook(root)
    _submit(root, "noisy", course.solved_notebook(root, course.NOISY))
    _submit(root, "rearranged", rearranged(solved))
    _submit(root, "no-addresses", without(solved, "addresses"))
    _submit(root, "invalid-json", solved).write_text("{not json")
    for shape in SHAPES_GRADED:
        _submit(root, f"shape-{shape}", course.shape_notebook(root, shape))
    for student, edits in TAMPERING.items():
        _submit(root, student, course.solved_notebook(root, edits))
    hostile = course.solved_notebook(root)
    cell = next(c for c in hostile.cells if grade_id(c) == "pass3")
    probes = PROBES.replace("@COURSE@", str(root)).replace("@REPO@", str(course.REPO))
    cell.source += probes.replace("@PORT@", str(port))
    _submit(root, "attacker", hostile)
    _submit(root, "zz-honest", solved)


def graded(root: Path) -> SharedCourse:
    """Build the shared course at `root` and autograde it with nbgrader's own command."""
    server = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=server.accept, daemon=True).start()  # a service on the host
    try:
        build(root, server.getsockname()[1])
        run = course.autograde(root, env={"I1_CANARY": CANARY})
        time.sleep(6)  # past the attacker's late writer's sleep
    finally:
        server.close()
    scores: dict[str, dict] = {}
    for cell in course.cell_scores(root):
        scores.setdefault(cell.student, {})[cell.cell] = (cell.score, cell.max_score)
    return SharedCourse(root, run, scores)
