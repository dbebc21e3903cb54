"""Grades for the LMS as they are: a Canvas gradebook import, and a plain CSV for any other.

    python -m grader.lms i1_strided_softmax --canvas canvas_gradebook.csv --out canvas_import.csv
    python -m grader.lms i1_strided_softmax --plain grades_plain.csv
        [--course PATH] [--grades FILE] [--column NAME]

Both read `nbgrader export`'s `grades.csv` (`grader.export`; `--grades`, default the course's
`grades.csv`) and push a score only where its status is `graded`. Every other row (`review`,
`hand grading pending`, `not graded`, `ungradable`, `missing`, or any status the export adds)
is not final, and gets no score.

Canvas: download the gradebook (Grades > Export > Export Entire Gradebook). Its header is
`Student,ID,SIS User ID,SIS Login ID,[Integration ID,]Section,<Assignment> (<id>),...`, maybe
a "Points Possible" row and a "Manual Posting" row. `--out` gets that file's identity
columns, through `Section`, and the assignment's column alone, which Canvas's Import
(Grades > Import) matches by its id with no hand mapping: the column `--column` names (its
header, its title or its id), else the one whose title is the assignment's name (letters and
digits compared, case aside; none or several are refused, listing the columns). Each row's
`ID` is the Canvas user id, which is the course's student id (Canvas's file names,
`grader.collect`). A graded student's cell is their `score`; any other student's cell is left
as the download has it, so the import changes nothing for them. This is why: Canvas's
importer (`GradebookImporter`, `process_gradebook_upload.js`) ignores a blank cell where the
gradebook has no score, but a blank where it has one is a change, shown on the review page as
a removed grade and posted as an empty grade, which deletes it. So a held grade neither
pushes a 0 nor erases what is in Canvas. Those students, and graded ones Canvas's file lacks,
are listed on stderr. A "Points Possible" row is kept; one that differs from the course's
maximum is refused (scores would be read on the wrong scale), as is a read-only column.

Plain: `student_id,name,score,max_score,status`, a row per student of `grades.csv`, the name
from the roster, the score empty unless `graded`.

Exit status: 0 written (students not final listed on stderr), 2 refused or a usage error.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from grader.course_folder import add_course_option, not_a_course
from grader.terminal import visible

FINAL = "graded"
"""The one status of grades.csv whose score goes into the LMS."""
NEEDED = ("assignment", "student_id", "first_name", "last_name", "score", "max_score", "status")
"""The columns of grades.csv this command reads (`grader.export.COLUMNS`)."""
PLAIN_COLUMNS = ("student_id", "name", "score", "max_score", "status")
NOT_ASSIGNMENTS = re.compile(
    r"Current Score|Current Points|Current Grade|Final Score|Final Points|Final Grade|"
    r"Override Score|Override Grade|Override Status"
)
"""Canvas's computed columns (its importer's NON_ASSIGNMENT_COLUMN_HEADERS, "Unposted" ones
included): never an assignment's."""
TITLE_AND_ID = re.compile(r"\A(?P<title>.*)\s\((?P<id>\d+)\)\Z")
"""An assignment column's header as Canvas writes it: `<title> (<assignment id>)`."""
NOT_STUDENTS = re.compile(r"^\s*(Muted|Manual Posting.*)?\s*$", re.IGNORECASE)
"""A row whose every cell matches is Canvas's posting-policy row, which its importer skips."""
EXPORT_HINT = "download it from Canvas: Grades > Export > Export Entire Gradebook"


class LmsError(Exception):
    """A file this command cannot use; the message says which and what to do."""


@dataclass(frozen=True)
class Grade:
    """One student's row of grades.csv, as the LMS needs it."""

    student: str
    name: str
    score: str
    max_score: str
    status: str
    cause: str

    @property
    def final(self) -> bool:
        return self.status == FINAL


@dataclass
class CanvasImport:
    """What the Canvas import holds and leaves alone."""

    column: str
    rows: list[list[str]]
    names: dict[str, str] = field(default_factory=dict)  # Canvas's name of each id
    pushed: list[str] = field(default_factory=list)
    kept: list[tuple[Grade, str]] = field(default_factory=list)  # not final: Canvas's cell
    strangers: list[tuple[str, str]] = field(default_factory=list)  # (id, name) not in grades
    absent: list[Grade] = field(default_factory=list)  # graded, no row in Canvas's file


