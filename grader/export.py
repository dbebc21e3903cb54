"""`nbgrader export` with a status per submission: ungradable is not zero.

nbgrader's own CSV gives 0.0 both to a student who submitted nothing and to one whose
notebook nbgrader could not grade (a dead kernel, a broken file, a timeout), so spreadsheet
means count them as failures, and it gives 0 to a cell nobody has graded by hand yet. This
exporter keeps nbgrader's columns and adds:

- `seconds_late`: past the due date (extensions included), from the gradebook;
- `status`: `graded`; `hand grading pending` (autograded, but a hand-graded cell has no
  grade yet: `not_graded_yet` names it, and the scores count only what is graded so far);
  `review` (graded, but held for an instructor's review, `grader.grading.decisions`: the
  grade is computed and kept, not released); `ungradable` (nbgrader has the submission but
  could not grade it); `not gradable as is` (nothing collected, but the LMS's download holds
  a file of theirs collect could not take: a `.py`, a renamed notebook, `grader.uploads`;
  such a student is listed even when not on the roster); `missing` (on the roster, nothing
  submitted); `not graded` (submitted, or resubmitted since it was graded, and not
  autograded since);
- `cause`: why an ungradable submission was not graded, from its grading record
  (`grader.grading.grading_log`; `grader.outcome`), else "no autograded notebook; see the
  autograde log", or that its grading record is unreadable, which file and why; why
  a held grade is held (each hold's cell, line, words and rule) and the command that
  decides; for a file not gradable as is, the file, why, and the command that takes it in;
  for the other statuses what the score still lacks (a hand grade, a submission time, the
  timing cell's points when grading ran without a GPU);
- `not_graded_yet`: the hand-graded cells still without a grade, with their points;
- `lms_late`: `yes` or `no` as the LMS marked the submission (Canvas's `late_`, kept by
  `grader.collect`), empty when unknown (an unreadable record of it is said in `cause`);
- `held_score`: a held grade's score (after the late penalty), the `score` it would release
  if accepted (empty unless the status is `review`);
- `review`: the review decision in force, with its reason ("reviewed: a penalty of 3 points:
  ..."), or why a held grade waits ("held: not decided yet", or a decision made for an earlier
  submission, "held again").

`raw_score`, `late_submission_penalty` and `score` are empty unless the status is `graded`
or `hand grading pending`, so totals and means leave the others out (a held grade until it
is decided; a decision's points are in the gradebook's scores, `grader.grading.released`).
The penalty is the configured late policy (`AssignLatePenalties.plugin_class`,
`grader.grading.late`) applied to each notebook's current score, as autograde applies it; a
manual grade added after autograde is penalised alike. Where a late policy applies and a
submission has no time, the log says so, loudly, and so does its `cause`.

Grading without a GPU: the timing cell finds no CUDA device and scores 0 (its grading record
says so, `GradingRecord.timed_without_gpu`). The export keeps nbgrader's score and
maximum, so what goes to the LMS is what the gradebook holds and one regrade on a GPU mends
it, rather than a maximum that differs by row; it says so at export time (how many students,
the points, the regrade command) and in each such row's `cause`.
Configured in `nbgrader_config.py` with `c.ExportApp.plugin_class`; run `nbgrader export`
(`--to FILE`, default `grades.csv`).
"""

from __future__ import annotations

import csv
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.coursedir import CourseDirectory
from nbgrader.plugins import CsvExportPlugin

from grader.collected import EVIDENCE, load_evidence
from grader.grading.decisions import Review, review_of_record
from grader.grading.extensions import own_due_date, read_extensions
from grader.grading.grading_log import GradingRecord
from grader.grading.late import notebook_penalty, policy_applies
from grader.outcome import GRADED, MISSING, NOT_AUTOGRADED, NOT_GRADED, read_outcome
from grader.terminal import visible
from grader.uploads import not_gradable
from learning.workshops.checking.sidecars import RecordError, RecordMissing

