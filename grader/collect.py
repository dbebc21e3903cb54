"""Collect the LMS's downloads into `submitted/`, every download in turn, newest winning, with
each submission's time taken from the LMS's own record of it.

    python -m grader.collect i1_strided_softmax [--course PATH] [--times FILE ...] [--no-times]
    python -m grader.collect i1_strided_softmax --take STUDENT FILE [--times FILE ...]

Why not `nbgrader zip_collect`: it stops on a second download ("Directory not empty"; with
`--force`, "Duplicate submission file. No timestamps for comparison") until the first is moved
away, and Canvas's file names carry no submission time, so late work went unpenalised
without a word. Here:

- Every download stays in `downloaded/<assignment>/archive/`; each is read in turn, oldest
  first, a later one replacing what an earlier one gave (`grader.downloads` says how).
- Every other file is accounted for (`grader.uploads`): one whose Canvas name gives its
  student (a `.py`, a renamed `strided_softmax (1).ipynb`, a `notes.txt`) is reported with
  the fix and kept in `downloaded/<assignment>/i1_uploads.json`, where the export and the
  cohort report read it for students with no submission; one without is reported as such.
  An upload older than the student's collected notebook is superseded and not reported.
- `--take STUDENT FILE` takes one such file (its name in a download) in as the student's
  submission: a notebook under another name is written as the release notebook, as is, with
  its LMS time and evidence, as collect writes any submission, and later runs keep it until a
  newer download brings a notebook; a file that is no notebook (a `.py`) is refused, since
  the autograder runs the notebook's cells: ask the student for the notebook.
- Submission times come from the LMS's submissions exports (`grader.lms_times`): every
  `.csv` and `.json` in `downloaded/<assignment>/times/`, and each `--times FILE`.
- A submission that is new or changed is written to `submitted/<student>/<assignment>/`
  with `timestamp.txt` and its evidence (`grader.collected`); unchanged ones are not touched,
  so `grader.parallel --changed` grades exactly the new and resubmitted work.
- When the assignment has a due date and the late policy can deduct points
  (`grader.grading.late.policy_applies`), a new or changed submission without a time is
  refused, the whole run with it, before anything is written; `--no-times` collects anyway
  and says, per student, that lateness will not count. A late marker that disagrees with the
  time and the due date is reported.
- What it prints names students and files as the downloads name them, with every control
  character shown as its escape (`grader.terminal`).

Exit status: 0 collected, 2 refused or a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from grader import uploads
from grader.collected import EVIDENCE, Evidence, load_evidence
from grader.course_folder import add_course_option, not_a_course
from grader.downloads import (
    DownloadError,
    Found,
    Stray,
    downloads,
    find_notebooks,
    latest,
    read_member,
)
from grader.gradebook import GradebookError, gradebook_url, open_gradebook
from grader.grading.extensions import own_due_date, read_extensions
from grader.lms_times import LmsTime, TimesError, load_times, shown
from grader.terminal import visible
from grader.uploads import Upload
from learning.workshops.checking.sidecars import RecordError, RecordMissing


class CollectError(Exception):
    """Nothing was collected: the message says why and what to do."""


def course_config(root: Path):
    """The course's nbgrader configuration (its nbgrader_config.py)."""
    from traitlets.config.loader import PyFileConfigLoader

    problem = not_a_course(root)
    if problem:
        raise CollectError(problem)
    return PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()


@dataclass
class Collected:
    """What one collect run did, student by student."""

    new: list[str]
    resubmitted: list[str]
    unchanged: list[str]
    untimed: list[str]  # written without a submission time (--no-times)
    lines: list[str]
    uploads: list[Upload] = field(default_factory=list)  # files named for a student, not taken

    @property
    def changed(self) -> list[str]:
        return sorted(self.new + self.resubmitted)


