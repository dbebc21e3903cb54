"""The cohort report names each student and tells their standing apart (issue 50): names from
the roster beside the ids, a held grade apart from a blank notebook, an upload that is no
notebook as "submitted, not gradable as is", the optional sections counted per section, the
command that regrades on a GPU, and every label of every plot inside its figure.

The course is built through nbgrader's API and written files (no autograde) in a folder
outside the repository, and `python -m grader.cohort` runs in it."""

from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import nbformat
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from nbgrader.api import Gradebook
from nbgrader.utils import compute_checksum, parse_utc
from test_cohort_timing import SIDECARS

from grader import cohort, uploads
from grader.cohort.figures import PLOTS
from grader.cohort.summary import regrade_command
from grader.grading import timing_record
from grader.sample_cohort import DUE
from learning.workshops.measuring.results import H200_SAMPLE
from learning.workshops.measuring.results import load as load_results

A = "i1_strided_softmax"
NB = "strided_softmax"
IN_PLACE = "2. Optional, for extra credit: softmax in place"
BACKWARD = "3. Optional, for extra credit: the backward pass"
ROSTER = {  # id: (first, last, what they wrote: answer cells changed, scores)
    "12345": ("Jane", "Doe", {"answer", "inplace"}, {"test_a": 1.0, "hidden_inplace": 1.0}),
    "9": (None, None, {"answer"}, {"test_a": 0.0}),
    "blank1": ("Bo", "Blank", set(), {}),
    "101": ("Cy", "Tried", {"answer", "inplace", "backward"}, {"test_a": 1.0}),
}
UPLOAD = uploads.Upload(
    "777",
    "submissions.zip",
    "pyfan_777_4242_strided_softmax.py",
    "a .py file, not the notebook",
    "cannot be autograded: ask the student to upload strided_softmax.ipynb, then collect again",
)


def _cell(source: str, grade_id: str, points: float | None = None, markdown: bool = False):
    cell = new_markdown_cell(source) if markdown else new_code_cell(source)
    cell.metadata["nbgrader"] = {
        "grade": points is not None,
        "solution": points is None,
        "locked": points is not None,
        "grade_id": grade_id,
        "schema_version": 3,
        **({"points": points} if points is not None else {}),
    }
    return cell


def release():
    """The release notebook: one required section, two optional ones with extra credit."""
    return new_notebook(
        cells=[
            new_markdown_cell("# I1. Softmax"),
            new_markdown_cell("## 1. Work out the addresses"),
            _cell("# YOUR CODE HERE\nraise NotImplementedError()", "answer"),
            _cell("assert True", "test_a", 1),
            new_markdown_cell(f"## {IN_PLACE}"),
            _cell("# YOUR CODE HERE\nraise NotImplementedError()", "inplace"),
            _cell("assert True", "test_inplace", 0),
            _cell("assert True", "hidden_inplace", 0),
            new_markdown_cell(f"## {BACKWARD}"),
            _cell("# YOUR CODE HERE\nraise NotImplementedError()", "backward"),
            _cell("assert True", "hidden_backward", 0),
        ]
    )


def _gradebook(root: Path) -> None:
    released = release()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's add_submission trips SQLAlchemy warnings
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
            gradebook.add_assignment(A, duedate=parse_utc(DUE))
            gradebook.add_notebook(NB, A)
            for cell in released.cells:
                meta = cell.metadata.get("nbgrader")
                if not meta:
                    continue
                name = meta["grade_id"]
                if meta["grade"]:
                    gradebook.add_grade_cell(
                        name, NB, A, max_score=meta["points"], cell_type="code"
                    )
                else:
                    gradebook.add_solution_cell(name, NB, A)
                gradebook.add_source_cell(
                    name,
                    NB,
                    A,
                    cell_type="code",
                    locked=meta["locked"],
                    source=cell.source,
                    checksum=compute_checksum(cell),
                )
            for student, (first, last, _, scores) in ROSTER.items():
                gradebook.add_student(student, first_name=first, last_name=last)
                gradebook.add_submission(A, student, timestamp=parse_utc(DUE))
                for cell in ("test_a", "test_inplace", "hidden_inplace", "hidden_backward"):
                    grade = gradebook.find_grade(cell, NB, A, student)
                    grade.auto_score = 0.0 if cell != "test_a" else scores.get(cell, 0.0)
                    grade.needs_manual_grade = False
                    if cell.startswith("hidden_"):
                        grade.extra_credit = scores.get(cell, 0.0)
            gradebook.add_student("777", first_name="Py", last_name="Fan")
            gradebook.db.commit()


