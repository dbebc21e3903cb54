"""Held grades and their review (grader.review, grader.grading.decisions, .released,
.review_note): a held grade is computed and kept, not released, until an instructor decides.

No autograde runs: a gradebook filled through nbgrader's API, autograded notebooks and grading
records with holds placed by hand (`GradingLog.hold`), as the source screen and the clean room
leave them. The fake assignment: a solution cell `pass3`, and two autograded cells, test_a (6
points) and test_b (4). ada's grade is held for one line of pass3 (`!nvidia-smi`); cy's for a
launch that could not be replayed, which kept test_b from passing; bob's is not held; 12345,
whom the instructor guide's commands name, is held like ada.
"""

from __future__ import annotations

import csv
import shlex
import shutil
import warnings
from pathlib import Path

import nbformat
import pytest
from docs_commands import doc
from in_process import run_main
from nbformat.v4 import new_code_cell, new_notebook
from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory
from nbgrader.utils import parse_utc
from traitlets.config import Config

from grader import cohort, course, recheck, review
from grader.course import ASSIGNMENT
from grader.export import StatusCsvExport
from grader.grading.decisions import review_of
from grader.grading.fresh_start import forget_previous_grading
from grader.grading.grading_log import GradingLog, Hold, submission_fingerprint
from grader.grading.late import DailyLatePenalty
from grader.grading.released import KeepReviewDecisions
from grader.grading.review_note import REVIEWED, UNDER_REVIEW, ReviewNote
from grader.sample_cohort import DUE, ON_TIME
from learning.workshops.checking.sidecars import HINTS_SIDECAR, write_hints

NOTEBOOK = "strided_softmax"
PASS3 = "def strided_softmax(x):\n    import torch\n    !nvidia-smi\n    return y\n"
SHELL = Hold("screen", "shell-escape", "pass3", 3, "runs a shell command", ("test_a",))
REPLAYED = Hold("replay", "no-replay", "test_b", 0, "a launch could not be replayed", ("test_b",))
GUIDES = "12345"
"""The student the instructor guide's review commands name: held like ada."""
SCORES = {"ada": (6.0, 2.0), "bob": (6.0, 4.0), "cy": (6.0, 0.0), GUIDES: (6.0, 2.0)}
HOLDS = {"ada": [SHELL], "cy": [REPLAYED], GUIDES: [SHELL]}
REASON = "The shell line only prints the GPU; the kernel is the student's."
SECTION = "Reviewing held grades"
"""The instructor guide's section whose block `test_the_guides_review_commands_run` runs."""


def url(root: Path) -> str:
    return f"sqlite:///{root / 'gradebook.db'}"


def graded_notebook(pass3: str = PASS3):
    """The graded notebook as autograde leaves it: pass3, test_a, test_b."""
    cells = []
    for grade_id, source, grade in (
        ("pass3", pass3, False),
        ("test_a", "expect_cases(strided_softmax)", True),
        ("test_b", "expect_hidden('strided_softmax')", True),
    ):
        cell = new_code_cell(source)
        cell.metadata["nbgrader"] = {"grade_id": grade_id, "grade": grade, "solution": not grade}
        cells.append(cell)
    return new_notebook(cells=cells)


def regrade(root: Path, student: str, holds: list[Hold]) -> None:
    """A grading as autograde runs it, up to the review step: the earlier one forgotten, the
    record begun for what submitted/ holds, the scores saved, the holds found."""
    forget_previous_grading(CourseDirectory(root=str(root)), ASSIGNMENT, student)
    log = GradingLog(root, ASSIGNMENT, student).begin()
    log.grading(submission_fingerprint(root / "submitted" / student / ASSIGNMENT))
    with Gradebook(url(root)) as gradebook:
        for cell, score in zip(("test_a", "test_b"), SCORES[student], strict=True):
            grade = gradebook.find_grade(cell, NOTEBOOK, ASSIGNMENT, student)
            grade.auto_score, grade.needs_manual_grade = score, False
        gradebook.db.commit()
    log.hold(holds)


def finish(root: Path, student: str) -> None:
    """The end of a grading: nbgrader's post-convert hook marks the record graded."""
    GradingLog(root, ASSIGNMENT, student).finish()