def _due_date(root: Path, assignment: str) -> datetime | None:
    """The assignment's due date in the course's gradebook (naive UTC), or None."""
    from nbgrader.api import MissingEntry

    try:
        with open_gradebook(gradebook_url(root)) as gradebook:
            return gradebook.find_assignment(assignment).duedate
    except MissingEntry:
        return None
    except GradebookError as exc:
        raise CollectError(str(exc)) from None


def _state(folder: Path, files: dict[str, bytes], stamp: str) -> bool:
    """Whether `folder` already holds exactly these notebooks and this timestamp.txt."""
    clock = folder / "timestamp.txt"
    old = clock.read_text().strip() if clock.is_file() else ""
    same = all((folder / n).is_file() and (folder / n).read_bytes() == d for n, d in files.items())
    return same and old == stamp


def _write(path: Path, data: bytes) -> None:
    part = path.with_name(f".{path.name}.part")
    part.write_bytes(data)
    part.replace(path)


@dataclass(frozen=True)
class _Take:
    """A submission to write: its files, its LMS time, and where it goes."""

    files: list[Found]
    when: LmsTime | None
    target: Path
    taken: str = ""  # why `--take` was needed; "" for a file collect matched

    @property
    def stamp(self) -> str:
        return shown(self.when.submitted_at) if self.when else ""


@dataclass(frozen=True)
class _Seen:
    """Every download of an assignment: the release notebooks, the downloads oldest first,
    each (student, notebook)'s latest file, and the files named for a student but no
    notebook."""

    root: Path
    assignment: str
    notebooks: set[str]
    order: list[str]
    chosen: dict[tuple[str, str], Found]
    strays: list[Stray]
    unreadable: dict[str, str] = field(default_factory=dict)  # student -> the note on their
    # collect record, which could not be read

    def rank(self, download: str | None) -> int:
        """A download's place, oldest first; -1 for one no longer in the archive."""
        return self.order.index(download) if download in self.order else -1

    def folder(self, student: str) -> Path:
        return self.root / "submitted" / student / self.assignment

    def archive(self) -> Path:
        return self.root / "downloaded" / self.assignment / "archive"


def _read_downloads(root: Path, assignment: str, say) -> _Seen:
    """What every download of `assignment` holds; each file skipped is told to `say`."""
    pattern = course_config(root).FileNameCollectorPlugin.get("named_regexp")
    if not pattern:
        raise CollectError(
            "nbgrader_config.py sets no c.FileNameCollectorPlugin.named_regexp: give the "
            "LMS's file name pattern, with the groups student_id and file_id"
        )
    notebooks = {p.name for p in (root / "release" / assignment).glob("*.ipynb")}
    if not notebooks:
        raise CollectError(
            f"no release notebooks in {root / 'release' / assignment}: run "
            f"`nbgrader generate_assignment {assignment}` first"
        )
    archive = root / "downloaded" / assignment / "archive"
    files = downloads(archive)
    if not files:
        raise CollectError(f"no downloads in {archive}: save the LMS's zip there")
    strays: list[Stray] = []
    found = [f for d in files for f in find_notebooks(d, pattern, notebooks, say, strays.append)]
    order = [d.name for d in files]
    try:
        chosen = latest(found, order)
    except DownloadError as exc:
        raise CollectError(str(exc)) from None
    return _Seen(root, assignment, notebooks, order, chosen, strays)


def _taken(seen: _Seen, student: str) -> tuple[int, str]:
    """(the rank of the download `--take` took the student's submission from, the file's
    name), or (-1, "") when no `--take` made it, or its record cannot be read (noted in
    `seen`)."""
    try:
        evidence = load_evidence(seen.folder(student))
    except RecordMissing:
        return -1, ""
    except RecordError as exc:
        seen.unreadable[student] = (
            f"NOTE: {exc}: read as no --take; collect writes it again with the student's "
            "next submission, or --take the file in again"
        )
        return -1, ""
    if not evidence.taken or not evidence.files:
        return -1, ""
    download, file = evidence.files[0]
    return seen.rank(download), file