NBGRADER_COLUMNS = (
    "assignment",
    "duedate",
    "timestamp",
    "student_id",
    "last_name",
    "first_name",
    "email",
    "raw_score",
    "late_submission_penalty",
    "score",
    "max_score",
)
"""nbgrader's CsvExportPlugin columns, in its order."""
COLUMNS = (
    *NBGRADER_COLUMNS,
    "seconds_late",
    "status",
    "cause",
    "not_graded_yet",
    "lms_late",
    "held_score",
    "review",
)

HAND_PENDING = "hand grading pending"
NOT_GRADABLE_AS_IS = "not gradable as is"
REVIEW = "review"
DECIDE = "decide with python -m grader.review ASSIGNMENT --student STUDENT"
NO_GPU = "graded without a GPU (the timing cell found no CUDA device)"
REGRADE_ON_GPU = "python -m grader.parallel ASSIGNMENT --course . --student STUDENT"
NO_TIME = (
    "no submission time, so no late penalty could apply: collect with the LMS's times "
    '(docs/instructor-guide.md, "Submission times")'
)


def _number(value: float) -> str:
    return str(round(float(value), 6))


def _text(value: object) -> str:
    return "" if value is None else str(value)


class _Unlisted:
    """A student not on the gradebook's roster, known only by the id in their upload."""

    def __init__(self, student_id: str):
        self.id = student_id
        self.last_name = self.first_name = self.email = None