def keep_decisions(root: Path, student: str) -> None:
    """The autograde step that puts a decision in force back (after the scores are saved)."""
    resources = {
        "nbgrader": {
            "notebook": NOTEBOOK,
            "assignment": ASSIGNMENT,
            "student": student,
            "db_url": url(root),
        }
    }
    KeepReviewDecisions(config=config(root)).preprocess(graded_notebook(), resources)


def config(root: Path) -> Config:
    config = Config()
    config.CourseDirectory.root = str(root)
    config.AssignLatePenalties.plugin_class = DailyLatePenalty
    return config


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> Path:
    """The course: ada and 12345 held (8 of 10), bob graded (10), cy held (6: test_b not
    replayed)."""
    root = tmp_path_factory.mktemp("filled")
    (root / "nbgrader_config.py").write_text(
        'c = get_config()\nc.AssignLatePenalties.plugin_class = "grader.grading.late.'
        'DailyLatePenalty"\n'
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's add_submission trips SQLAlchemy warnings
        with Gradebook(url(root)) as gradebook:
            gradebook.add_assignment(ASSIGNMENT, duedate=parse_utc(DUE))
            gradebook.add_notebook(NOTEBOOK, ASSIGNMENT)
            gradebook.add_solution_cell("pass3", NOTEBOOK, ASSIGNMENT)
            for cell, points in (("test_a", 6), ("test_b", 4)):
                gradebook.add_grade_cell(
                    cell, NOTEBOOK, ASSIGNMENT, max_score=points, cell_type="code"
                )
            for student in SCORES:
                gradebook.add_student(student)
                gradebook.add_submission(ASSIGNMENT, student, timestamp=parse_utc(ON_TIME))
            gradebook.db.commit()
    for student in SCORES:
        submitted = root / "submitted" / student / ASSIGNMENT
        submitted.mkdir(parents=True)
        nbformat.write(graded_notebook(), submitted / f"{NOTEBOOK}.ipynb")
        (submitted / "timestamp.txt").write_text(ON_TIME + "\n")
        folder = root / "autograded" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(graded_notebook(), folder / f"{NOTEBOOK}.ipynb")
        regrade(root, student, HOLDS.get(student, []))
        finish(root, student)
    write_hints(
        root / "autograded" / "ada" / ASSIGNMENT / HINTS_SIDECAR,
        {
            "hidden:strided_softmax": {
                "passed": False,
                "status": "failed",
                "failed": ["a", "b"],
                "hints": ["padding"],
            }
        },
    )
    return root


@pytest.fixture
def root(filled, tmp_path) -> Path:
    """A copy of the filled course of its own (creating a gradebook takes seconds)."""
    return Path(shutil.copytree(filled, tmp_path / "course"))


def export(root: Path) -> dict[str, dict]:
    path = root / "grades.csv"
    export_config = config(root)
    export_config.ExportPlugin.to = str(path)
    with Gradebook(url(root)) as gradebook:
        StatusCsvExport(config=export_config).export(gradebook)
    with path.open(newline="") as fh:
        return {row["student_id"]: row for row in csv.DictReader(fh)}


def decide(root: Path, student: str, *args: str) -> tuple[int, str, str]:
    """`python -m grader.review` with these arguments: (exit status, stdout, stderr)."""
    done = run_main(review.main, (ASSIGNMENT, "--course", str(root), "--student", student, *args))
    return done.returncode, done.stdout, done.stderr


def feedback_note(root: Path, student: str) -> str:
    """The note ReviewNote puts first in the student's feedback ("" when none)."""
    resources = {"nbgrader": {"notebook": NOTEBOOK, "assignment": ASSIGNMENT, "student": student}}
    before = graded_notebook()
    nb, _ = ReviewNote(config=config(root)).preprocess(graded_notebook(), resources)
    return nb.cells[0].source if len(nb.cells) > len(before.cells) else ""


def gradebook_state(root: Path, student: str) -> tuple[float, str | None]:
    """(the submission's total, pass3's comment) in the gradebook."""
    with Gradebook(url(root)) as gradebook:
        total = gradebook.find_submission(ASSIGNMENT, student).score
        comment = gradebook.find_comment("pass3", NOTEBOOK, ASSIGNMENT, student).comment
        return float(total), comment


def test_a_held_grade_is_exported_as_review_with_its_points_apart(root):
    """Is a held grade's status `review`, its score columns empty (nothing released to the
    LMS), its computed score in held_score, and its hold's cell, line and rule in cause,
    while a grade that is not held is exported as before?"""
    rows = export(root)
    ada = rows["ada"]
    assert (ada["status"], ada["raw_score"], ada["score"], ada["held_score"]) == (
        "review",
        "",
        "",
        "8.0",
    )
    assert ada["cause"] == (
        "held for review: cell pass3, line 3: runs a shell command [shell-escape]: decide "
        f"with python -m grader.review {ASSIGNMENT} --student ada"
    )
    assert ada["review"] == "held: not decided yet"
    bob = rows["bob"]
    assert (bob["status"], bob["score"], bob["held_score"], bob["review"]) == (
        "graded",
        "10.0",
        "",
        "",
    )


def test_accepting_releases_the_computed_grade_unchanged(root):
    """Does --accept release the computed score as it is, saying what was decided and why
    in the export and in the student's feedback?"""
    code, out, _ = decide(root, "ada", "--accept", "--reason", REASON)
    assert code == 0
    assert out.startswith("ada: accepted as graded; 8 of 10 points released (computed 8).")
    ada = export(root)["ada"]
    assert (ada["status"], ada["raw_score"], ada["score"], ada["held_score"]) == (
        "graded",
        "8.0",
        "8.0",
        "",
    )
    assert ada["review"].startswith(f"reviewed: accepted as graded: {REASON} (decided ")
    assert feedback_note(root, "ada").startswith(f"**{REVIEWED}** Your instructor read")
    assert gradebook_state(root, "ada")[0] == 8.0


def test_a_penalty_is_released_with_its_reason_in_export_gradebook_and_feedback(root):
    """Does --penalty 3 release 8 - 3 points, nbgrader's own total included, with the reason
    in the export, in the gradebook's comment on the held cell, and in the feedback?"""
    code, out, _ = decide(root, "ada", "--penalty", "3", "--reason", "torch computed it")
    assert code == 0
    assert out.startswith("ada: a penalty of 3 points; 5 of 10 points released (computed 8).")
    ada = export(root)["ada"]
    assert (ada["status"], ada["raw_score"], ada["score"]) == ("graded", "5.0", "5.0")
    assert ada["review"].startswith("reviewed: a penalty of 3 points: torch computed it")
    total, comment = gradebook_state(root, "ada")
    assert total == 5.0
    assert comment == "Reviewed by your instructor: a penalty of 3 points. torch computed it"
    assert "decided a penalty of 3 points" in feedback_note(root, "ada")
    assert "torch computed it" in feedback_note(root, "ada")


def test_a_new_decision_replaces_the_last_one(root):
    """Decided twice on the same submission, does only the second count, points and
    comment?"""
    decide(root, "ada", "--penalty", "3", "--reason", "first")
    decide(root, "ada", "--penalty", "1", "--reason", "second")
    assert export(root)["ada"]["score"] == "7.0"
    assert gradebook_state(root, "ada") == (
        7.0,
        "Reviewed by your instructor: a penalty of 1 point. second",
    )


def test_a_regrade_of_the_unchanged_submission_keeps_the_decision(root):
    """After a regrade of the same submission (its scores and comments wiped, found again,
    the same hold found), does the decision's penalty and reason come back?"""
    decide(root, "ada", "--penalty", "3", "--reason", "torch computed it")
    regrade(root, "ada", [SHELL])
    assert gradebook_state(root, "ada") == (8.0, None)  # what the wipe leaves
    keep_decisions(root, "ada")
    finish(root, "ada")
    assert export(root)["ada"]["score"] == "5.0"
    assert gradebook_state(root, "ada")[1].endswith("torch computed it")
    assert (
        "review decision kept (the same submission)"
        in (root / "grading_log" / ASSIGNMENT / "ada.log").read_text()
    )


def test_a_changed_submission_clears_the_decision_and_is_held_again(root):
    """After a resubmission is graded and held again, is the old decision no longer in
    force (the computed score held, not released) and shown as made for an earlier one?"""
    decide(root, "ada", "--penalty", "3", "--reason", "torch computed it")
    submitted = root / "submitted" / "ada" / ASSIGNMENT / "timestamp.txt"
    submitted.write_text("2026-12-01 16:00:00 UTC\n")
    regrade(root, "ada", [SHELL])
    keep_decisions(root, "ada")
    finish(root, "ada")
    ada = export(root)["ada"]
    assert (ada["status"], ada["score"], ada["held_score"]) == ("review", "", "8.0")
    assert ada["review"].startswith(
        "decided for an earlier submission (a penalty of 3 points: torch computed it"
    )
    assert ada["review"].endswith("; held again")
    assert gradebook_state(root, "ada") == (8.0, None)
    assert UNDER_REVIEW in feedback_note(root, "ada")


def test_a_hold_the_decision_did_not_see_holds_the_grade_again(root):
    """When a regrade of the same submission finds a reason the reviewer never saw, is the
    grade held again rather than released on the old decision?"""
    decide(root, "ada", "--accept", "--reason", REASON)
    new = Hold("screen", "ctypes", "pass3", 2, "loads a C library")
    regrade(root, "ada", [SHELL, new])
    finish(root, "ada")
    review_now = review_of(root, ASSIGNMENT, "ada")
    assert review_now.held
    assert review_now.words().startswith("decided before the grading found a new reason")


def test_an_award_gives_back_what_an_unreplayed_launch_cost(root):
    """For a replay hold, does --award 4 give its cell (test_b, 0 of 4) its points back, and
    an award larger than the points lost get refused, saying what would fit?"""
    code, _, err = decide(root, "cy", "--award", "5", "--reason", "it ran on the GPU")
    assert code == 2
    assert "an award of 5 points is more than the held cells lost (4 points, in test_b)" in err
    assert decide(root, "cy", "--award", "4", "--reason", "it ran on the GPU")[0] == 0
    cy = export(root)["cy"]
    assert (cy["status"], cy["score"]) == ("graded", "10.0")
    with Gradebook(url(root)) as gradebook:
        test_b = gradebook.find_grade("test_b", NOTEBOOK, ASSIGNMENT, "cy")
        assert (test_b.auto_score, test_b.extra_credit, test_b.score) == (0.0, 4.0, 4.0)


@pytest.mark.parametrize(
    ("student", "args", "said"),
    [
        ("zed", ("--accept", "--reason", REASON), "no student 'zed' in the gradebook"),
        ("bob", ("--accept", "--reason", REASON), "bob's grade is not held: there is nothing"),
        ("ada", ("--penalty", "9", "--reason", REASON), "a penalty of 9 points is larger than"),
        ("ada", ("--accept",), "a decision needs --reason TEXT: the student reads it"),
        ("ada", ("--award", "1", "--reason", REASON), "--award is for cells a kernel launch"),
    ],
)
def test_a_bad_decision_is_refused_with_the_next_step(root, student, args, said):
    """Is an unknown student, a grade not held, a penalty larger than the score, a decision
    without a reason, and an award where no launch failed to replay each refused (exit 2),
    saying why, with nothing decided?"""
    code, _, err = decide(root, student, *args)
    assert code == 2
    assert err.startswith(f"review: {said}"), err
    assert not (root / "reviews").exists()
    assert export(root)["ada"]["status"] == "review"


def test_the_list_shows_each_held_grade_with_its_evidence(root):
    """Does the list show each held grade's computed points, its line in context (control
    characters visible), each cell's score, the hints and the commands that decide?"""
    notebook = root / "autograded" / "ada" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    nbformat.write(graded_notebook(PASS3.replace("import torch", "import torch\x1b[2K")), notebook)
    done = run_main(review.main, (ASSIGNMENT, "--course", str(root)))
    assert done.returncode == 0
    ada = done.stdout.split("\n\n")[0].splitlines()
    assert ada[:6] == [
        "ada: held for review, 8 of 10 points computed, not released",
        "  hold 1 (screen; cells test_a): cell pass3, line 3: runs a shell command [shell-escape]",
        "      1 | def strided_softmax(x):",
        "      2 |     import torch\\x1b[2K",
        "    > 3 |     !nvidia-smi",
        "      4 |     return y",
    ]
    assert ada[6] == "  values' verdicts (gradebook): test_a 6/6, test_b 2/4"
    assert ada[7:9] == [
        "  hints (i1_hints.json):",
        "    hidden:strided_softmax: failed, 2 cases failed [padding]",
    ]
    assert ada[9].startswith(f"  decide: python -m grader.review {ASSIGNMENT} --course ")
    assert ada[9].endswith("--student ada --accept --reason TEXT")
    assert "cy: held for review, 6 of 10 points computed" in done.stdout
    assert "bob" not in done.stdout
    assert done.stdout.rstrip().endswith("3 grades held for review, not released")


def test_the_student_reads_why_the_grade_is_held_as_plain_text(root):
    """Does the feedback say the grade is under review, with the cell, the line and the
    hold's words, and show student text in a hold as text (no HTML, no escape codes)?"""
    odd = Hold("screen", "shell-escape", "#7", 2, "runs `<b>rm</b>` \x1b[31m", ())
    regrade(root, "ada", [odd])
    finish(root, "ada")
    note = feedback_note(root, "ada")
    assert note.startswith(f"**{UNDER_REVIEW}** Your notebook was graded")
    assert (
        "- In the 7th cell of your graded notebook, line 2: runs \\`&lt;b&gt;rm&lt;/b&gt;\\`"
        in (note)
    )
    assert "\x1b" not in note and "\\\\x1b\\[31m" in note
    assert feedback_note(root, "bob") == ""


def test_the_cohort_report_lists_held_grades_first(root):
    """Does the report's summary start with the held grades, each with its rule and line,
    tell a reviewed grade apart, and leave held grades out of the score as exported?"""
    decide(root, "cy", "--award", "4", "--reason", "it ran on the GPU")
    report = cohort.build_report(root, ASSIGNMENT)
    lines = cohort.summary_lines(report)
    assert lines[0] == (
        f"Held for review, not released: 2 (decide with python -m grader.review {ASSIGNMENT})."
    )
    hold = "cell pass3, line 3: runs a shell command [shell-escape]"
    assert lines[1:3] == [
        f"Held: {GUIDES} (8 points computed): {hold}.",
        f"Held: ada (8 points computed): {hold}.",
    ]
    assert any(line.startswith("Reviewed: cy: an award of 4 points: it ran") for line in lines)
    scores = cohort._scores_html(report.table, report.cohort.students)
    assert "held for review" in scores


def review_commands() -> list[str]:
    """The command lines of the instructor guide's review section (tests/test_docs.py counts
    them as run here)."""
    return doc("instructor-guide.md").section(SECTION).commands()


def test_the_guides_review_commands_run(root):
    """Do the review commands the instructor guide shows run as written, from the course
    folder, on a held grade: the list, the evidence, a decision, another that replaces it?"""
    commands = review_commands()
    assert [c.split()[:3] for c in commands] == [["python", "-m", "grader.review"]] * len(commands)
    for command in commands:
        done = run_main(review.main, tuple(shlex.split(command)[3:]), cwd=root)
        assert done.returncode == 0, done.stderr
    assert not review_of(root, ASSIGNMENT, GUIDES).held


def test_the_recheck_confirms_what_the_grading_computed_not_the_review(root):
    """After a penalty, does the recheck compare the gradebook's scores less the review's
    points, so that a decision is no disagreement?"""
    decide(root, "ada", "--penalty", "3", "--reason", "torch computed it")
    scores = course.cell_scores(root)
    assert {s.cell: s.score for s in scores if s.student == "ada"} == {"test_a": 3.0, "test_b": 2.0}
    before = recheck.before_review(root, scores)
    assert {s.cell: s.score for s in before if s.student == "ada"} == {"test_a": 6.0, "test_b": 2.0}


@pytest.mark.nbgrader
def test_nbgrader_regrades_a_decided_submission_and_keeps_the_decision(shared_course, tmp_path):
    """In a copy of the shared course: the solution held and given a penalty of 3, then
    regraded by `nbgrader autograde` itself (its earlier grading wiped first): are the 3 points
    taken again, and the reason in the feedback nbgrader writes?"""
    root = Path(shutil.copytree(shared_course.root, tmp_path / "course"))
    held = Hold("screen", "shell-escape", "pass3", 1, "runs a shell command", ("hidden_pass3",))
    GradingLog(root, ASSIGNMENT, "solution").hold([held])
    computed = sum(s.score or 0.0 for s in course.cell_scores(root) if s.student == "solution")
    assert decide(root, "solution", "--penalty", "3", "--reason", "torch computed it")[0] == 0
    run = course.autograde(root, "--student", "solution")
    assert run.failed == ()
    after = sum(s.score or 0.0 for s in course.cell_scores(root) if s.student == "solution")
    assert after == pytest.approx(computed - 3)
    course.nbgrader(root, "generate_feedback", ASSIGNMENT, "--student", "solution", "--force")
    page = (root / "feedback" / "solution" / ASSIGNMENT / f"{NOTEBOOK}.html").read_text()
    assert REVIEWED in page and "torch computed it" in page