def _plan(seen: _Seen, lms: dict[str, LmsTime]) -> dict[str, _Take]:
    """The students whose submission differs from what `submitted/` holds, and what to write;
    a submission `--take` took from a download no older than the files found is kept."""
    plan = {}
    for student in sorted({s for s, _ in seen.chosen}):
        mine = [f for (s, _), f in seen.chosen.items() if s == student]
        take = _Take(mine, lms.get(student), seen.folder(student))
        if _taken(seen, student)[0] >= max(seen.rank(f.download) for f in mine):
            continue
        if not _state(take.target, {f.notebook: f.data for f in mine}, take.stamp):
            plan[student] = take
    return plan


def _uploads(seen: _Seen) -> list[Upload]:
    """The files named for a student that no submission supersedes: none older than the
    student's collected or taken notebook, nor the one taken; each file once, its latest."""
    since: dict[str, int] = {}
    for (student, _), found in seen.chosen.items():
        since[student] = max(since.get(student, -1), seen.rank(found.download))
    kept: dict[str, Stray] = {}
    for stray in seen.strays:
        rank, taken = _taken(seen, stray.student)
        if seen.rank(stray.download) >= max(since.get(stray.student, -1), rank):
            if stray.member != taken:
                kept[stray.member] = stray
    return [_upload(seen, stray) for stray in kept.values()]


def _upload(seen: _Seen, stray: Stray) -> Upload:
    uploaded = uploads.owner(stray.member)[1]
    why, takes_as = uploads.classify(uploaded, seen.notebooks)
    fix = uploads.fix(seen.assignment, stray.student, stray.member, takes_as, seen.notebooks)
    return Upload(stray.student, stray.download, stray.member, why, fix, takes_as)


def _upload_line(seen: _Seen, upload: Upload) -> str:
    """What collect says of an upload it did not take, by whether the student has a
    submission."""
    where = f"{upload.name} in {upload.download} ({upload.why})"
    if not seen.folder(upload.student).is_dir():
        return f"NOT GRADABLE AS IS: {upload.student}: {where}: {upload.fix}"
    also = f"NOTE: {upload.student} also uploaded {where}; their collected notebook stands"
    return also + (f"; if this file is their submission, {upload.fix}" if upload.takes_as else "")


def _refuse_untimed(untimed: list[str], plan: dict[str, _Take], due, times: Path) -> None:
    marked = [s for s in untimed if any(f.lms_late for f in plan[s].files)]
    late = f" ({', '.join(marked)} marked late by the LMS)" if marked else ""
    raise CollectError(
        f"no submission time for {len(untimed)} new or changed submission"
        f"{'s' * (len(untimed) != 1)}: {', '.join(untimed)}{late}. The due date is "
        f"{shown(due)} and late work loses points, but the LMS's file names carry no time: "
        f"save its submissions export in {times} "
        '(docs/instructor-guide.md, "Submission times") and collect '
        "again, or pass --no-times to collect without (late work then loses nothing). "
        "Nothing was collected."
    )


def _take(student: str, take: _Take) -> None:
    """Write one submission: its notebooks, timestamp.txt (or none) and the evidence."""
    take.target.mkdir(parents=True, exist_ok=True)
    for item in take.files:
        _write(take.target / item.notebook, item.data)
    if take.stamp:
        _write(take.target / "timestamp.txt", (take.stamp + "\n").encode())
    else:
        (take.target / "timestamp.txt").unlink(missing_ok=True)
    evidence = Evidence(
        files=tuple((f.download, f.member) for f in take.files),
        lms_late=any(f.lms_late for f in take.files),
        submitted_at=take.stamp or None,
        time_from=take.when.source if take.when else None,
        collected=shown(datetime.now(UTC).replace(tzinfo=None)),
        taken=take.taken or None,
    )
    _write(take.target / EVIDENCE, (json.dumps(evidence.to_json(), indent=2) + "\n").encode())


