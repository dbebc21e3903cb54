"""Submissions are regular files: a submission folder holding anything else is refused
before nbgrader copies a byte of it.

nbgrader's autograde follows symlinks: it globs the notebooks, copies every other file of
`submitted/<student>/<assignment>/` into `autograded/` (and from there into `feedback/`) with
`shutil.copy`, and reads `timestamp.txt`. A symlink to the course secret, the gradebook or
another student's notebook is copied or graded as the student's own work; a FIFO named
`timestamp.txt` blocks the whole run. So before nbgrader's first step on a submission
(`Autograde.init_destination`, which runs for every student of every `nbgrader autograde`,
also under `grader.parallel` and `grader.demo`) the folder is walked without following
anything, and a symlink, FIFO, socket or device anywhere in it (the notebook included, and
the folders themselves), or a file with a second name elsewhere (a hard link), makes the
student ungradable: the cause goes to their grading log, and nbgrader reports the student
failed and grades the others.
"""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path

from grader.grading.grading_log import GradingLog
from grader.terminal import visible

MAX_NAMED = 5
"""How many offending entries a cause names (the rest are counted)."""
_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class SubmissionRefused(Exception):
    """A submission folder holds something other than regular files and folders."""


def _kind(mode: int) -> str | None:
    """What a non-regular entry is ("a symbolic link"), or None for a file or folder."""
    return next((name for test, name in _KINDS if test(mode)), None)


def _described(path: Path, shown: str, info: os.stat_result) -> str | None:
    """Why the entry at `path` (named `shown`) is refused, or None when it is fine."""
    kind = _kind(info.st_mode)
    if kind == "a symbolic link":
        target = os.readlink(path)
        return f"{shown} is a symbolic link (to {target[:120]!r})"
    if kind:
        return f"{shown} is {kind}"
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        return f"{shown} is a hard link ({info.st_nlink} names for one file)"
    return None


def irregular_entries(folder: Path) -> list[str]:
    """Every entry of the submission `folder`, the folder and its parent (the student's
    folder) included, that is not a plain folder or a regular file with one name, each
    described ("strided_softmax.ipynb is a symbolic link (to '../other/x.ipynb')").
    Nothing is followed and no file is opened."""
    folder = Path(folder)
    found = []
    for path, shown in ((folder.parent, folder.parent.name + "/"), (folder, folder.name + "/")):
        problem = _described(path, shown, os.lstat(path))
        if problem:
            return [problem]  # a linked folder is not walked: its entries are not the student's
    pending = [folder]
    while pending:
        current = pending.pop()
        with os.scandir(current) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                info = entry.stat(follow_symlinks=False)
                shown = str(Path(entry.path).relative_to(folder))
                problem = _described(Path(entry.path), shown, info)
                if problem:
                    found.append(problem)
                elif stat.S_ISDIR(info.st_mode):
                    pending.append(Path(entry.path))
    return found


def refusal(folder: Path) -> str | None:
    """The grading log's cause for refusing the submission `folder`, or None when it holds
    only regular files and folders."""
    try:
        found = irregular_entries(folder)
    except OSError as exc:  # a folder it cannot list is not graded either
        found = [f"{Path(exc.filename or folder).name} cannot be read ({exc.strerror})"]
    if not found:
        return None
    named = "; ".join(found[:MAX_NAMED])
    more = f"; and {len(found) - MAX_NAMED} more" if len(found) > MAX_NAMED else ""
    return (
        f"submission refused, not graded: {named}{more}. Only regular files are graded; "
        "ask the student to submit the notebook itself (a copy, not a link) and autograde "
        "them again"
    )


def refuse_irregular_submissions() -> None:
    """Make nbgrader's Autograde refuse, before it copies anything, every submission that
    `refusal` refuses: the student's grading log gets the cause and nbgrader fails that
    student alone. Called from the course's nbgrader_config.py; calling it again changes
    nothing."""
    from nbgrader.converters import Autograde

    original = Autograde.init_destination
    if getattr(original, "_refuses_irregular", False):
        return

    @functools.wraps(original)
    def init_destination(self, assignment_id: str, student_id: str) -> bool:
        excluded = (self.coursedir.student_id_exclude or "").split(",")
        if self._sanitizing and student_id not in excluded:  # submitted/<student>/<assignment>
            folder = Path(self._format_source(assignment_id, student_id))
            cause = refusal(folder)
            if cause:
                log = GradingLog(Path(self.coursedir.root), assignment_id, student_id).begin()
                log.cause(cause)
                self.log.error("%s: %s", visible(student_id), visible(cause))
                _record_submission(self.coursedir, assignment_id, student_id)
                raise SubmissionRefused(cause)
        return original(self, assignment_id, student_id)

    init_destination._refuses_irregular = True
    Autograde.init_destination = init_destination


def _record_submission(coursedir, assignment_id: str, student_id: str) -> None:
    """Put the student and an ungraded submission in the gradebook, as nbgrader's first
    step would (no file is read, not even timestamp.txt): the export then lists the student
    as ungradable with the cause from their grading log, not as never submitted."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        try:
            gradebook.find_assignment(assignment_id)
        except MissingEntry:  # nbgrader's own step says so, for every student
            return
        gradebook.update_or_create_student(student_id)
        gradebook.update_or_create_submission(assignment_id, student_id)


def refuses_irregular() -> bool:
    """Whether nbgrader's Autograde in this process refuses irregular submissions."""
    from nbgrader.converters import Autograde

    return getattr(Autograde.init_destination, "_refuses_irregular", False)
