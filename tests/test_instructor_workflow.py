"""The instructor guide's term (docs/instructor-guide.md, "A term, in order"), run as written:
every line of its block, in order, in a scratch course that starts with only the course's
config and source, a roster and the LMS's downloads. nbgrader's lines run in a shell as typed;
the course's own (`python -m grader....`) run in this process, through the same `main`.

The course folder is made as the guide makes it (`grader.make_course`), so it is tied to
this checkout and every grading checks that. Step 1 runs once; steps 2-5 once per Canvas
download, each saved with its submissions export (the times); step 6 at the end.

Bob has an extension to 2026-12-18 (step 1's line). Each export goes into a plain CSV and a
Canvas gradebook import, from a Canvas gradebook download the test writes as Canvas does.

- Download 1: Jane (12345) and Bob (23456), both right and on time. Jane's prediction is
  graded by hand (step 4's line); Bob's is not. Ann (34567) sends nothing all term.
- Download 2, the first still beside it: Jane resubmitted with a bug, 16.5 h late (`late_`
  and `-1` in her file name as Canvas writes them, the time from the export); Bob's
  resubmission is not a notebook.

After each download the test reads what the students read (feedback/) and what the LMS gets
(grades.csv). Three notebooks are autograded in all (each costs 6-11 s on 2 cores), and
Bob's broken file nearly nothing.
"""

from __future__ import annotations

import csv
import importlib
import os
import re
import shlex
import subprocess
import time
import zipfile
from pathlib import Path

import docs_commands
import nbformat
import pandas as pd
import pytest
from docs_commands import command_lines
from in_process import run_main
from nbgrader.api import Gradebook

from grader import course, make_course, zoo

pytestmark = pytest.mark.nbgrader

GUIDE = docs_commands.page(make_course.GUIDE)
"""The instructor guide; its section `make_course.TERM` holds the term's block."""
DUE = "2026-12-15 17:00:00"
BOB_DUE = "2026-12-18 17:00:00"  # his extension
JANE, BOB, ANN = "12345", "23456", "34567"  # Ann: on the roster, never submits
ROSTER = "id,first_name,last_name\n12345,Jane,Doe\n23456,Bob,Roe\n34567,Ann,Smith\n"
NOT_JSON = b"this is not a notebook\n"
CANVAS = (
    "\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,I1: Strided softmax (88001),"
    "Current Score\n"
    "    Points Possible,,,,,20.00,(read only)\n"
    '"Doe, Jane",12345,s12345,jdoe,CS 101,,\n'
    '"Roe, Bob",23456,s23456,broe,CS 101,,\n'
    '"Smith, Ann",34567,s34567,asmith,CS 101,,\n'
)
"""The course's Canvas gradebook as Canvas exports it (Grades > Export), before any upload."""
PREDICTION = '<a href="#prediction">Written response</a>'
"""The prediction's line in the feedback's list of scores, as nbgrader writes it."""


def workflow_commands() -> list[str]:
    """The command lines of the instructor guide's term block, comments left out."""
    return [line for step in workflow_steps().values() for line in step]


def workflow_steps() -> dict[int, list[str]]:
    """The block's command lines by step ("# 2. ..." starts step 2)."""
    block = next(b for b in GUIDE.section(make_course.TERM).blocks if b.language == "bash")
    steps: dict[int, list[str]] = {}
    number = 0
    for line in block.lines:
        heading = re.match(r"#\s*(\d+)\.", line)
        if heading:
            number = int(heading[1])
            steps[number] = []
        steps[number] += command_lines([line])
    return steps


def canvas_download(root: Path, name: str, files: dict[str, bytes], times: str, age: int) -> None:
    """An LMS download as Canvas names its files, saved `age` seconds ago, with its export."""
    folder = root / "downloaded" / course.ASSIGNMENT
    (folder / "archive").mkdir(parents=True, exist_ok=True)
    (folder / "times").mkdir(exist_ok=True)
    path = folder / "archive" / f"{name}.zip"
    with zipfile.ZipFile(path, "w") as download:
        for member, data in files.items():
            download.writestr(member, data)
    stamp = time.time() - age
    os.utime(path, (stamp, stamp))
    (folder / "times" / f"{name}.csv").write_text("user_id,submitted_at\n" + times)


IN_PROCESS = re.compile(r"python -m (grader(?:\.\w+)+) ([^|;&<>$`]*)")
"""A guide line this process can run itself: one of the course's own commands, no shell."""


