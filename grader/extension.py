"""Grant a student an extension of an assignment's due date, list extensions, or remove one.

    python -m grader.extension i1_strided_softmax [--course PATH] --student S
                               --until "2026-12-18 17:00 UTC"
    python -m grader.extension i1_strided_softmax --student S --days 3
    python -m grader.extension i1_strided_softmax --student S --remove
    python -m grader.extension i1_strided_softmax --list

An extension is the student's own due date (`--until`, with its time zone, or `--days` after
the assignment's). It is kept in the course's `extensions.json` (`grader.grading.extensions`),
so that it holds for a student who has not submitted yet and through every regrade, and in the
gradebook's submission where there is one (`SubmittedAssignment.extension`), whose late penalty
is stored again at once (`grader.grading.late.refresh_penalties`). Autograde's late penalty and
`nbgrader export`'s `duedate`, `seconds_late` and penalty follow it. A second grant replaces
the first.

Exit status: 0 done, 2 refused or a usage error.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from datetime import datetime, timedelta
from pathlib import Path

from grader.course_folder import add_course_option, not_a_course
from grader.gradebook import GradebookError, add_gradebook_option, gradebook_url, open_gradebook
from grader.grading.extensions import Extension, read_extensions, shown, write_extensions
from grader.terminal import visible
from learning.workshops.checking.sidecars import RecordError

ZONE_EXAMPLE = '"2026-12-18 17:00 UTC" or 2026-12-18T17:00+01:00'
MAX_DAYS = 366
"""The longest extension --days grants (a year; NaN and infinity are refused with it)."""


class ExtensionError(Exception):
    """Nothing was changed: the message says why and what to do."""


def deadline_utc(text: str) -> datetime:
    """`text`, a date and time with its zone (a name, an offset, Z), as naive UTC (nbgrader's);
    ExtensionError when it is not one or has no zone (UTC would be a guess)."""
    import dateutil.tz

    when = _parsed(text)
    *rest, last = text.split() or [""]
    if rest and (when is None or when.tzinfo is None):  # a zone's name last: "... Europe/Berlin"
        zone, before = dateutil.tz.gettz(last), _parsed(" ".join(rest))
        if zone is not None and before is not None:
            when = before.replace(tzinfo=zone)
        elif when is None and before is not None:
            raise ExtensionError(
                f"--until {text!r}: {last!r} is no time zone: give one, e.g. {ZONE_EXAMPLE}"
            )
    if when is None:
        raise ExtensionError(f"--until {text!r} is not a date and time, e.g. {ZONE_EXAMPLE}")
    if when.tzinfo is None:
        raise ExtensionError(f"--until {text!r} has no time zone: give one, e.g. {ZONE_EXAMPLE}")
    return (when - when.utcoffset()).replace(tzinfo=None)


def _parsed(text: str) -> datetime | None:
    """`text` read by dateutil (a zone name it does not know left out), or None."""
    import dateutil.parser

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # dateutil warns of a zone name it does not know
            return dateutil.parser.parse(text)
    except (ValueError, OverflowError):
        return None


def _course_facts(gradebook, assignment: str, student: str | None) -> datetime:
    """The assignment's due date; ExtensionError when the assignment, its due date or the
    student (when given) is not in the gradebook."""
    from nbgrader.api import MissingEntry

    try:
        duedate = gradebook.find_assignment(assignment).duedate
    except MissingEntry:
        raise ExtensionError(
            f"no assignment {assignment} in the gradebook: add it with nbgrader db assignment "
            f'add {assignment} --duedate="2026-12-15 17:00:00 UTC"'
        ) from None
    if student is not None:
        try:
            gradebook.find_student(student)
        except MissingEntry:
            raise ExtensionError(
                f"{visible(student)} is not on the roster (the gradebook's students): check "
                "the id, or import the roster with nbgrader db student import roster.csv"
            ) from None
    if duedate is None:
        raise ExtensionError(
            f"{assignment} has no due date, so nothing is late and there is nothing to extend: "
            f'set one with nbgrader db assignment add {assignment} --duedate="... UTC"'
        )
    return duedate


def _penalty_after(gradebook, root: Path, assignment: str, student: str, past) -> str:
    """Give the student's submission, if the gradebook has one, the extension `past` and
    store its late penalty again; what that did, in words."""
    from nbgrader.api import MissingEntry

    from grader.grading.late import course_late_plugin, refresh_penalties

    try:
        submission = gradebook.find_submission(assignment, student)
    except MissingEntry:
        return "no submission yet: autograde applies it"
    before = float(submission.late_submission_penalty or 0.0)
    submission.extension = past
    refresh_penalties(submission, course_late_plugin(root))
    gradebook.db.commit()
    after = float(submission.late_submission_penalty or 0.0)
    late = f"{submission.total_seconds_late:.0f} s late"
    return f"their submission is {late}, late penalty {after:g} points (was {before:g})"


def grant(root: Path, url: str, assignment: str, student: str, until: str | None, days):
    """Grant `student` an extension until `until` (text with a zone) or `days` after the due
    date; the line that says what was done. ExtensionError if refused."""
    extensions = read_extensions(root)
    with open_gradebook(url) as gradebook:
        duedate = _course_facts(gradebook, assignment, student)
        if days is not None and not 0 < days < MAX_DAYS:
            raise ExtensionError(f"--days {days:g}: an extension is 0 to {MAX_DAYS} days")
        own = duedate + timedelta(days=days) if days is not None else deadline_utc(until)
        if own <= duedate:
            raise ExtensionError(
                f"--until {shown(own)} is not after the due date {shown(duedate)}: an extension "
                "ends later (to take one back: --remove)"
            )
        extension = Extension(assignment, student, own)
        others = [e for e in extensions if (e.assignment, e.student) != (assignment, student)]
        write_extensions(root, [*others, extension])
        done = _penalty_after(gradebook, root, assignment, student, extension.past(duedate))
    days_after = (own - duedate) / timedelta(days=1)
    return (
        f"{visible(student)} {assignment}: due {shown(own)} ({days_after:.3g} days after "
        f"{shown(duedate)}); {done}"
    )


def remove(root: Path, url: str, assignment: str, student: str) -> str:
    """Take back the student's extension; the line that says what was done."""
    extensions = read_extensions(root)
    with open_gradebook(url) as gradebook:
        duedate = _course_facts(gradebook, assignment, student)
        others = [e for e in extensions if (e.assignment, e.student) != (assignment, student)]
        if len(others) == len(extensions):
            return f"{visible(student)} {assignment}: no extension to remove"
        write_extensions(root, others)
        done = _penalty_after(gradebook, root, assignment, student, None)
    return f"{visible(student)} {assignment}: extension removed, due {shown(duedate)}; {done}"


def listing(root: Path, url: str, assignment: str) -> list[str]:
    """One line per extension of `assignment`, then how many."""
    extensions = [e for e in read_extensions(root) if e.assignment == assignment]
    with open_gradebook(url) as gradebook:
        duedate = _course_facts(gradebook, assignment, None)
    lines = []
    for extension in extensions:
        past = extension.past(duedate)
        after = (
            f"{past / timedelta(days=1):.3g} days after {shown(duedate)}"
            if past
            else f"not after {shown(duedate)}: extends nothing"
        )
        lines.append(f"{visible(extension.student)}: due {shown(extension.until)} ({after})")
    count = len(extensions)
    return [*lines, f"{count} extension{'s' * (count != 1)} of {assignment}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.extension",
        description=__doc__.splitlines()[0],
        epilog="Exit status: 0 done, 2 refused or a usage error.",
    )
    parser.add_argument("assignment", help="the assignment, e.g. i1_strided_softmax")
    add_course_option(parser)
    add_gradebook_option(parser)
    parser.add_argument("--student", help="the student (their id on the roster)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--until", help=f"the student's own due date, with its zone: {ZONE_EXAMPLE}")
    what.add_argument("--days", type=float, help="days after the assignment's due date")
    what.add_argument("--remove", action="store_true", help="take the student's extension back")
    what.add_argument("--list", action="store_true", help="list the assignment's extensions")
    args = parser.parse_args(argv)
    if not args.list and not args.student:
        parser.error("--student is needed with --until, --days and --remove")
    root = Path(args.course).resolve()
    problem = not_a_course(root)
    if problem:
        print(f"extension: {problem}", file=sys.stderr)
        return 2
    url = gradebook_url(root, args.db)
    try:
        if args.list:
            print("\n".join(listing(root, url, args.assignment)))
        elif args.remove:
            print(remove(root, url, args.assignment, args.student))
        else:
            print(grant(root, url, args.assignment, args.student, args.until, args.days))
    except (ExtensionError, GradebookError, RecordError) as exc:
        print(f"extension: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
