"""Feedback pages run nothing a student wrote (grader.grading.inert_html): the sanitiser, the
outputs kept, and `nbgrader generate_feedback` with the course's config on a graded notebook
made by hand (no autograde; the attack suite's live-student-text student is the end-to-end
case, opened in a browser: tests/exploits/test_live_text.py)."""

from __future__ import annotations

import base64
import io
import re
import shutil
import warnings

import matplotlib.pyplot as plt
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from nbgrader.api import Gradebook
from nbgrader.utils import parse_utc

from grader import course
from grader.grading.grading_log import GradingLog
from grader.grading.inert_html import clean, inert_cell
from grader.sample_cohort import ON_TIME

NOTEBOOK = course.NOTEBOOK.removesuffix(".ipynb")


@pytest.mark.parametrize(
    ("fragment", "shown"),
    [
        ("<p>a<script>window.x = 1</script>b</p>", "<p>ab</p>"),
        ('<img src="x" onerror="window.x = 1">', '<img src="x">'),
        ('<a href="javascript:window.x = 1">go</a>', '<a rel="noopener noreferrer">go</a>'),
        (
            '<a href="data:text/html,<script>1</script>">go</a>',
            '<a rel="noopener noreferrer">go</a>',
        ),
        ('<img src="data:text/html;base64,PHA+">', "<img>"),
        ("<iframe srcdoc='<script>1</script>'></iframe>ok", "ok"),
        ("<svg onload='window.x = 1'><circle r='3'/></svg>ok", "ok"),
        ("<style>body { display: none }</style><p style='color: red'>ok</p>", "<p>ok</p>"),
        ('<form action="https://example.invalid"><button>b</button></form>', "b"),
        ('<meta http-equiv="refresh" content="0; url=https://example.invalid">ok', "ok"),
    ],
)
def test_what_runs_or_restyles_the_page_is_cleaned_away(fragment, shown):
    """Are scripts, event attributes, javascript: and non-image data: addresses, frames,
    SVG, styles, forms and meta refreshes removed?"""
    assert clean(fragment) == shown


def test_formatting_tables_code_and_images_stay():
    """Do what markdown and honest HTML outputs are made of stay: emphasis, headings with
    their anchors, lists, tables (pandas' class included), highlighted code, links, and an
    image drawn from a data: address?"""
    kept = (
        '<h2 id="Why">Why<a class="anchor-link" href="#Why" rel="noopener noreferrer">¶</a></h2>'
        "<p><strong>twice</strong> the bytes, <em>cold</em>, <code>x&lt;y</code></p>"
        "<ul><li>one</li></ul>"
        '<table class="dataframe"><thead><tr><th>a</th></tr></thead>'
        "<tbody><tr><td>1</td></tr></tbody></table>"
        '<div class="highlight"><pre><span class="k">def</span></pre></div>'
        '<img alt="plot" src="data:image/png;base64,iVBORw0KGgo=">'
        "<details><summary>more</summary>text</details>"
    )
    assert clean(kept) == kept
    assert clean('<a href="https://example.org">x</a>') == (
        '<a href="https://example.org" rel="noopener noreferrer">x</a>'
    )


def test_outputs_keep_only_what_a_page_shows_without_running_it():
    """Does a cell lose its script and widget outputs, any image metadata but a numeric
    width and height, an execution count that is not a number, and have its grade id
    escaped; and keep its text, HTML, markdown and image outputs?"""
    cell = new_code_cell("x")
    cell.execution_count = "<script>1</script>"
    cell.metadata["nbgrader"] = {"grade_id": '"><script>1</script>'}
    cell.outputs = [
        new_output("display_data", data={"application/javascript": "1", "text/plain": "JS"}),
        new_output("display_data", data={"application/vnd.jupyter.widget-view+json": {}}),
        new_output(
            "display_data",
            data={"image/png": "AAAA", "text/html": "<b>b</b>", "text/markdown": "*m*"},
            metadata={
                "image/png": {"width": "1 onerror=x()", "height": 20, "alt": "a"},
                "filenames": {"image/png": "javascript:x()"},
                "text/html": {"isolated": True},
            },
        ),
    ]
    inert_cell(cell)
    assert cell.execution_count is None
    assert cell.metadata["nbgrader"]["grade_id"] == "&quot;&gt;&lt;script&gt;1&lt;/script&gt;"
    assert [dict(o.get("data", {})) for o in cell.outputs] == [
        {"text/plain": "JS"},
        {},
        {"image/png": "AAAA", "text/html": "<b>b</b>", "text/markdown": "*m*"},
    ]
    assert cell.outputs[2].metadata == {"image/png": {"height": 20}}