def _lms_times(root: Path, assignment: str, times) -> tuple[dict[str, LmsTime], Path]:
    """Each student's LMS time, from the times folder's exports and `times`; the folder."""
    folder = root / "downloaded" / assignment / "times"
    exports = sorted(p for p in folder.glob("*") if p.suffix.lower() in (".csv", ".json"))
    try:
        return load_times([*exports, *map(Path, times)]), folder
    except TimesError as exc:
        raise CollectError(str(exc)) from None


def _late_rule(root: Path, assignment: str) -> tuple[datetime | None, bool]:
    """The due date, and whether late work loses points under the course's policy."""
    from grader.grading.late import course_late_plugin, policy_applies

    due = _due_date(root, assignment)
    return due, due is not None and policy_applies(course_late_plugin(root))


def collect(
    root: Path, assignment: str, times: list[Path] = (), no_times: bool = False
) -> Collected:
    """Collect every download of `assignment` in the course at `root` (see the module's
    docstring); CollectError, with nothing written, when it cannot."""
    root = Path(root).resolve()
    skipped: list[str] = []
    seen = _read_downloads(root, assignment, skipped.append)
    lms, folder = _lms_times(root, assignment, times)
    due, applies = _late_rule(root, assignment)
    plan = _plan(seen, lms)
    untimed = [s for s, take in plan.items() if take.when is None]
    if untimed and applies and not no_times:
        _refuse_untimed(untimed, plan, due, folder)
    unchanged = sorted({s for s, _ in seen.chosen} - set(plan))
    report = Collected([], [], unchanged, untimed, skipped)
    for student, take in plan.items():
        (report.resubmitted if take.target.is_dir() else report.new).append(student)
        _take(student, take)
        report.lines += _notes(
            student, take.files, take.when, own_due_date(root, assignment, student, due), applies
        )
    report.uploads = _uploads(seen)
    uploads.write(root, assignment, report.uploads)
    report.lines += [_upload_line(seen, upload) for upload in report.uploads]
    report.lines += seen.unreadable.values()
    return report


def take(
    root: Path,
    assignment: str,
    student: str,
    file: str,
    times: list[Path] = (),
    no_times: bool = False,
) -> Collected:
    """Take `file` (its name in a download) in as the student's submission, with its LMS
    time (see the module's docstring); CollectError, with nothing written, when it cannot."""
    root = Path(root).resolve()
    seen = _read_downloads(root, assignment, lambda _: None)
    download, member = _named(seen, file)
    owner = uploads.owner(member)
    if owner is not None and owner[0] != student:
        raise CollectError(
            f"{member} is student {owner[0]}'s upload (its name says so), not {student}'s: "
            "check the student id. Nothing was taken."
        )
    name = owner[1] if owner else Path(member).name
    why, takes_as = uploads.classify(name, seen.notebooks)
    if not takes_as:
        fix = uploads.fix(assignment, student, member, takes_as, seen.notebooks)
        raise CollectError(
            f"{name} is {why}, and the autograder runs the notebook's own cells, so it "
            f"{fix}. Nothing was taken."
        )
    lms, folder = _lms_times(root, assignment, times)
    due, applies = _late_rule(root, assignment)
    try:
        data = read_member(seen.archive() / download, member)
    except DownloadError as exc:
        raise CollectError(str(exc)) from None
    found = Found(student, takes_as, download, member, data, bool(owner and owner[2]))
    done = _Take([found], lms.get(student), seen.folder(student), why)
    if done.when is None and applies and not no_times:
        _refuse_untimed([student], {student: done}, due, folder)
    report = Collected([], [], [], [student] * (done.when is None), [])
    if _taken(seen, student)[1] == member and _state(done.target, {takes_as: data}, done.stamp):
        report.unchanged.append(student)
    else:
        (report.resubmitted if done.target.is_dir() else report.new).append(student)
        _take(student, done)
        report.lines.append(
            f"taken: {student}: {name} in {download} ({why}) as {takes_as}, submitted "
            f"{done.stamp or 'at no known time'}"
        )
        report.lines += _notes(
            student, done.files, done.when, own_due_date(root, assignment, student, due), applies
        )
    report.uploads = _uploads(seen)
    uploads.write(root, assignment, report.uploads)
    report.lines += seen.unreadable.values()
    return report


