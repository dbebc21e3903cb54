"""The notebooks as a student meets them: opened in JupyterLab, run in a real browser, and
read from the page they render (tests/browser_lab.py starts the lab and drives chromium).

The lab is the students' (`python -m learning.workshops.lab`). Each notebook's full-page
screenshot after its run, one of the window as it opened, and one of the terminal the pass-3
check ran in land in artifacts/browser/.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import nbformat
import pytest
from browser_lab import (
    CHROMIUM,
    ROUTES,
    ShownCell,
    drawing_cells,
    lab,
    processes_mentioning,
    run_in_terminal,
    run_notebook,
)

from grader import course
from learning.workshops.lab import INSTRUCTOR_PLUGINS

try:
    from playwright.sync_api import sync_playwright
except ImportError:
    sync_playwright = None

pytestmark = [
    pytest.mark.browser,
    pytest.mark.xdist_group("browser"),  # one lab, one worker
    pytest.mark.skipif(
        sync_playwright is None,
        reason="Playwright's Python driver is missing: pip install -e '.[dev]'",
    ),
    pytest.mark.skipif(
        not os.access(CHROMIUM, os.X_OK),
        reason=f"no chromium at {CHROMIUM}: apt-get install chromium (Playwright's own "
        "browsers are not used)",
    ),
]

ARTIFACTS = course.REPO / "artifacts" / "browser"
RELEASE = course.REPO / "release" / course.ASSIGNMENT / course.NOTEBOOK
NOTEBOOKS = course.REPO / "notebooks"

UNFINISHED = {
    "NotImplementedError": "",  # the stub itself, called by a test cell
    # a test cell's cases, all raising the stub's; an optional exercise's: not attempted
    "AssertionError": r"Hint \[unfinished\]|: not attempted\. ",
}
"""The errors an untouched release may show, by name, with what their text must say."""

PROBE = [
    "import sys\nprint('a line on stderr', file=sys.stderr)",
    "import warnings\nwarnings.warn('a warning, not an error')",
    "1 / 0",
    "def broken(:\n    pass",
    "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([0, 1]);",
]
"""A notebook whose every kind of output the page reading must tell apart."""


def copy_for_lab(notebook: nbformat.NotebookNode, path) -> nbformat.NotebookNode:
    """Write `notebook` to `path` as a student opens it: no outputs, nothing run yet."""
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return notebook


@pytest.fixture(scope="module")
def lab_root(tmp_path_factory):
    """The lab's folder: the finished assignment (the reference's kernel and a persistent
    one's) and the untouched one, the two ungraded
    notebooks, and the probe notebook; each notebook's JSON by its path."""
    root = tmp_path_factory.mktemp("lab")
    notebooks = {
        "finished/strided_softmax.ipynb": course.solved_notebook(course.REPO),
        "persistent/strided_softmax.ipynb": course.shape_notebook(course.REPO, "persistent"),
        "release/strided_softmax.ipynb": nbformat.read(RELEASE, as_version=4),
        "notebooks/setup_check.ipynb": nbformat.read(NOTEBOOKS / "setup_check.ipynb", 4),
        "notebooks/address_explorer.ipynb": nbformat.read(NOTEBOOKS / "address_explorer.ipynb", 4),
        "probe.ipynb": nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_code_cell(source) for source in PROBE],
            metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        ),
    }
    return root, {path: copy_for_lab(nb, root / path) for path, nb in notebooks.items()}


@pytest.fixture(scope="module")
def running_lab(lab_root, tmp_path_factory):
    """JupyterLab on a free loopback port; afterwards, no process of its own is left."""
    home = tmp_path_factory.mktemp("jupyter-home")
    with lab(lab_root[0], home) as running:
        yield running
    assert processes_mentioning(str(home)) == [], "JupyterLab or a kernel outlived the test"


@pytest.fixture(scope="module")
def browser():
    """Headless chromium, Debian's."""
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def run(browser, running_lab, lab_root):
    """Run a notebook of the lab in the browser: its cells as shown, and its JSON."""

    def run(path: str, screenshot: str, *, each_cell: bool = False):
        opened, cells, modified = run_notebook(
            browser, running_lab, path, ARTIFACTS / f"{screenshot}.png", each_cell=each_cell
        )
        notebook = lab_root[1][path]
        assert [c.kind for c in cells] == [c.cell_type for c in notebook.cells]
        opening[path], modified_after_run[path] = opened, modified
        return cells, notebook

    return run


opening = {}
"""What the lab showed on opening each notebook the tests ran, by path."""
modified_after_run = {}
"""Whether each notebook's tab was marked modified after its run (with autosave off), by path."""


def opened(path: str):
    """What the lab showed on opening the notebook at `path` (a test before ran it)."""
    if path not in opening:
        pytest.skip(f"{path} was not opened: the test that runs it did not get that far")
    return opening[path]


def not_run(cells: list[ShownCell]) -> list[int]:
    return [i for i, c in enumerate(cells) if c.kind == "code" and not re.search(r"\d", c.prompt)]


def errors(cells: list[ShownCell]) -> dict[int, list[str]]:
    return {i: [e.ename for e in c.errors] for i, c in enumerate(cells) if c.errors}


def without_pictures(cells: list[ShownCell], notebook) -> list[int]:
    """The cells that draw (their source calls a drawing function) but show no image."""
    return [i for i in drawing_cells(notebook) if cells[i].images == 0]


