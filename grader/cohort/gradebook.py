"""Reading nbgrader's gradebook: the assignment's graded cells, in notebook order, and every
roster student's grades, lateness and grading outcome."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import nbformat
from tqdm import tqdm

from grader.cohort.cell_keys import calls_function, sidecar_keys
from grader.cohort.records import (
    EXTRA,
    NOT_GRADABLE,
    OPTIONAL,
    CellGrade,
    CellInfo,
    CohortError,
    StudentRecord,
)
from grader.grading.extra_credit import configured_points
from grader.outcome import NOT_GRADED, UNGRADABLE, read_outcome
from grader.student_order import student_key
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
        cells = [
            cell
            for nb in found.notebooks
            for cell in _cells(nb, extra, headings(Path(course), assignment, nb.name))
        ]
        late = _late_plugin(Path(course))
        released = {nb.name: _release_checksums(nb) for nb in found.notebooks}
        uploads = not_gradable(Path(course), assignment)
        students = [
            _student_record(gradebook, course, assignment, student, late, released, uploads)
            for student in progress(gradebook.students, "reading the gradebook")
        ]
    listed = {record.student for record in students}
    students += [
        StudentRecord(s, False, False, False, None, not_gradable=why)
        for s, why in uploads.items()
        if s not in listed
    ]
    students.sort(key=lambda s: student_key(s.student))
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


def headings(course: Path, assignment: str, notebook: str) -> dict[str, str]:
    """{grade id: the heading (`#` or `##`) above its cell} in the course's source notebook,
    else its release; {} when neither is readable."""
    for folder in ("source", "release"):
        try:
            nb = nbformat.read(course / folder / assignment / f"{notebook}.ipynb", as_version=4)
        except (OSError, ValueError):
            continue
        found, heading = {}, ""
        for cell in nb.cells:
            first = cell.source.lstrip().split("\n", 1)[0] if cell.source.strip() else ""
            if cell.cell_type == "markdown" and first.startswith(("# ", "## ")):
                heading = first.lstrip("#").strip()
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id:
                found[grade_id] = heading
        return found
    return {}


def _cells(notebook, extra: dict[str, float], sections: dict[str, str]) -> list[CellInfo]:
    """A notebook's grade cells in notebook order, each with its kind, sidecar keys and
    section (`sections`: grade id -> heading); an extra-credit cell (0 points, `extra` gives
    its credit) counts its credit as its points, and another 0-point test cell is optional
    (it scores 0 of 0 whatever it did)."""
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
                sections.get(cell.name, ""),
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


def _student_record(
    gradebook,
    course: Path,
    assignment: str,
    roster,
    late,
    released: dict[str, dict[str, str]],
    uploads: dict[str, str],
) -> StudentRecord:
    from nbgrader.api import MissingEntry

    student = roster.id
    name = " ".join(part for part in (roster.first_name, roster.last_name) if part)
    folder = Path(course) / "autograded" / student / assignment
    submitted_folder = (Path(course) / "submitted" / student / assignment).is_dir()
    try:
        submission = gradebook.find_submission(assignment, student)
    except MissingEntry:
        why = uploads.get(student, "")
        return StudentRecord(
            student, False, False, submitted_folder, None, name=name, not_gradable=why
        )
    notebooks = [nb.name for nb in submission.notebooks]
    outcome = read_outcome(course, assignment, student, folder, notebooks)
    status, cause, graded = outcome.status, outcome.cause, outcome.record
    if status == NOT_GRADED:  # resubmitted since graded: the gradebook's grades are not its
        return StudentRecord(student, False, False, submitted_folder, None, name=name)
    from grader.grading.late import notebook_penalty

    review = _review(course, graded, status)
    seconds_late = float(submission.total_seconds_late)
    autograded = any((folder / f"{nb}.ipynb").is_file() for nb in notebooks)
    return StudentRecord(
        student,
        True,
        autograded,
        submitted_folder,
        seconds_late,
        _grades(submission),
        name=name,
        blank=autograded and status != UNGRADABLE and is_blank(folder, released),
        ungradable=cause if status == UNGRADABLE else "",
        restored=tuple(graded.restored) if graded else (),
        flags=tuple(graded.flags) if graded else (),
        unreadable=_unreadable(course, outcome.unreadable),
        no_gpu=bool(graded and graded.timed_without_gpu) and status != UNGRADABLE,
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


def _release_checksums(notebook) -> dict[str, str]:
    """{grade id: nbgrader's checksum of the released cell} of a notebook's answer cells."""
    answers = {cell.name for cell in notebook.solution_cells}
    return {c.name: c.checksum for c in notebook.source_cells if c.name in answers and c.checksum}


def is_blank(folder: Path, released: dict[str, dict[str, str]]) -> bool:
    """Whether every answer cell of the autograded notebooks in `folder` is the release's,
    unchanged: nothing written. nbgrader's own test (`compute_checksum` against the checksum
    it stored at generate_assignment; it scores an unchanged hand-graded answer 0 by it), and
    the cheapest sound one: one notebook read, no rerun; a single answer written is not blank.
    An answer cell the student deleted is put back as released before grading, so it counts
    as unchanged."""
    from nbgrader.utils import compute_checksum

    checked = 0
    for notebook, checksums in released.items():
        try:
            nb = nbformat.read(folder / f"{notebook}.ipynb", as_version=4)
        except (OSError, ValueError):
            return False
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in checksums:
                if compute_checksum(cell) != checksums[grade_id]:
                    return False
                checked += 1
    return checked > 0


def not_gradable(course: Path, assignment: str) -> dict[str, str]:
    """{student: which upload is no notebook, and the fix} (`grader.uploads.not_gradable`,
    NOT_GRADABLE taken off); CohortError for a corrupt record, saying how to rewrite it."""
    from grader import uploads

    try:
        found = uploads.not_gradable(course, assignment)
    except ValueError as exc:
        raise CohortError(
            f"{exc}: run python -m grader.collect {assignment} to rewrite it"
        ) from None
    return {student: why.removeprefix(f"{NOT_GRADABLE}: ") for student, why in found.items()}


def _unreadable(course: Path, error) -> tuple[str, ...]:
    """The student's note of a grading record that could not be read, "FILE: reason", as
    of a bad sidecar (`StudentRecord.unreadable`); () when it was read."""
    if error is None:
        return ()
    return (f"{error.path.relative_to(course)}: {error.reason}",)


def _review(course: Path, graded, status: str):
    """Where the review of a graded submission's grade stands (`grader.grading.decisions`);
    an ungradable one, or one without a record, has none."""
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