def run(root: Path, commands: list[str], exits: dict | None = None) -> dict[str, str]:
    """Run each line in the course, each expected to exit with 0 (or as `exits` says); each
    one's output, by line. The course's own commands run in this process (`run_main`: no
    Python start and torch import each), the rest (nbgrader) in a shell, as typed."""
    said = {}
    for command in commands:
        ours = IN_PROCESS.fullmatch(command)
        if ours:
            module = importlib.import_module(ours[1])
            main = getattr(module, "main", None) or importlib.import_module(f"{ours[1]}.cli").main
            done = run_main(main, tuple(shlex.split(ours[2])), cwd=root)
        else:
            done = subprocess.run(["bash", "-c", command], cwd=root, capture_output=True, text=True)
        expected = (exits or {}).get(command, 0)
        assert done.returncode == expected, (
            f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )
        said[command] = done.stdout + done.stderr
    return said


def grades(root: Path) -> dict[str, dict]:
    with (root / "grades.csv").open() as fh:
        return {row["student_id"]: row for row in csv.DictReader(fh)}


def feedback(root: Path, student: str) -> str:
    return (root / "feedback" / student / course.ASSIGNMENT / "strided_softmax.html").read_text()


def cohort(root: Path) -> pd.DataFrame:
    """The cohort report's table, by (student, cell)."""
    return pd.read_csv(root / "reports" / "cohort" / "cohort.csv").set_index(["student", "cell"])


def lms_scores(root: Path) -> dict[str, str]:
    """The score each student gets in the Canvas import and, alike, in the plain CSV."""
    with (root / "canvas_import.csv").open(newline="", encoding="utf-8") as fh:
        canvas = {row["ID"]: row["I1: Strided softmax (88001)"] for row in csv.DictReader(fh)}
    with (root / "grades_plain.csv").open(newline="") as fh:
        plain = {row["student_id"]: row["score"] for row in csv.DictReader(fh)}
    assert canvas.pop("") == "20.00"  # the Points Possible row, kept
    assert {s: float(v) if v else v for s, v in canvas.items()} == {
        s: float(v) if v else v for s, v in plain.items()
    }
    return canvas


def hand_grade(root: Path, student: str) -> tuple[float | None, bool]:
    """The prediction's (manual score, needs manual grade) in the gradebook."""
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        grade = gradebook.find_grade("prediction", "strided_softmax", course.ASSIGNMENT, student)
        return grade.manual_score, grade.needs_manual_grade


def auto_scores(root: Path, student: str) -> list:
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        notebook = gradebook.find_submission_notebook("strided_softmax", course.ASSIGNMENT, student)
        return [grade.auto_score for grade in notebook.grades]