def read_grades(path: Path, assignment: str) -> dict[str, Grade]:
    """The rows of `assignment` in nbgrader export's grades.csv at `path`, by student id."""
    try:
        with Path(path).open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            lacking = [c for c in NEEDED if c not in (reader.fieldnames or [])]
            if lacking:
                raise LmsError(
                    f"{path} is not nbgrader export's grades.csv (no {', '.join(lacking)}): "
                    "run `nbgrader export` in the course folder"
                )
            rows = [r for r in reader if r["assignment"] == assignment]
    except FileNotFoundError:
        raise LmsError(f"no {path}: run `nbgrader export` in the course folder first") from None
    if not rows:
        raise LmsError(f"{path} has no row of {assignment}: run `nbgrader export` again")
    return {
        r["student_id"]: Grade(
            r["student_id"],
            " ".join(n for n in (r["first_name"], r["last_name"]) if n),
            r["score"] if r["status"] == FINAL else "",
            r["max_score"],
            r["status"],
            r.get("cause", ""),
        )
        for r in rows
    }


def write_plain(path: Path, grades: dict[str, Grade], lms_names: dict[str, str]) -> None:
    """The plain CSV: student_id, name (the roster's, else the LMS's), score (final ones
    only), max_score, status."""
    with Path(path).open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(PLAIN_COLUMNS)
        for g in grades.values():
            name = g.name or lms_names.get(g.student, "")
            writer.writerow([g.student, name, g.score, g.max_score, g.status])


def read_canvas(path: Path) -> list[list[str]]:
    """The rows of a Canvas gradebook download (comma or semicolon separated, as Canvas's
    importer reads either; a byte-order mark dropped)."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise LmsError(f"no {path}: {EXPORT_HINT}") from None
    except UnicodeDecodeError:
        raise LmsError(f"{path} is not UTF-8 text: {EXPORT_HINT}") from None
    first = text.splitlines()[0] if text.strip() else ""
    semicolons = len(next(csv.reader([first], delimiter=";"), []))
    delimiter = ";" if semicolons > len(next(csv.reader([first]), [])) else ","
    return [row for row in csv.reader(text.splitlines(), delimiter=delimiter) if any(row)]


def identity_width(header: list[str], path: Path) -> int:
    """How many columns, from the first through `Section`, name the student in Canvas's file."""
    named = len(header) > 3 and "Student" in header[0] and "ID" in header[1]
    if not named or "Section" not in header:
        raise LmsError(
            f"{path} is not a Canvas gradebook download (its header starts Student, ID, ..., "
            f"Section; this one: {visible(', '.join(header[:5]))}): {EXPORT_HINT}"
        )
    return header.index("Section") + 1


def _letters(text: str) -> str:
    return re.sub(r"[\W_]+", "", text).lower()


def choose_column(header: list[str], width: int, assignment: str, wanted: str | None) -> int:
    """The index of the assignment's column: the one `wanted` names (header, title or id),
    else the one whose title is `assignment`'s name. LmsError when none or several are."""
    columns = [(i, h) for i, h in enumerate(header) if i >= width and not NOT_ASSIGNMENTS.search(h)]

    def names(header_text: str) -> set[str]:
        found = TITLE_AND_ID.match(header_text)
        return {header_text, found["title"], found["id"]} if found else {header_text}

    if wanted is not None:
        matches = [i for i, h in columns if wanted.strip() in names(h)]
        how = f"named {wanted!r}"
    else:
        matches = [i for i, h in columns if _letters(assignment) in {_letters(n) for n in names(h)}]
        how = f"titled {assignment}"
    if len(matches) == 1:
        return matches[0]
    listed = "; ".join(repr(h) for _, h in columns) or "none"
    if matches:
        which = "; ".join(repr(header[i]) for i in matches)
        raise LmsError(f"several columns are {how}: {which}: pass --column with its id")
    raise LmsError(
        f"no assignment column of the Canvas file is {how}: pass --column NAME, one of: {listed}"
    )