class StatusCsvExport(CsvExportPlugin):
    """nbgrader's CSV export plus seconds_late, status and cause; no score unless graded."""

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "grades.csv"
        students = {str(s) for s in self.student}
        assignments = {str(a) for a in self.assignment}
        self.log.info("Exporting grades with a status per submission to %s", dest)
        if assignments:
            self.log.info("Exporting only assignments: %s", sorted(assignments))
        if students:
            self.log.info("Exporting only students: %s", sorted(students))
        coursedir = self._coursedir()
        late = self._late_plugin()
        try:  # every student's due date reads it: no grades.csv with the wrong ones
            read_extensions(Path(coursedir.root))
        except RecordError as exc:
            self.log.error("%s: fix it or remove it, then export again", exc)
            raise SystemExit(1) from None
        rows = []
        with open(dest, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
            writer.writeheader()
            for assignment in gradebook.assignments:
                if assignments and assignment.name not in assignments:
                    continue
                uploads = self._not_gradable(Path(coursedir.root), assignment.name)
                listed = {student.id for student in gradebook.students}
                unlisted = [_Unlisted(s) for s in sorted(set(uploads) - listed)]
                for student in [*gradebook.students, *unlisted]:
                    if students and student.id not in students:
                        continue
                    rows.append(self.row(gradebook, coursedir, late, assignment, student, uploads))
                    writer.writerow(rows[-1])
        self._warn(rows)

    def _not_gradable(self, root: Path, assignment: str) -> dict[str, str]:
        """`grader.uploads.not_gradable`; a corrupt record is said in one line, and its
        students are then "missing" until collect rewrites it."""
        try:
            return not_gradable(root, assignment)
        except ValueError as exc:
            self.log.error("%s: run python -m grader.collect %s to rewrite it", exc, assignment)
            return {}

    def _warn(self, rows: list[dict]) -> None:
        """Say, loudly, which scores are not final: hand grades to come, times missing (the
        students' ids with their control characters as escapes, `grader.terminal`)."""
        pending = [visible(r["student_id"]) for r in rows if r["status"] == HAND_PENDING]
        if pending:
            self.log.warning(
                "%d submission(s) still have cells to grade by hand, so their scores count "
                "only what is graded so far (status %r): %s",
                len(pending),
                HAND_PENDING,
                ", ".join(pending),
            )
        held = [visible(r["student_id"]) for r in rows if r["status"] == REVIEW]
        if held:
            self.log.warning(
                "%d grade(s) held for review and not released (status %r, the computed score "
                "in held_score): %s. Decide with python -m grader.review, then export again.",
                len(held),
                REVIEW,
                ", ".join(held),
            )
        as_is = [visible(r["student_id"]) for r in rows if r["status"] == NOT_GRADABLE_AS_IS]
        if as_is:
            self.log.warning(
                "%d student(s) submitted only files not gradable as is (status %r, the file "
                "and the fix in cause): %s. Take a renamed notebook in with python -m "
                "grader.collect ASSIGNMENT --take STUDENT FILE; ask for the notebook otherwise.",
                len(as_is),
                NOT_GRADABLE_AS_IS,
                ", ".join(as_is),
            )
        self._warn_no_gpu(rows)
        untimed = [visible(r["student_id"]) for r in rows if NO_TIME in r["cause"]]
        if untimed:
            self.log.warning(
                "NO SUBMISSION TIME for %d submission(s) under a late policy: lateness cannot "
                "count for %s. Collect with the LMS's submission times and autograde again.",
                len(untimed),
                ", ".join(untimed),
            )

    def _warn_no_gpu(self, rows: list[dict]) -> None:
        """Say how many students lost the timing cell's points to grading without a GPU, and
        the command that regrades them on one."""
        for assignment in dict.fromkeys(r["assignment"] for r in rows):
            lost = [r for r in rows if r["assignment"] == assignment and NO_GPU in r["cause"]]
            if not lost:
                continue
            points = sum(self._timing[assignment].values())
            whom = " ".join(f"--student {visible(r['student_id'])}" for r in lost)
            command = REGRADE_ON_GPU.replace("ASSIGNMENT", assignment)
            self.log.warning(
                "%d student(s) got 0 of the timing cell's %g points because grading ran "
                "without a GPU (no CUDA device): %s. Regrade them on a GPU machine: %s "
                "(or the whole cohort: %s), then export again.",
                len(lost),
                points,
                ", ".join(visible(r["student_id"]) for r in lost),
                command.replace("--student STUDENT", whom),
                command.replace(" --student STUDENT", ""),
            )

    def _timing_cells(self, assignment) -> dict[tuple[str, str], float]:
        """{(notebook, cell): points} of the assignment's timing cells (those that call
        `timing_points`), from the gradebook's source cells; cached per assignment."""
        from grader.cohort.cell_keys import calls_function

        cache = self.__dict__.setdefault("_timing", {})
        if assignment.name not in cache:
            cache[assignment.name] = {
                (notebook.name, cell.name): float(cell.max_score or 0)
                for notebook in assignment.notebooks
                for cell in notebook.grade_cells
                if calls_function(_source(notebook, cell.name), "timing_points")
            }
        return cache[assignment.name]

    def _no_gpu(self, record: GradingRecord | None, assignment, student: str, notebooks) -> str:
        """The cause's note when the student's grading `record` says the timing cell ran
        without a GPU; "" else."""
        timing = self._timing_cells(assignment)
        if not timing or record is None or not record.timed_without_gpu:
            return ""
        score = sum(
            float(grade.score or 0)
            for notebook in notebooks
            for grade in notebook.grades
            if (notebook.name, grade.name) in timing
        )
        command = REGRADE_ON_GPU.replace("ASSIGNMENT", assignment.name)
        return (
            f"{score:g} of the timing cell's {sum(timing.values()):g} points: {NO_GPU}; "
            f"regrade on a GPU machine: {command.replace('STUDENT', student)}"
        )

    def row(
        self,
        gradebook: Gradebook,
        coursedir: CourseDirectory,
        late,
        assignment,
        student,
        uploads: dict[str, str] | None = None,
    ):
        """The CSV row of one student and assignment, as a dict of strings; `uploads` (from
        `grader.uploads.not_gradable`) tells "not gradable as is" from "missing"."""
        row = dict.fromkeys(COLUMNS, "")
        row.update(
            assignment=assignment.name,
            duedate=_text(
                own_due_date(Path(coursedir.root), assignment.name, student.id, assignment.duedate)
            ),
            student_id=student.id,
            last_name=_text(student.last_name),
            first_name=_text(student.first_name),
            email=_text(student.email),
            max_score=_number(assignment.max_score),
        )
        try:
            submission = gradebook.find_submission(assignment.name, student.id)
        except MissingEntry:
            submitted = coursedir.format_path(
                coursedir.submitted_directory, student.id, assignment.name
            )
            if Path(submitted).is_dir():
                row.update(status=NOT_GRADED, cause=NOT_AUTOGRADED)
            elif student.id in (uploads or {}):
                row.update(status=NOT_GRADABLE_AS_IS, cause=uploads[student.id])
            else:
                row.update(status=MISSING)
            return row
        seconds_late = float(submission.total_seconds_late)
        row.update(
            duedate=_text(submission.duedate),
            timestamp=_text(submission.timestamp),
            seconds_late=_number(seconds_late),
        )
        folder = coursedir.format_path(coursedir.autograded_directory, student.id, assignment.name)
        notebooks = list(submission.notebooks)
        root = Path(coursedir.root)
        names = [n.name for n in notebooks]
        outcome = read_outcome(root, assignment.name, student.id, Path(folder), names)
        lms_late, unknown = _lms_late(coursedir, assignment, student)
        cause = "; ".join(filter(None, [outcome.cause, *unknown]))
        row.update(status=outcome.status, cause=cause, lms_late=lms_late)
        if outcome.status != GRADED:
            return row
        notes = []
        waiting = not_graded_yet(notebooks)
        if waiting:
            row.update(status=HAND_PENDING, not_graded_yet="; ".join(waiting))
            notes.append(f"{'; '.join(waiting)} not graded yet: grade it by hand, then export")
        if submission.timestamp is None and assignment.duedate and policy_applies(late):
            notes.append(NO_TIME)
        no_gpu = self._no_gpu(outcome.record, assignment, student.id, notebooks)
        if no_gpu:
            notes.append(no_gpu)
        notes += unknown
        row["cause"] = "; ".join(notes)
        raw = float(submission.score)
        penalty = sum(
            notebook_penalty(late, student.id, float(n.score), seconds_late) for n in notebooks
        )
        scores = {
            "raw_score": _number(raw),
            "late_submission_penalty": _number(penalty),
            "score": _number(max(0.0, raw - penalty)),
        }
        record = outcome.record
        review = review_of_record(root, record) if record else Review()
        row["review"] = review.words()
        if review.held:
            cause = held_cause(review, assignment.name, student.id)
            row.update(status=REVIEW, cause="; ".join([cause, *notes]), held_score=scores["score"])
            return row
        row.update(scores)
        return row

    def _coursedir(self) -> CourseDirectory:
        """The export app's course directory (or one from the config, outside the app)."""
        coursedir = getattr(self.parent, "coursedir", None)
        return coursedir if coursedir is not None else CourseDirectory(parent=self)

    def _late_plugin(self):
        """The late-submission plugin autograde uses (`AssignLatePenalties.plugin_class`)."""
        from nbgrader.preprocessors import AssignLatePenalties

        return AssignLatePenalties(parent=self).plugin_class(parent=self)


def held_cause(review: Review, assignment: str, student: str) -> str:
    """Why a grade is held: each hold's cell, line, words and rule (student text made
    visible, never acted on), and the command that decides."""
    holds = "; ".join(visible(str(hold)) for hold in review.holds)
    decide = DECIDE.replace("ASSIGNMENT", assignment).replace("STUDENT", student)
    return f"held for review: {holds}: {decide}"


def not_graded_yet(notebooks) -> list[str]:
    """The cells of a submission's `notebooks` (nbgrader's) that no one and nothing has
    graded yet, each with its points: after an autograde, the hand-graded ones."""
    return [
        f"{grade.name} ({float(grade.max_score):g} points)"
        for notebook in notebooks
        for grade in notebook.grades
        if grade.auto_score is None and grade.manual_score is None
    ]


def _source(notebook, cell: str) -> str:
    """A cell's source as the gradebook keeps it (nbgrader's), "" when it keeps none."""
    return next((c.source or "" for c in notebook.source_cells if c.name == cell), "")


def _lms_late(coursedir: CourseDirectory, assignment, student) -> tuple[str, list[str]]:
    """("yes" or "no" as the LMS marked the submission late (`grader.collect`), "" unknown),
    and a note for the cause when collect's record of it is unreadable."""
    folder = coursedir.format_path(coursedir.submitted_directory, student.id, assignment.name)
    try:
        evidence = load_evidence(Path(folder))
    except RecordMissing:
        return "", []
    except RecordError as exc:
        return "", [f"lms_late unknown: {EVIDENCE} unreadable ({exc})"]
    return ("yes" if evidence.lms_late else "no"), []