def test_page_reading_tells_errors_from_stderr(run):
    """Does reading the page count an exception and a syntax error as errors, a line on
    stderr and a warning as not, see a figure, and see the unsaved-changes mark that running
    sets, so the checks below mean what they say?"""
    cells, _ = run("probe.ipynb", "probe", each_cell=True)
    assert not_run(cells) == []
    assert errors(cells) == {2: ["ZeroDivisionError"], 3: ["SyntaxError"]}
    assert [c.stderr for c in cells] == [1, 1, 0, 0, 0]
    assert [c.images for c in cells] == [0, 0, 0, 0, 1]
    # the unsaved-changes mark is read where JupyterLab puts it: the run's outputs set it
    assert modified_after_run["probe.ipynb"] and not opened("probe.ipynb").modified


def test_finished_assignment_runs_clean_and_shows_its_figures(run):
    """Does the release with every solution filled in (as grader.course builds it) run all
    its cells under Run All with no error output, and show a picture in every cell that
    draws (draw_view, plot_warps, plot_layouts)?"""
    cells, notebook = run("finished/strided_softmax.ipynb", "assignment-finished")
    assert errors(cells) == {}
    assert not_run(cells) == []
    assert drawing_cells(notebook), "the assignment draws views and the benchmark's plots"
    assert without_pictures(cells, notebook) == []


def test_a_persistent_kernel_runs_all_in_the_browser(run):
    """Does the assignment solved with a persistent grid-stride kernel (its own signature)
    run every cell under Run All with no error, its PTX cell and figures included?"""
    cells, notebook = run("persistent/strided_softmax.ipynb", "assignment-persistent")
    assert errors(cells) == {}
    assert not_run(cells) == []
    assert without_pictures(cells, notebook) == []


def test_untouched_release_shows_only_unfinished_errors(run):
    """Run top to bottom, does the release as handed out fail only because its stubs are
    stubs (NotImplementedError, test cells whose hint is `unfinished`, the PTX cell saying
    the kernel is not written yet), and still show every figure?"""
    cells, notebook = run("release/strided_softmax.ipynb", "assignment-release", each_cell=True)
    assert not_run(cells) == []
    unexpected = [
        (i, error.ename, error.text[-300:])
        for i, cell in enumerate(cells)
        for error in cell.errors
        if error.ename not in UNFINISHED or not re.search(UNFINISHED[error.ename], error.text)
    ]
    assert unexpected == []
    shown = {name for names in errors(cells).values() for name in names}
    assert {"NotImplementedError", "AssertionError"} <= shown
    assert without_pictures(cells, notebook) == []


@pytest.mark.parametrize("name", ["setup_check", "address_explorer"])
def test_ungraded_notebook_runs_clean_and_shows_its_figures(run, name):
    """Does the ungraded notebook run all its cells with no error output and show a picture
    in every cell that draws?"""
    cells, notebook = run(f"notebooks/{name}.ipynb", name)
    assert errors(cells) == {}
    assert not_run(cells) == []
    assert without_pictures(cells, notebook) == []


@pytest.mark.parametrize(
    "path",
    [
        "release/strided_softmax.ipynb",
        "notebooks/setup_check.ipynb",
        "notebooks/address_explorer.ipynb",
        "finished/strided_softmax.ipynb",
        "probe.ipynb",
    ],
)
def test_notebooks_open_unmodified(path):
    """Does each notebook open, before anything runs, without the unsaved-changes mark on its
    tab (JupyterLab rewrites kernel metadata that differs from its kernel's, and a student then
    wonders what they changed)?"""
    shown = opened(path)
    assert shown.tabs == (path.rsplit("/", 1)[-1],)
    assert not shown.modified


INSTRUCTOR_COMMANDS = ("Create assignment", "Course List", "Formgrader", "Formgrader (local)")
"""The command palette's entries for nbgrader's instructor tools (its menu adds them)."""


@pytest.mark.parametrize("path", ["release/strided_softmax.ipynb", "notebooks/setup_check.ipynb"])
def test_the_students_lab_hides_the_instructor_tools(path):
    """In the students' JupyterLab, are nbgrader's instructor plugins disabled, and are its
    menu, the Create Assignment side panel, the palette's instructor commands and the
    formgrader's pages gone, while the Validate button students use stays on the notebook's
    toolbar with the server's validation behind it?"""
    shown = opened(path)
    assert set(INSTRUCTOR_PLUGINS) <= set(shown.disabled)
    assert "Nbgrader" not in shown.menus and "Run" in shown.menus
    assert "Property Inspector" in shown.sidebars
    assert not [tab for tab in shown.sidebars if "Create Assignment" in tab]
    assert "Run All Cells" in shown.palette
    assert set(INSTRUCTOR_COMMANDS).isdisjoint(shown.palette)
    assert "Validate" in shown.toolbar
    assert shown.routes == dict(zip(ROUTES, (404, 405, 200), strict=True))


PASS3 = "python -m learning.workshops.check strided_softmax --hint --impl strided_softmax.ipynb"
"""The notebook's and the student guide's pass-3 check, verbatim (tests/test_docs.py runs the
guide's own line)."""


def test_the_pass3_check_runs_in_the_labs_terminal(browser, running_lab):
    """In a terminal opened from the lab's File menu (a login shell would reset PATH, and
    every course command failed with `No module named 'learning'`), does `python` name the
    notebooks' Python, and does the pass-3 check, typed as the notebook gives it in the
    finished assignment's folder, pass every case?"""
    command = f'cd finished; command -v python; {PASS3}; echo "exit status $?"'
    screen = run_in_terminal(
        browser, running_lab, command, r"^exit status \d+$", ARTIFACTS / "terminal-pass3.png"
    )
    assert str(Path(sys.executable).parent / "python") in screen.splitlines(), screen
    assert "No module named" not in screen, screen
    report = re.sub(r"\s", "", screen)  # long lines wrap anywhere at the terminal's width
    first = r"strided_softmaxfromstrided_softmax\.ipynb,saved.*?(\d+)of\1casespass"
    assert re.search(first, report), screen
    assert "Allcasespass." in report and "exitstatus0" in report, screen
