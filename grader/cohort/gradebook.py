"""Reading nbgrader's gradebook: the assignment's graded cells, in notebook order, and every
roster student's grades, lateness and grading outcome."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tqdm import tqdm

from grader.cohort.cell_keys import calls_function, sidecar_keys
from grader.cohort.records import (
    EXTRA,
    OPTIONAL,
    CellGrade,
    CellInfo,
    CohortError,
    StudentRecord,
)
from grader.grading.extra_credit import configured_points
from grader.terminal import visible

PROGRESS_FROM = 50
"""Show a progress bar when a course has at least this many students."""


def load_gradebook(course: Path, assignment: str) -> tuple[list[CellInfo], list[StudentRecord]]:
    """Cells and per-student grades from nbgrader's gradebook, every roster student included."""
    url = _checked_gradebook(course, assignment)
    from nbgrader.api import MissingEntry  # slow to import, as is grader.course: only here

    from grader.gradebook import GradebookError, open_gradebook, shown_url

    try:
        opened = open_gradebook(url)
    except GradebookError as exc:
        raise CohortError(str(exc)) from None
    with opened as gradebook:
        try:
            found = gradebook.find_assignment(assignment)
        except MissingEntry:
            known = ", ".join(a.name for a in gradebook.assignments) or "none"
            raise CohortError(
                f"no assignment {assignment!r} in {shown_url(url)} (it has: {known}): check "
                f"the name, or run `nbgrader generate_assignment {assignment}` in {course} first"
            ) from None
        extra = configured_points(Path(course))
        cells = [cell for nb in found.notebooks for cell in _cells(nb, extra)]
        late = _late_plugin(Path(course))
        students = [
            _student_record(gradebook, course, assignment, student.id, late)
            for student in progress(gradebook.students, "reading the gradebook")
        ]
    students.sort(key=lambda s: s.student)
    return cells, students


def _checked_gradebook(course: Path, assignment: str) -> str:
    """The course's gradebook URL (`grader.gradebook.gradebook_url`: its CourseDirectory.db_url,
    which this course takes from I1_GRADEBOOK_URL, else its gradebook.db); CohortError
    saying what to run when its SQLite file is missing."""
    if not Path(course).is_dir():
        raise CohortError(
            f"no course folder at {course}: pass --course with an nbgrader course directory"
        )
    from grader.gradebook import gradebook_url, sqlite_file

    try:
        url = gradebook_url(Path(course))
    except Exception as exc:  # the course's nbgrader_config.py does not run
        raise CohortError(f"cannot read {Path(course) / 'nbgrader_config.py'}: {exc}") from None
    path = sqlite_file(url)
    if path is not None and not path.is_file():
        raise CohortError(
            f"no gradebook at {path}: run `nbgrader generate_assignment {assignment}` and "
            f"`nbgrader autograde {assignment}` in {course} first"
        )
    return url


def _late_plugin(course: Path):
    """The course's late policy, as autograde and the export apply it
    (`grader.grading.late.course_late_plugin`); nbgrader's own, which deducts nothing, for a
    folder without an nbgrader_config.py."""
    from nbgrader.plugins import LateSubmissionPlugin

    from grader.grading.late import course_late_plugin

    if not (course / "nbgrader_config.py").is_file():
        return LateSubmissionPlugin()
    try:
        return course_late_plugin(course)
    except Exception as exc:  # the course's nbgrader_config.py names a plugin that fails
        raise CohortError(f"cannot load the late policy of {course}: {exc}") from None


def _cells(notebook, extra: dict[str, float]) -> list[CellInfo]:
    """A notebook's grade cells in notebook order, each with its kind and sidecar keys; an
    extra-credit cell (0 points, `extra` gives its credit) counts its credit as its points,
    and another 0-point test cell is optional (it scores 0 of 0 whatever it did)."""
    sources = {cell.name: cell.source or "" for cell in notebook.source_cells}
    order = {name: i for i, name in enumerate(sources)}
    manual = {cell.name for cell in notebook.solution_cells}
    cells = []
    for cell in sorted(notebook.grade_cells, key=lambda c: order.get(c.name, len(order))):
        source = sources.get(cell.name, "")
        cells.append(
            CellInfo(
                notebook.name,
                cell.name,
                float(cell.max_score or extra.get(cell.name, 0.0)),
                EXTRA if cell.name in extra and not cell.max_score else _kind(cell, source, manual),
                sidecar_keys(source),
                calls_function(source, "timing_points"),
            )
        )
    return cells


def _kind(cell, source: str, manual: set[str]) -> str:
    """manual (graded by hand), optional (0 points), hidden (has hidden tests) or public."""
    if cell.name in manual or cell.cell_type == "markdown":
        return "manual"
    if not cell.max_score:
        return OPTIONAL
    return "hidden" if "BEGIN HIDDEN TESTS" in source else "public"


def _student_record(gradebook, course: Path, assignment: str, student: str, late) -> StudentRecord:
    from nbgrader.api import MissingEntry

    folder = Path(course) / "autograded" / student / assignment
    submitted_folder = (Path(course) / "submitted" / student / assignment).is_dir()
    try:
        submission = gradebook.find_submission(assignment, student)
    except MissingEntry:
        return StudentRecord(student, False, False, submitted_folder, None)
    notebooks = [nb.name for nb in submission.notebooks]
    from grader.export import NOT_GRADED, UNGRADABLE, submission_outcome  # imports nbgrader
    from grader.grading.grading_log import read_record

    status, cause = submission_outcome(course, assignment, student, folder, notebooks)
    if status == NOT_GRADED:  # resubmitted since graded: the gradebook's grades are not its
        return StudentRecord(student, False, False, submitted_folder, None)
    from grader.grading.late import notebook_penalty

    graded = read_record(course, assignment, student)
    review = _review(course, graded, status)
    seconds_late = float(submission.total_seconds_late)
    return StudentRecord(
        student,
        True,
        any((folder / f"{name}.ipynb").is_file() for name in notebooks),
        submitted_folder,
        seconds_late,
        _grades(submission),
        ungradable=cause if status == UNGRADABLE else "",
        restored=tuple(graded.restored) if graded else (),
        flags=tuple(graded.flags) if graded else (),
        # as the export computes it: the policy on each notebook's current score
        late_penalty=None
        if status == UNGRADABLE
        else sum(
            notebook_penalty(late, student, float(nb.score), seconds_late)
            for nb in submission.notebooks
        ),
        held=review.held,
        holds=tuple(visible(str(hold)) for hold in review.holds),
        review=review.words(),
    )


def _review(course: Path, graded, status: str):
    """Where the review of a graded submission's grade stands (`grader.grading.decisions`);
    an ungradable one, or one without a record, has none."""
    from grader.export import UNGRADABLE
    from grader.grading.decisions import Review, review_of_record

    if graded is None or status == UNGRADABLE:
        return Review()
    return review_of_record(Path(course), graded)


def _grades(submission) -> dict[tuple[str, str], CellGrade]:
    """Each (notebook, cell)'s grade as the gradebook stores it."""
    return {
        (nb.name, grade.name): CellGrade(
            _float(grade.auto_score),
            _float(grade.manual_score),
            _float(grade.extra_credit),
            bool(grade.needs_manual_grade),
        )
        for nb in submission.notebooks
        for grade in nb.grades
    }


def _float(value) -> float | None:
    return None if value is None else float(value)


def progress(items: Iterable, what: str) -> list:
    """`items` as a list, with a progress bar when there are many students."""
    items = list(items)
    return list(tqdm(items, desc=what, unit="student", disable=len(items) < PROGRESS_FROM))
