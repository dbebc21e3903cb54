"""`python -m grader.lms`: grades.csv into a Canvas gradebook import and a plain CSV, as files,
run from a course folder outside the repository. The Canvas download is written as Canvas
writes one (a byte-order mark, a Points Possible row, a Manual Posting row, computed columns,
the test student); the import is checked against the rules Canvas's importer reads it by
(`GradebookImporter`: the header, the Section column, `<title> (<id>)`)."""

from __future__ import annotations

import csv
import re

from in_process import run_main

from grader import lms
from grader.course import ASSIGNMENT
from grader.export import COLUMNS

CANVAS = (
    "\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,I1: Strided softmax (88001),"
    "Quiz 1 (88002),Assignments Current Points,Current Score,Unposted Final Score\n"
    ",,,,,Manual Posting,,,,\n"
    "    Points Possible,,,,,20.00,5.00,(read only),(read only),(read only)\n"
    '"Doe, Jane",12345,s12345,jdoe,CS 101-1,,4.00,4.00,80.00,80.00\n'
    '"Roe, Bob",23456,s23456,broe,CS 101-1,15.00,5.00,20.00,80.00,80.00\n'
    '"Smith, Ann",34567,s34567,asmith,CS 101-2,,,0.00,,0.00\n'
    '"Kim, Lee",56789,s56789,lkim,CS 101-2,,5.00,5.00,100.00,100.00\n'
    '"Student, Test",99999,,,CS 101-1,,,,,\n'
)
"""Jane graded here, Bob held for review (Canvas has 15 from an earlier upload), Ann missing,
Lee waiting for a hand grade, the test student in Canvas alone."""
GRADES = {
    "12345": ("Jane", "Doe", "graded", "17.5"),
    "23456": ("Bob", "Roe", "review", ""),
    "34567": ("Ann", "Smith", "missing", ""),
    "45678": ("Li", "Wu", "graded", "12.0"),  # not enrolled in Canvas's course
    "56789": ("Lee", "Kim", "hand grading pending", "10.0"),  # a score, not final
}


def course(tmp_path, canvas: str = CANVAS):
    """A course folder with nbgrader export's grades.csv and a Canvas download in it."""
    root = tmp_path / "course"
    root.mkdir()
    (root / "nbgrader_config.py").write_text("c = get_config()\n")
    with (root / "grades.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        for student, (first, last, status, score) in GRADES.items():
            row = dict.fromkeys(COLUMNS, "")
            row.update(assignment=ASSIGNMENT, student_id=student, first_name=first)
            row.update(last_name=last, status=status, score=score, max_score="20.0")
            writer.writerow(row)
    (root / "canvas_gradebook.csv").write_text(canvas, encoding="utf-8")
    return root


def canvas_import(root, *extra: str):
    """Run the guide's line from the course folder; its result and the import's rows."""
    args = (ASSIGNMENT, "--canvas", "canvas_gradebook.csv", "--out", "canvas_import.csv", *extra)
    done = run_main(lms.main, args, cwd=root)
    path = root / "canvas_import.csv"
    rows = list(csv.reader(path.open(newline=""))) if path.exists() else []
    return done, rows


def test_the_canvas_import_carries_final_scores_and_changes_nothing_else(tmp_path):
    """Does the import hold Canvas's identity columns and the assignment's column alone, a
    graded student's score, and every other cell as Canvas has it (Bob's held grade keeps
    Canvas's 15, no 0, no blank that would erase it), each one listed with its status?"""
    done, rows = canvas_import(course(tmp_path))
    assert done.returncode == 0, done.stderr
    assert rows == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "I1: Strided softmax (88001)"],
        ["    Points Possible", "", "", "", "", "20.00"],
        ["Doe, Jane", "12345", "s12345", "jdoe", "CS 101-1", "17.5"],
        ["Roe, Bob", "23456", "s23456", "broe", "CS 101-1", "15.00"],
        ["Smith, Ann", "34567", "s34567", "asmith", "CS 101-2", ""],
        ["Kim, Lee", "56789", "s56789", "lkim", "CS 101-2", ""],
        ["Student, Test", "99999", "", "", "CS 101-1", ""],
    ]
    assert done.stdout == (
        "canvas_import.csv: 1 score(s) into Canvas's column 'I1: Strided softmax (88001)'\n"
    )
    assert done.stderr.splitlines() == [
        "not final here, left as Canvas has them (3):",
        "  23456 Bob Roe: review (Canvas: 15.00)",
        "  34567 Ann Smith: missing (Canvas: blank)",
        "  56789 Lee Kim: hand grading pending (Canvas: blank)",
        "in Canvas, not in grades.csv, left as Canvas has them: 99999 (Student, Test)",
        "graded, but no row in the Canvas file (not enrolled there?): 45678",
    ]