def _named(seen: _Seen, file: str) -> tuple[str, str]:
    """(download, member) of the latest download holding a file named `file` (its name in
    the download, or that name without Canvas's prefix); CollectError when none does."""
    for stray in sorted(seen.strays, key=lambda s: seen.rank(s.download), reverse=True):
        owner = uploads.owner(stray.member)
        if file in (stray.member, Path(stray.member).name, owner[1] if owner else None):
            return stray.download, stray.member
    for found in seen.chosen.values():
        if file in (found.member, Path(found.member).name):
            return found.download, found.member
    raise CollectError(
        f"no file named {file!r} in the downloads in {seen.archive()}: give its name as "
        "collect reported it. Nothing was taken."
    )


def _notes(student: str, mine: list[Found], when: LmsTime | None, due, applies: bool) -> list[str]:
    """What to tell the instructor about one collected submission's time and late marker."""
    marked = any(f.lms_late for f in mine)
    if when is None:
        if not applies:
            return []
        return [
            f"WARNING: {student} has no submission time"
            + (" (the LMS marked it late)" if marked else "")
            + ": a late penalty cannot apply to it"
        ]
    if due is None:
        return [f"{student}: the LMS marked it late, but the gradebook has no due date"] * marked
    late = when.submitted_at > due
    if marked == late:
        return []
    said = "late" if marked else "on time"
    return [
        f"NOTE: {student}: the LMS marked it {said}, but {shown(when.submitted_at)} is "
        f"{'after' if late else 'before'} the due date {shown(due)} (an extension, or another "
        "due date in the LMS?)"
    ]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m grader.collect",
        description=" ".join(__doc__.split("\n\n")[0].split()),
        epilog="A file named for a student but not as the notebook (a .py, a renamed "
        "notebook, notes.txt) is reported with its fix; --take takes a notebook under another "
        "name in. Exit status: 0 collected, 2 refused or a usage error.",
    )
    parser.add_argument("assignment", help="the assignment, e.g. i1_strided_softmax")
    add_course_option(parser)
    parser.add_argument(
        "--times",
        action="append",
        default=[],
        metavar="FILE",
        help="an LMS submissions export (.csv or .json) besides those in "
        "downloaded/ASSIGNMENT/times/ (repeatable)",
    )
    parser.add_argument(
        "--no-times",
        action="store_true",
        help="collect submissions that have no time even though late work loses points "
        "(their lateness then counts for nothing)",
    )
    parser.add_argument(
        "--take",
        nargs=2,
        metavar=("STUDENT", "FILE"),
        help="take FILE (its name in a download, as collect reported it) in as STUDENT's "
        "notebook, with the LMS's time for STUDENT, instead of collecting",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    course = Path(args.course)
    try:
        read_extensions(course)  # the notes on due dates read it: refused before writing
        if args.take:
            done = take(course, args.assignment, *args.take, args.times, args.no_times)
        else:
            done = collect(course, args.assignment, args.times, args.no_times)
    except (CollectError, OSError, RecordError, zipfile.BadZipFile) as exc:
        print(f"collect: {visible(exc)}", file=sys.stderr)
        return 2
    for line in done.lines:  # student ids and the names of files in the downloads
        print(visible(line))
    for what, who in (("new", done.new), ("resubmitted", done.resubmitted)):
        if who:
            print(visible(f"{what}: {', '.join(who)}"))
    print(f"unchanged: {len(done.unchanged)}")
    if done.changed:
        print(
            f"autograde the {len(done.changed)} new or resubmitted: python -m grader.parallel "
            f"{args.assignment} --course {args.course} --changed"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
