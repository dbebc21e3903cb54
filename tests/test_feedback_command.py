"""`python -m grader.feedback`: what an ungradable or resubmitted student reads, and which pages
the bundle holds, on a gradebook filled through nbgrader's API (no autograde; the graded case
is in tests/test_instructor_workflow.py), from a course folder outside the repository."""

from __future__ import annotations

import json
import warnings
import zipfile
from types import SimpleNamespace

import nbformat
from in_process import run_main
from nbgrader.api import Gradebook
from nbgrader.utils import parse_utc

from grader import feedback
from grader.course import ASSIGNMENT, NOTEBOOK
from grader.grading.execute import failure_cause, killing_cell
from grader.grading.grading_log import GradingLog
from grader.sample_cohort import ON_TIME
from learning.workshops.checking.notebook_runner import DEAD_KERNEL

PAGE = NOTEBOOK.replace(".ipynb", ".html")


def test_ungradable_and_resubmitted_students_read_no_old_feedback(tmp_path, capsys):
    """Does a student whose submission is not JSON get one page saying it could not be
    graded and why, with no score; does a resubmission not autograded yet lose its old
    feedback and get none, named with exit status 1?"""
    root = tmp_path
    (root / "nbgrader_config.py").write_text("c = get_config()\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's add_submission trips SQLAlchemy warnings
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
            gradebook.add_assignment(ASSIGNMENT)
            gradebook.add_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT)
            for student in ("broken", "again"):
                gradebook.add_student(student)
                gradebook.add_submission(ASSIGNMENT, student, timestamp=parse_utc(ON_TIME))
    GradingLog(root, ASSIGNMENT, "broken").begin().cause(
        "invalid notebook strided_softmax.ipynb: Notebook does not appear to be JSON: 'hi'"
    )
    GradingLog(root, ASSIGNMENT, "again").begin().finish()
    again = root / "submitted" / "again" / ASSIGNMENT
    again.mkdir(parents=True)
    (again / NOTEBOOK).write_text("{}")  # not what the record graded
    old = root / "feedback" / "again" / ASSIGNMENT
    old.mkdir(parents=True)
    (old / PAGE).write_text("Score: 20 / 20")
    assert feedback.main([ASSIGNMENT, "--course", str(root)]) == 1
    said = capsys.readouterr()
    assert "could not be graded, told so: broken" in said.out
    assert "RESUBMITTED since graded, no feedback until autograded: again" in said.err
    assert not old.exists()
    page = (root / "feedback" / "broken" / ASSIGNMENT / PAGE).read_text()
    assert "your submission could not be graded" in page and "Score" not in page
    assert "the file is not a notebook Jupyter can open (Notebook does not appear" in page
    assert "Submitted: 2026-12-01 12:00:00" in page


def test_the_reason_a_student_reads_names_no_grader_internals():
    """Is each cause put in a student's words, and an unknown one in none of the grader's?"""
    reason = feedback.student_reason
    assert reason("dead kernel: the student's code killed the kernel (after 3 s)").startswith(
        "running it stopped the kernel"
    )
    assert reason("timeout: the notebook was still running after 900 s").startswith("it was")
    assert reason("internal error: grading the hidden cells failed: grader/x.py") == (
        "grading it failed"
    )
    page = feedback.ungradable_page("strided_softmax", "", "internal error: /course/secret")
    assert "/course/" not in page and "time unknown" in page


def test_student_ids_print_as_escapes(tmp_path, capsys):
    """Does the command name an ungradable student whose id carries an escape sequence
    (the window's title) with it shown as escapes, on the instructor's terminal?"""
    root, student = tmp_path, "mallory\x1b]0;all graded\x07"
    (root / "nbgrader_config.py").write_text("c = get_config()\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's add_submission trips SQLAlchemy warnings
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
            gradebook.add_assignment(ASSIGNMENT)
            gradebook.add_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT)
            gradebook.add_student(student)
            gradebook.add_submission(ASSIGNMENT, student, timestamp=parse_utc(ON_TIME))
    GradingLog(root, ASSIGNMENT, student).begin().cause("timeout: still running after 900 s")
    assert feedback.main([ASSIGNMENT, "--course", str(root)]) == 0
    out = capsys.readouterr().out
    assert "could not be graded, told so: mallory\\x1b]0;all graded\\x07\n" in out


def _course_with(root, causes: dict[str, str]) -> None:
    """A course at `root` whose gradebook holds a submission of each student in `causes`,
    each ungradable for its cause (no autograde, no nbgrader run)."""
    (root / "nbgrader_config.py").write_text("c = get_config()\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's add_submission trips SQLAlchemy warnings
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
            gradebook.add_assignment(ASSIGNMENT)
            gradebook.add_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT)
            for student in causes:
                gradebook.add_student(student)
                gradebook.add_submission(ASSIGNMENT, student, timestamp=parse_utc(ON_TIME))
    for student, cause in causes.items():
        GradingLog(root, ASSIGNMENT, student).begin().cause(cause)


def _died_in(cells: list[tuple[str | None, str]], dies: int) -> str:
    """The grading record's cause for a notebook of `cells` (grade id, source) whose kernel
    died in cell `dies`, as the sandboxed execution writes it."""
    notebook = nbformat.v4.new_notebook()
    for index, (grade_id, source) in enumerate(cells):
        cell = nbformat.v4.new_code_cell(source)
        if grade_id:
            cell.metadata["nbgrader"] = {"grade_id": grade_id}
        if index >= dies:
            cell.outputs = [nbformat.v4.new_output("error", **DEAD_KERNEL)]
        notebook.cells.append(cell)
    why = f"the student's code killed the kernel {killing_cell(notebook)}"
    return failure_cause(SimpleNamespace(timed_out=False, seconds=3.0), why)