def test_canvas_reads_the_import_as_its_own_export(tmp_path):
    """Would Canvas's importer take the file with no hand mapping: a header starting
    Student, ID, with Section last of the student columns, and one assignment column
    `<title> (<id>)` naming the downloaded assignment's id?"""
    header = canvas_import(course(tmp_path))[1][0]
    assert "Student" in header[0] and "ID" in header[1] and "Section" in header[-2]
    title = re.fullmatch(r"(.*)\s\((\d+)\)", header[-1])
    assert title and title[2] == "88001"


def test_the_plain_csv_has_a_score_only_where_it_is_final(tmp_path):
    """Does the plain CSV give every student of grades.csv, named, with a score only where
    the status is graded (Lee's score so far is not final)?"""
    root = course(tmp_path)
    done = run_main(lms.main, (ASSIGNMENT, "--plain", "plain.csv"), cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "plain.csv: 2 score(s) of 5 students\n"
    assert list(csv.reader((root / "plain.csv").open(newline=""))) == [
        ["student_id", "name", "score", "max_score", "status"],
        ["12345", "Jane Doe", "17.5", "20.0", "graded"],
        ["23456", "Bob Roe", "", "20.0", "review"],
        ["34567", "Ann Smith", "", "20.0", "missing"],
        ["45678", "Li Wu", "12.0", "20.0", "graded"],
        ["56789", "Lee Kim", "", "20.0", "hand grading pending"],
    ]


def test_the_column_is_chosen_or_the_choice_refused_in_one_line(tmp_path):
    """With two columns titled as the assignment, is the import refused in one line naming
    both, and written once --column names one by its id? Is a name no column has refused,
    listing the assignment columns and none of Canvas's computed ones?"""
    twice = CANVAS.replace("Quiz 1 (88002)", "i1_strided_softmax (88003)")
    root = course(tmp_path, twice)
    done, rows = canvas_import(root)
    assert done.returncode == 2 and rows == []
    assert done.stderr == (
        "lms: several columns are titled i1_strided_softmax: 'I1: Strided softmax (88001)'; "
        "'i1_strided_softmax (88003)': pass --column with its id\n"
    )
    done, rows = canvas_import(root, "--column", "88001")
    assert done.returncode == 0 and rows[0][-1] == "I1: Strided softmax (88001)"
    done, _ = canvas_import(root, "--column", "Homework 9")
    assert done.stderr == (
        "lms: no assignment column of the Canvas file is named 'Homework 9': pass --column "
        "NAME, one of: 'I1: Strided softmax (88001)'; 'i1_strided_softmax (88003)'\n"
    )


def test_points_possible_on_another_scale_are_refused(tmp_path):
    """Is a Canvas assignment worth 100 points refused, with the fix, rather than given
    scores out of 20?"""
    root = course(tmp_path, CANVAS.replace(",20.00,5.00,", ",100.00,5.00,"))
    done, rows = canvas_import(root)
    assert (done.returncode, rows) == (2, [])
    assert done.stderr == (
        "lms: Canvas's points possible for 'I1: Strided softmax (88001)' are 100.00, the "
        "course's maximum is 20.0: set the assignment's points in Canvas to it and download "
        "the gradebook again\n"
    )


def test_files_that_are_not_what_they_should_be_are_refused_in_one_line(tmp_path):
    """Is a file that is not Canvas's download, a missing grades.csv, and a folder that is
    no course each refused in one line that says what to do?"""
    root = course(tmp_path, "id,score\n12345,3\n")
    done, _ = canvas_import(root)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert "is not a Canvas gradebook download" in done.stderr
    assert done.stderr.endswith("Grades > Export > Export Entire Gradebook\n")
    (root / "grades.csv").unlink()
    done, _ = canvas_import(root)
    assert done.stderr == "lms: no grades.csv: run `nbgrader export` in the course folder first\n"
    done = run_main(lms.main, (ASSIGNMENT, "--plain", "p.csv"), cwd=tmp_path)
    assert done.returncode == 2 and "is not a course" in done.stderr