def _autograded(root: Path) -> None:
    """Each student's autograded notebook (their answers, or the release's), and a timing
    sidecar of the honest and the floor students of test_cohort_timing for two of them."""
    for (student, (_, _, wrote, _)), timing in zip(
        ROSTER.items(), ("ada", "mallory", None, None), strict=True
    ):
        notebook = release()
        for cell in notebook.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") in wrote:
                cell.source = f"x = '{student}'"
        folder = root / "autograded" / student / A
        folder.mkdir(parents=True)
        nbformat.write(notebook, folder / f"{NB}.ipynb")
        if timing:
            sidecar = json.dumps(SIDECARS[timing])
            (folder / timing_record.SIDECAR).write_text(sidecar)


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A course folder outside the repository: gradebook, source notebook, autograded
    notebooks, collect's record of a .py upload, and the report written in it by the CLI."""
    root = tmp_path_factory.mktemp("course")
    (root / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        'c.AwardExtraCredit.points = {"hidden_inplace": 1.0, "hidden_backward": 1.0}\n'
    )
    (root / "source" / A).mkdir(parents=True)
    nbformat.write(release(), root / "source" / A / f"{NB}.ipynb")
    _gradebook(root)
    _autograded(root)
    uploads.write(root, A, [UPLOAD])
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        assert cohort.main([A, "--out", "report"]) == 0
    return root


def _rows(course: Path) -> list[dict[str, str]]:
    return list(csv.DictReader((course / "report" / "cohort.csv").open()))


def _page(course: Path) -> str:
    return (course / "report" / "index.html").read_text()


def test_students_are_named_beside_their_ids_in_id_order(course):
    """Does cohort.csv carry the roster's name beside each id ("" where it has none), in
    student-id order with numbers by value, and the page show "Jane Doe (12345)"?"""
    names = {row["student"]: row["name"] for row in _rows(course)}
    assert names == {"9": "", "101": "Cy Tried", "777": "Py Fan", "12345": "Jane Doe"} | {
        "blank1": "Bo Blank"
    }
    assert list(names) == ["9", "101", "777", "12345", "blank1"]
    page = _page(course)
    assert "<tr><th>Jane Doe <small>(12345)</small></th>" in page
    assert "<tr><th>9</th>" in page


def test_a_blank_notebook_is_said_so_not_scored_cell_by_cell(course):
    """Is the notebook whose answer cells are all the release's "blank: nothing written" in
    the table, the page, the summary and out of the pass rates; is one answer written enough
    not to be blank?"""
    standing = {row["student"]: row["standing"] for row in _rows(course) if row["status"]}
    assert standing["blank1"] == cohort.records.BLANK
    assert standing["9"] == standing["12345"] == ""
    row = _page(course).split("(blank1)</small></th>")[1].split("</tr>")[0]
    assert row.startswith('<td class="blank" colspan="4">blank: nothing written')
    report = cohort.build_report(course, A)
    assert report.summary.blank == ("blank1",)
    assert any(
        line.startswith("Blank, nothing written: Bo Blank (blank1)")
        for line in cohort.summary_lines(report)
    )
    figure = cohort.plot_pass_rates(report.table)
    [required] = [ax for ax in figure.axes if ax.get_label() == "pass rates"]
    assert required.get_title(loc="left").endswith("3 graded students, 1 blank left out")


def test_an_upload_that_is_no_notebook_is_not_missing(course):
    """Is the student whose only upload is a .py "submitted, not gradable as is", with the
    file and the fix, in the table, the page and the summary, and not "no submission"?"""
    mine = [row for row in _rows(course) if row["student"] == "777"]
    assert {row["status"] for row in mine} == {uploads.NOT_GRADABLE}
    assert mine[0]["reason"] == f"strided_softmax.py ({UPLOAD.why}); {UPLOAD.fix}"
    page = _page(course)
    assert (
        f'<td class="not-gradable" colspan="4">{uploads.NOT_GRADABLE}: strided_softmax.py' in page
    )
    lines = cohort.summary_lines(cohort.build_report(course, A))
    assert f"Not graded: Py Fan (777): {UPLOAD.reason()}." in lines
    assert not any(line.startswith("No submission") for line in lines)


def test_the_optional_sections_are_counted_per_section(course):
    """Is each optional section counted once per student, by its heading: earned (its extra
    credit), tried (an answer written, no credit), skipped (its stub left)?"""
    report = cohort.build_report(course, A)
    # no hint sidecars here: a section is "skipped" by a blank notebook alone (the stub hints
    # are test_cohort_optional's); 12345 earned in place, 101 and 9 tried it
    assert report.summary.optional == ((IN_PLACE, 1, 2, 1), (BACKWARD, 0, 3, 1))
    assert {row["section"] for row in _rows(course) if row["cell"] == "test_inplace"} == {IN_PLACE}
    texts = [t.get_text() for ax in cohort.plot_pass_rates(report.table).axes for t in ax.texts]
    assert "1 earned, 2 tried,\n0 skipped" in texts  # the blank notebook left out of the plot