def test_a_whole_term_through_the_instructor_guide(tmp_path, monkeypatch):
    """Two downloads, a resubmission, a broken resubmission, a late one with its time from
    the LMS, a hand grade, feedback, export and the cohort, each by the guide's own lines:
    does each student read, and the LMS get, what their latest submission earned?"""
    steps = workflow_steps()
    assert sorted(steps) == [1, 2, 3, 4, 5, 6], steps
    solution = nbformat.writes(course.solved_notebook(course.REPO)).encode()
    bug = next(b for b in zoo.BUGS if b.name == "ignores-column-stride")
    buggy = nbformat.writes(course.solved_notebook(course.REPO, bug.edits)).encode()
    root = tmp_path / "course"
    made = run_main(make_course.main, (str(root),), cwd=tmp_path)  # the guide's first command
    assert made.returncode == 0, made.stderr
    assert (root / "i1_course.json").is_file()  # tied to this checkout: grading checks it
    (root / "roster.csv").write_text(ROSTER)
    monkeypatch.delenv("I1_COURSE_SECRET")  # the course's own secret, as an instructor's
    said = run(root, steps[1])
    assert (root / "dist" / "i1-student.zip").is_file()
    assert (root / "course_secret.txt").is_file()
    extension = next(line for line in steps[1] if line.startswith("python -m grader.extension"))
    assert "no submission yet: autograde applies it" in said[extension]
    (root / "canvas_gradebook.csv").write_text(CANVAS, encoding="utf-8")

    # Download 1: both right and on time; Jane's prediction graded by hand.
    canvas_download(
        root,
        "submissions",
        {
            "doejane_12345_987001_strided_softmax.ipynb": solution,
            "roebob_23456_987002_strided_softmax.ipynb": solution,
            "roebob_23456_987002_notes.txt": b"not a notebook: skipped",
        },
        "12345,2026-12-14T10:00:00Z\n23456,2026-12-14T11:00:00Z\n",
        age=3600,
    )
    said = run(root, [*steps[2], *steps[3], *steps[4], *steps[5]])
    assert "new: 12345, 23456" in said[steps[2][0]]
    review = next(line for line in steps[5] if line.startswith("python -m grader.review "))
    assert said[review] == f"No grade of {course.ASSIGNMENT} is held for review.\n"
    first = grades(root)
    assert (first[JANE]["status"], first[JANE]["not_graded_yet"]) == ("graded", "")
    assert first[BOB]["status"] == "hand grading pending"
    assert first[BOB]["not_graded_yet"] == "prediction (2 points)"
    assert float(first[JANE]["raw_score"]) == float(first[BOB]["raw_score"]) + 2 > 2
    assert first[ANN]["status"] == "missing"
    assert "Not graded yet" not in feedback(root, JANE)
    assert f"{PREDICTION} (Score: 2.0 / 2.0)" in feedback(root, JANE)
    assert "prediction (2 of the 20 points) is graded by hand and not graded yet" in feedback(
        root, BOB
    )
    assert PREDICTION not in feedback(root, BOB)  # no "0.0 / 2.0" for it
    assert cohort(root).loc[(int(BOB), "prediction"), "status"] == "manual"
    assert (first[BOB]["duedate"], first[JANE]["duedate"]) == (BOB_DUE, DUE)  # his extension
    assert lms_scores(root) == {JANE: first[JANE]["score"], BOB: "", ANN: ""}  # Bob's not final

    # Download 2: Jane's bug, late; Bob's broken file; download 1 still in archive/.
    canvas_download(
        root,
        "submissions (1)",
        {
            "doejane_late_12345_987101_strided_softmax-1.ipynb": buggy,
            "roebob_23456_987102_strided_softmax-1.ipynb": NOT_JSON,
        },
        "12345,2026-12-16T09:30:00Z\n23456,2026-12-15T16:30:00Z\n",
        age=0,
    )
    said = run(root, [*steps[2], *steps[3]], exits={steps[3][0]: 1})  # 1: Bob failed
    assert "resubmitted: 12345, 23456" in said[steps[2][0]]
    assert "--changed: 2 of 2 submissions: 12345, 23456" in said[steps[3][0]]
    assert hand_grade(root, JANE) == (2.0, False)  # the same answer: its hand grade kept
    assert set(auto_scores(root, BOB)) == {None}  # no score left from download 1
    run(root, [*steps[4], *steps[5]])
    second = grades(root)
    jane, bob = second[JANE], second[BOB]
    assert (jane["status"], jane["lms_late"], float(jane["seconds_late"])) == (
        "graded",
        "yes",
        16.5 * 3600,
    )
    assert float(first[JANE]["raw_score"]) > float(jane["raw_score"]) >= 2  # the bug costs
    penalty = float(jane["late_submission_penalty"])
    assert penalty == pytest.approx(0.1 * float(jane["raw_score"]))  # hand points included
    jane_reads = feedback(root, JANE)
    heading = f"<h4>strided_softmax (Score: {round(float(jane['score']), 2)} / 20.0)</h4>"
    assert heading in jane_reads  # the new score, late penalty off, as the export has it
    assert f"Late submission penalty (Score: -{round(penalty, 2)})" in jane_reads
    assert f"{PREDICTION} (Score: 2.0 / 2.0)" in jane_reads
    assert (bob["status"], bob["raw_score"], bob["score"]) == ("ungradable", "", "")
    assert bob["cause"].startswith("invalid notebook")
    bob_reads = feedback(root, BOB)
    assert "could not be graded" in bob_reads and "Score:" not in bob_reads
    assert (second[ANN]["status"], second[ANN]["score"]) == ("missing", "")
    assert lms_scores(root) == {JANE: jane["score"], BOB: "", ANN: ""}
    table = cohort(root)
    assert set(table.loc[int(BOB)]["status"]) == {"ungradable"}
    assert table.loc[(int(JANE), "prediction"), "reason"] == "graded by hand"

    run(root, steps[6])