def canvas_import(
    rows: list[list[str]], path: Path, assignment: str, grades: dict[str, Grade], column: str | None
) -> CanvasImport:
    """The import file's rows from Canvas's download `rows`, scores from `grades`."""
    header = rows[0]
    width = identity_width(header, path)
    index = choose_column(header, width, assignment, column)
    id_index = header.index("ID")
    result = CanvasImport(header[index], [header[:width] + [header[index]]])
    seen = set()
    for row in rows[1:]:
        row = row + [""] * (len(header) - len(row))
        if "Points Possible" in row[0]:
            _check_points(row[index], header[index], grades)
            result.rows.append(row[:width] + [row[index]])
            continue
        if all(NOT_STUDENTS.match(cell) for cell in row):
            continue
        student = row[id_index].strip()
        seen.add(student)
        result.names[student] = row[0].strip()
        grade = grades.get(student)
        if grade is None:
            result.strangers.append((student, row[0]))
            cell = row[index]
        elif grade.final:
            result.pushed.append(student)
            cell = grade.score
        else:
            result.kept.append((grade, row[index].strip()))
            cell = row[index]
        result.rows.append(row[:width] + [cell])
    result.absent = [g for s, g in grades.items() if g.final and s not in seen]
    return result


def _check_points(points: str, column: str, grades: dict[str, Grade]) -> None:
    """Refuse a read-only column, or points possible other than the course's maximum."""
    if "read only" in points.lower():
        raise LmsError(f"Canvas marks {column!r} read only: pass --column with the assignment's")
    maxima = {g.max_score for g in grades.values()}
    try:
        same = all(abs(float(points) - float(m)) < 1e-6 for m in maxima)
    except ValueError:
        same = not points.strip()
    if not same:
        raise LmsError(
            f"Canvas's points possible for {column!r} are {points}, the course's maximum is "
            f"{', '.join(sorted(maxima))}: set the assignment's points in Canvas to it and "
            "download the gradebook again"
        )


def write_rows(path: Path, rows: list[list[str]]) -> None:
    with Path(path).open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)


def report(done: CanvasImport, out: Path) -> tuple[str, list[str]]:
    """What the import holds (stdout) and what it leaves alone (stderr lines)."""
    said = f"{out}: {len(done.pushed)} score(s) into Canvas's column {done.column!r}"
    lines = []
    if done.kept:
        lines.append(f"not final here, left as Canvas has them ({len(done.kept)}):")
        lines += [
            f"  {visible(g.student)} {visible(g.name)}: {g.status} "
            f"(Canvas: {visible(cell) or 'blank'})"
            for g, cell in done.kept
        ]
    if done.strangers:
        ids = ", ".join(f"{visible(s)} ({visible(n)})" for s, n in done.strangers)
        lines.append(f"in Canvas, not in grades.csv, left as Canvas has them: {ids}")
    if done.absent:
        ids = ", ".join(visible(g.student) for g in done.absent)
        lines.append(f"graded, but no row in the Canvas file (not enrolled there?): {ids}")
    return said, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.lms",
        description=__doc__.splitlines()[0],
        epilog="Exit status: 0 written (students not final listed on stderr), 2 refused or a "
        "usage error.",
    )
    parser.add_argument("assignment", help="the assignment, e.g. i1_strided_softmax")
    add_course_option(parser)
    parser.add_argument("--grades", help="nbgrader export's CSV (default: the course's grades.csv)")
    parser.add_argument("--canvas", help="the gradebook downloaded from Canvas (Grades > Export)")
    parser.add_argument("--out", help="the Canvas import file to write (with --canvas)")
    parser.add_argument("--column", help="the Canvas column: its header, title or id")
    parser.add_argument("--plain", help="a plain CSV to write, for any LMS")
    args = parser.parse_args(argv)
    if not (args.canvas or args.plain) or bool(args.canvas) != bool(args.out):
        parser.error("give --canvas FILE with --out FILE, or --plain FILE, or both")
    problem = not_a_course(Path(args.course))
    if problem:
        print(f"lms: {problem}", file=sys.stderr)
        return 2
    try:
        grades = read_grades(Path(args.grades or Path(args.course) / "grades.csv"), args.assignment)
        done = None
        if args.canvas:
            rows = read_canvas(Path(args.canvas))
            if not rows:
                raise LmsError(f"{args.canvas} is empty: {EXPORT_HINT}")
            done = canvas_import(rows, Path(args.canvas), args.assignment, grades, args.column)
        if args.plain:
            write_plain(Path(args.plain), grades, done.names if done else {})
            final = sum(g.final for g in grades.values())
            print(f"{args.plain}: {final} score(s) of {len(grades)} students")
        if done is not None:
            write_rows(Path(args.out), done.rows)
            said, lines = report(done, Path(args.out))
            print(said)
            for line in lines:
                print(line, file=sys.stderr)
    except (LmsError, OSError) as exc:
        print(f"lms: {visible(exc)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