def _outside(figure) -> list[str]:
    """Every visible text of `figure` whose drawn extent leaves the figure, with where."""
    FigureCanvasAgg(figure)
    renderer = figure.canvas.get_renderer()
    figure.draw(renderer)
    frame = figure.bbox
    undrawn = {id(label) for ax in figure.axes for label in _ticks_not_drawn(ax)}
    found = []
    for text in figure.findobj(Text):
        if not text.get_visible() or not text.get_text().strip() or id(text) in undrawn:
            continue
        box = text.get_window_extent(renderer)
        if (
            box.x0 < frame.x0 - 1
            or box.y0 < frame.y0 - 1
            or box.x1 > frame.x1 + 1
            or box.y1 > frame.y1 + 1
        ):
            found.append(f"{text.get_text()!r} at {box.bounds} outside {frame.bounds}")
    return found


def _ticks_not_drawn(ax) -> list[Text]:
    """The tick labels of `ax` outside its view limits: matplotlib keeps them, unseen."""
    found = []
    for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        low, high = sorted(limits)
        for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
            if not low - 1e-9 * abs(high - low) <= tick.get_loc() <= high + 1e-9 * abs(high - low):
                found += [tick.label1, tick.label2]
    return found


@pytest.mark.parametrize("plot", PLOTS, ids=[p.name for p in PLOTS])
def test_every_label_lies_inside_its_figure(course, plot):
    """Drawn from the course's report (names, a blank notebook, an upload that is no
    notebook, two optional sections, timings with a refusal), does every title, tick label,
    bar label, legend entry and note of the plot lie inside the figure?"""
    report = cohort.build_report(course, A, H200_SAMPLE)
    assert not report.timing.empty and load_results(H200_SAMPLE) is not None
    assert _outside(plot.draw(report)) == []


def test_the_no_gpu_line_gives_the_command_that_regrades_on_a_gpu(tmp_path):
    """Does the summary give `python -m grader.parallel` for the students whose timing cell
    found no GPU (--student each; none when it is every graded student)?"""
    cells = [
        cohort.CellInfo(NB, "test_a", 1.0, "public", (), False),
        cohort.CellInfo(NB, "hidden_timing", 2.0, "hidden", ("hidden:timing",), True),
    ]
    grades = {
        (NB, "test_a"): cohort.CellGrade(1.0, None, None, False),
        (NB, "hidden_timing"): cohort.CellGrade(0.0, None, None, False),
    }
    students = [
        cohort.StudentRecord("ada", True, True, True, 0.0, dict(grades), no_gpu=True),
        cohort.StudentRecord("b o", True, True, True, 0.0, dict(grades), no_gpu=True),
        cohort.StudentRecord("cy", True, True, True, 0.0, dict(grades)),
    ]
    report = _report(cohort.Cohort(tmp_path, A, cells, students))
    command = f"python -m grader.parallel {A} --course . --student ada --student 'b o'"
    assert regrade_command(report) == command
    assert any(command in line for line in cohort.summary_lines(report))
    students[2].no_gpu = True
    report = _report(cohort.Cohort(tmp_path, A, cells, students))
    assert regrade_command(report) == f"python -m grader.parallel {A} --course ."


def _report(course: cohort.Cohort) -> cohort.Report:
    table = cohort.build_table(course)
    return cohort.Report(
        course,
        table,
        cohort.timing_table({}),
        cohort.hint_table(course),
        cohort.summarize(course, table),
    )


def test_a_held_grade_and_a_blank_notebook_look_different(tmp_path):
    """Is a held grade shown with its computed scores and "held for review" where the
    exported score would be, and a blank notebook as one striped cell; and are they drawn as
    bars of their own in the score histogram, apart from the released grades?"""
    cells = [cohort.CellInfo(NB, "test_a", 1.0, "public", (), False)]
    grades = {(NB, "test_a"): cohort.CellGrade(1.0, None, None, False)}
    zero = {(NB, "test_a"): cohort.CellGrade(0.0, None, None, False)}
    students = [
        cohort.StudentRecord("ada", True, True, True, 0.0, dict(grades), held=True),
        cohort.StudentRecord("bob", True, True, True, 0.0, dict(zero), blank=True),
        cohort.StudentRecord("cy", True, True, True, 0.0, dict(grades)),
    ]
    report = _report(cohort.Cohort(tmp_path, A, cells, students))
    page = cohort._scores_html(report.table, students)
    ada = page.split("<th>ada</th>")[1].split("</tr>")[0]
    assert ada.startswith('<td class="full">1</td><td>1</td>')
    assert '<td class="held">held for review</td>' in ada
    bob = page.split("<th>bob</th>")[1].split("</tr>")[0]
    assert bob.startswith('<td class="blank" colspan="1">blank: nothing written')
    bars = {}
    for patch in cohort.plot_scores(report.table).axes[0].patches:
        bars[patch.get_gid()] = bars.get(patch.get_gid(), 0) + patch.get_height()
    assert bars == {
        "scores:released": 1,
        "scores:held for review: computed, not released": 1,
        "scores:blank: nothing written": 1,
    }