def _plot_png() -> str:
    figure = plt.figure(figsize=(2, 1.5))
    plt.bar(["direct", "copy"], [1.0, 1.9])
    data = io.BytesIO()
    figure.savefig(data, format="png")
    plt.close(figure)
    return base64.b64encode(data.getvalue()).decode()


def graded_notebook() -> nbformat.NotebookNode:
    """A graded notebook with a hostile hand-graded answer and outputs, and a plot."""
    answer = new_markdown_cell(
        "It takes **twice** as long.\n\n<script>window.__pwned = 1</script>\n\n"
        '<img src="x" onerror="window.__pwned = 2">\n\n![mine](attachment:plot.png)'
    )
    answer.attachments = {"plot.png": {"image/png": _plot_png()}}
    answer.metadata["nbgrader"] = {
        "grade": True,
        "solution": True,
        "grade_id": "prediction",
        "points": 2,
    }
    shown = new_code_cell("display(...)", execution_count=1)
    shown.outputs = [
        new_output("display_data", data={"text/html": "<script>window.__pwned = 3</script>"}),
        new_output("display_data", data={"application/javascript": "window.__pwned = 4"}),
        new_output("display_data", data={"image/png": _plot_png(), "text/plain": "<Figure>"}),
        new_output(
            "display_data",
            data={"image/png": "AAAA"},
            metadata={"image/png": {"width": "1 onerror=window.__pwned=5"}},
        ),
    ]
    return new_notebook(cells=[answer, shown])


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> str:
    """The feedback page `nbgrader generate_feedback` writes, with the course's config, for
    `graded_notebook` graded: the gradebook filled through nbgrader's API."""
    root = tmp_path_factory.mktemp("inert")
    shutil.copy(course.REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's add_submission trips SQLAlchemy warnings
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
            gradebook.add_assignment(course.ASSIGNMENT)
            gradebook.add_notebook(NOTEBOOK, course.ASSIGNMENT)
            gradebook.add_grade_cell(
                "prediction", NOTEBOOK, course.ASSIGNMENT, max_score=2, cell_type="markdown"
            )
            gradebook.add_solution_cell("prediction", NOTEBOOK, course.ASSIGNMENT)
            gradebook.add_student("mallory")
            gradebook.add_submission(course.ASSIGNMENT, "mallory", timestamp=parse_utc(ON_TIME))
    folder = root / "autograded" / "mallory" / course.ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(graded_notebook(), folder / course.NOTEBOOK)
    GradingLog(root, course.ASSIGNMENT, "mallory").begin().finish()
    course.nbgrader(root, "generate_feedback", course.ASSIGNMENT, "--force")
    return (root / "feedback" / "mallory" / course.ASSIGNMENT / f"{NOTEBOOK}.html").read_text()


def test_the_course_feedback_page_keeps_no_script_of_the_student(page):
    """Does the course's feedback page hold none of the student's scripts, event attributes
    or script outputs, while their answer, its image and their plot show?"""
    assert "<script" not in page and "__pwned = 4" not in page
    assert not re.search(r"<[^>]+\son\w+\s*=", page)
    assert "It takes <strong>twice</strong> as long." in page
    assert len(re.findall(r'<img[^>]+src="data:image/png;base64,iVBORw0KGgo', page)) == 2