def test_the_dead_kernel_page_names_the_cell(tmp_path):
    """Does a student whose kernel died read which cell it died in: a test cell by its
    number and grade id and none of its code (hidden tests), a cell of their own with its
    code; and a death no cell recorded with no cell named?"""
    cells = [
        (None, "import torch"),
        ("pass3", "def strided_softmax(x):\n    return x"),
        ("test_pass3", "check(strided_softmax)\n### BEGIN HIDDEN TESTS\nsecret_case()"),
        (None, "# mine\nx = torch.empty(2**40)"),
    ]
    causes = {
        "in-test": _died_in(cells, 2),
        "in-mine": _died_in(cells, 3),
        "no-cell": "dead kernel: no executed notebook (exit status 137) (after 3 s)",
    }
    _course_with(tmp_path, causes)
    assert run_main(feedback.main, (ASSIGNMENT,), cwd=tmp_path).returncode == 0
    pages = {s: (tmp_path / "feedback" / s / ASSIGNMENT / PAGE).read_text() for s in causes}
    assert "stopped the kernel in cell 3 of 4 (graded as test_pass3) before it" in pages["in-test"]
    assert "check(" not in pages["in-test"] and "secret_case" not in pages["in-test"]
    assert "no cell after it ran" in pages["in-test"]
    assert "in cell 4 of 4 (x = torch.empty(2**40)) before it finished" in pages["in-mine"]
    assert "stopped the kernel before it finished" in pages["no-cell"]
    assert "cell" not in feedback.student_reason(causes["no-cell"])


def test_a_cell_whose_code_names_the_grader_is_named_without_it():
    """Is a cell's code that names the grader's modules left out of what its student reads,
    the cell still named by its number?"""
    cause = _died_in([(None, "import grader.grading.hidden as h; h.crash()")], 0)
    assert feedback.where_it_died(cause) == " in cell 1 of 1"


def test_the_bundle_holds_only_pages_new_or_changed_since_the_last_run(tmp_path):
    """Run from the course folder twice over the same grades: does the first run bundle every
    page and the second none; after one student's page changes and another resubmits, does
    the third bundle that page alone and name the resubmitted student as withdrawn?"""
    _course_with(tmp_path, {"ann": "timeout: still running after 900 s", "bob": "timeout: x"})
    first = run_main(feedback.main, (ASSIGNMENT,), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    upload = "to upload: 2 student(s) with new or changed pages (ann, bob), 0 unchanged"
    assert upload in first.stdout
    assert "(no earlier feedback run recorded: every page is new)" in first.stdout
    bundles = tmp_path / "reports" / "feedback"
    (zip_path,) = bundles.glob("*.zip")
    with zipfile.ZipFile(zip_path) as bundle:
        assert sorted(bundle.namelist()) == ["MANIFEST.txt", f"ann/{PAGE}", f"bob/{PAGE}"]
    second = run_main(feedback.main, (ASSIGNMENT,), cwd=tmp_path)
    assert "no page changed since the last feedback run: nothing to upload\n" in second.stdout
    assert len(list(bundles.glob("*.zip"))) == 1

    GradingLog(tmp_path, ASSIGNMENT, "ann").begin().cause("invalid notebook x.ipynb: not JSON")
    GradingLog(tmp_path, ASSIGNMENT, "bob").begin().finish()  # then bob resubmits:
    again = tmp_path / "submitted" / "bob" / ASSIGNMENT
    again.mkdir(parents=True)
    (again / NOTEBOOK).write_text("{}")
    third = run_main(feedback.main, (ASSIGNMENT,), cwd=tmp_path)
    assert third.returncode == 1
    assert "to upload: 1 student(s) with new or changed pages (ann), 0 unchanged" in third.stdout
    assert "; withdrawn, no page now: bob" in third.stdout
    (newest,) = set(bundles.glob("*.zip")) - {zip_path}
    with zipfile.ZipFile(newest) as bundle:
        assert sorted(bundle.namelist()) == ["MANIFEST.txt", f"ann/{PAGE}"]
        assert "not a notebook Jupyter can open" in bundle.read(f"ann/{PAGE}").decode()
        assert bundle.read("MANIFEST.txt").decode().endswith("not autograded yet):\nbob\n")
    everything = run_main(feedback.main, (ASSIGNMENT, "--all"), cwd=tmp_path)
    assert "to upload: 1 student(s) with new or changed pages (ann)" in everything.stdout


def test_an_unreadable_record_bundles_every_page_and_says_why(tmp_path):
    """Does a feedback record that is not JSON count as no earlier run, in one line?"""
    _course_with(tmp_path, {"ann": "timeout: still running after 900 s"})
    record = tmp_path / "reports" / "feedback" / f"{ASSIGNMENT}.json"
    record.parent.mkdir(parents=True)
    record.write_text("{not json")
    said = run_main(feedback.main, (ASSIGNMENT,), cwd=tmp_path).stdout
    shown = record.relative_to(tmp_path)  # as given: the course is the folder it runs in
    said_why = f"({shown}: not JSON (Expecting property name enclosed in double quotes, line 1)"
    assert f"{said_why}: every page counts as new)\n" in said
    assert json.loads(record.read_text())["pages"]["ann"]
