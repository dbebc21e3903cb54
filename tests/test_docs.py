"""The README and docs/ hold to what is true: every command their shell blocks show is run by a
test or says why none can, every link lands, and every pointer into them from a message or a
comment names a page, and a section, that exist.

The commands are read from the pages (tests/docs_commands.py): those a student types are run
here, verbatim, beside the finished assignment; the instructor guide's term is run by
tests/test_instructor_workflow.py, the workshop page's benchmark by tests/test_page_api.py.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import docs_commands
import nbformat
import pytest
from docs_commands import README, REPO, doc, page, pages
from packaging.requirements import Requirement
from test_instructor_workflow import workflow_commands
from test_page_api import PAGE_COMMANDS, page_command
from test_remote import REMOTE_COMMANDS
from test_review import review_commands

from grader import course

NOT_RUN = {
    "make demo": "autogrades the 14-student sample cohort, minutes of every core: "
    "tests/test_cohort_truth.py holds its recipe to grader.demo on scratch/demo (make -n), "
    "and tests/shared_course.py grades the sample cohort itself",
    "make test": "the whole suite, which would run this test: CI (.ci/run) runs it",
    "make test PYTHON=python": "the whole suite again, in an environment named python",
    "conda env create -f environment.yml && conda activate i1-strided-softmax": "conda and a "
    "package index; tests/test_environment.py holds environment.yml to pyproject.toml",
    'pip install --index-url https://download.pytorch.org/whl/cpu "torch>=2.11,<2.14"': "a "
    "package index; test_the_install_lines_name_the_projects_requirements holds its range",
    'pip install -e ".[course,dev]"': "a package index; make venv runs the same line, and "
    "test_the_install_lines_name_the_projects_requirements holds its extras to pyproject.toml",
    'pip install -e ".[student]"': "a package index; tests/test_bundle.py holds the student "
    "extra to what learning/ imports and to the bundle's pyproject.toml",
    "python -m ipykernel install --sys-prefix --name python3": "rewrites the kernel of the "
    "environment the tests run in; make venv runs the same line",
    "python3 -m venv .venv && source .venv/bin/activate": "an environment of its own, for the "
    "package index to fill",
    "python -m learning.workshops.lab": "serves JupyterLab until stopped: tests/test_browser.py "
    "starts the same lab (tests/browser_lab.py) and drives it in Chromium",
    "export I1_GRADEBOOK_URL=postgresql://USER:PASSWORD@DBHOST:5432/i1": "a PostgreSQL server "
    "every machine reaches: tests/test_postgres.py grades into a private one",
    "python -m grader.parallel i1_strided_softmax --shard 1/2 --workers 4": "into the shared "
    "PostgreSQL gradebook: tests/test_postgres.py runs two shards at once into a private one",
    "python -m grader.parallel i1_strided_softmax --shard 2/2 --workers 4": "as shard 1/2",
    "sbatch --array=1-4 scripts/slurm_autograde.sbatch": "a Slurm cluster: tests/test_slurm.py "
    "submits the script to a private one-node cluster",
    "python -m grader.collect i1_strided_softmax --course . --take 23456 "
    '"roebob_23456_987004_strided_softmax (1).ipynb"': "a renamed upload the term's downloads "
    "do not have: tests/test_collect.py takes one in with --take from a course folder",
    "python -m grader.queue serve --course . --root-path /i1 --workers 1": "serves until "
    "stopped: tests/test_queue_service.py starts `python -m grader.queue serve` on loopback",
}
"""The commands shown that no test runs, each with why (and what tests it otherwise)."""

STUDENT_README = docs_commands.STUDENT_README.relative_to(REPO).as_posix()
FIRST_STEPS = page(README).section("An instructor's first steps")
"""The README's block that makes a course folder and its secret, run here as one script."""


def shown() -> dict[str, list[str]]:
    """Every command line of a shell block in the pages, with the pages that show it."""
    found: dict[str, list[str]] = {}
    for each in pages():
        for command in each.commands():
            found.setdefault(command, []).append(each.name)
    return found


def starting(word: str) -> list[str]:
    """The commands shown that start with `word`, each once, in order."""
    return [command for command in shown() if command.startswith(word)]


CHECKS = [c for c in starting("python -m learning.workshops.check ") if c not in REMOTE_COMMANDS]
PLOTS = starting("python -m learning.workshops.plots ")
BENCHMARKS = [
    c
    for c in starting("python -m learning.workshops.benchmark ")
    if c not in PAGE_COMMANDS and c not in REMOTE_COMMANDS
]
MAKE_SECRET = "make secret"


def run_here() -> set[str]:
    """The commands this file runs."""
    return {*CHECKS, *PLOTS, *BENCHMARKS, *FIRST_STEPS.commands(), MAKE_SECRET}


def test_every_command_shown_is_run_by_a_test_or_says_why_not():
    """Is every command of the pages' shell blocks run by a test (here, the term's by
    test_instructor_workflow, the page's benchmark by test_page_api, the review's by
    test_review), or in NOT_RUN with its reason, and does NOT_RUN name only commands still
    shown that no test runs?"""
    commands = shown()
    run = run_here() | set(workflow_commands()) | set(PAGE_COMMANDS) | set(review_commands())
    run |= set(REMOTE_COMMANDS)
    untested = {c: where for c, where in commands.items() if c not in run and c not in NOT_RUN}
    assert untested == {}, f"shown, but neither run by a test nor in NOT_RUN: {untested}"
    assert [c for c in NOT_RUN if c not in commands] == [], "NOT_RUN names a command not shown"
    assert [c for c in NOT_RUN if c in run] == [], "NOT_RUN names a command a test runs"
    assert set(run_here()) <= set(commands)


def test_a_new_command_without_a_test_is_found():
    """Would a command added to a page's shell block, run by no test, be found by the
    extractor that the check above relies on (fences indented in a list item included)?"""
    text = (
        "# A\n\n1. Step\n\n   ```bash\n   make demo  # shown\n   python -m new.tool --x\n   ```\n"
    )
    added = docs_commands.parse(text, "new.md").commands()
    assert added == ["make demo", "python -m new.tool --x"]
    assert "python -m new.tool --x" not in run_here() | set(NOT_RUN)


def test_every_block_names_its_language():
    """Does every fenced block of the pages name its language, so that no command hides in a
    block the extractor does not read as shell?"""
    bare = [(p.name, b.line + 1) for p in pages() for b in p.blocks if not b.language]
    assert bare == []


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A student's folder holding the finished assignment (every solution filled in)."""
    folder = tmp_path_factory.mktemp("finished")
    nbformat.write(course.solved_notebook(course.REPO), folder / course.NOTEBOOK)
    return folder


@pytest.mark.parametrize("command", CHECKS)
def test_each_check_shown_passes_the_finished_assignment(command, finished):
    """Does each check the pages show, typed in the finished assignment's folder, pass every
    case (exit 0), naming the notebook it read?"""
    done = page_command(command, finished)
    assert done.returncode == 0, done.stdout + done.stderr
    assert course.NOTEBOOK in done.stdout and "All cases pass." in done.stdout, done.stdout


@pytest.mark.parametrize("command", PLOTS)
def test_each_plots_command_shown_draws_the_recorded_run(command, tmp_path):
    """Does each plots command the pages show, given the H200 run students without a GPU read
    as its results file, write its plots into its --out folder?"""
    argv = shlex.split(command)
    results = tmp_path / argv[3]
    results.parent.mkdir(parents=True)
    shutil.copy(REPO / "learning/workshops/measuring/data/h200_i1.json", results)
    done = page_command(command, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = tmp_path / argv[argv.index("--out") + 1]
    assert sorted(p.name for p in out.glob("*.png")) == ["layouts.png", "warps.png"]


@pytest.mark.parametrize("command", BENCHMARKS)
def test_each_benchmark_shown_runs(command, finished):
    """Does each benchmark command the pages show (beside the page's own, which
    test_page_api runs) write its results on a GPU, and without one say in one line that
    timing needs a CUDA device (exit 2)?"""
    import torch

    done = page_command(command, finished)
    if os.environ.get("CUDA_VISIBLE_DEVICES") != "" and torch.cuda.is_available():
        assert done.returncode == 0, done.stderr
        assert (finished / shlex.split(command)[-1]).is_file()
    else:
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.startswith("benchmark: ") and "CUDA device" in done.stderr


def shell_env(home: Path) -> dict[str, str]:
    """The environment a shell block runs in: this Python first on PATH, `home` as ~."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    drop = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "I1_COURSE_SECRET")
    return {k: v for k, v in os.environ.items() if k not in drop} | {
        "PATH": path,
        "HOME": str(home),
    }


def is_secret(path: Path) -> bool:
    mode = stat.S_IMODE(path.stat().st_mode)
    return mode == 0o600 and re.fullmatch(r"[0-9a-f]{64}\n", path.read_text()) is not None


def test_the_readmes_first_steps_make_a_course_folder_and_its_secret(tmp_path):
    """Run as one script with ~ a scratch home, does the README's block make the course
    folder (its config, source and .gitignore) and the secret in it, readable by its owner
    alone?"""
    script = "set -e\n" + "\n".join(FIRST_STEPS.commands())
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=shell_env(tmp_path),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    folder = tmp_path / "i1-2026"
    assert (folder / "nbgrader_config.py").is_file() and (folder / ".gitignore").is_file()
    assert (folder / "source" / course.ASSIGNMENT / course.NOTEBOOK).is_file()
    assert is_secret(folder / "course_secret.txt")


def test_make_secret_writes_the_course_secret(tmp_path):
    """Does `make secret`, run in a course folder with this Python (`PYTHON=`, as the Makefile
    takes an environment of one's own), write that folder's secret, mode 0600, as the guide's
    comment on it says?"""
    assert MAKE_SECRET in doc("instructor-guide.md").section("The course secret").commands()
    shutil.copy(REPO / "nbgrader_config.py", tmp_path)
    done = subprocess.run(
        [*shlex.split(MAKE_SECRET), "-f", str(REPO / "Makefile"), f"PYTHON={sys.executable}"],
        cwd=tmp_path,
        env=shell_env(tmp_path),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert is_secret(tmp_path / "course_secret.txt")


def test_the_install_lines_name_the_projects_requirements():
    """Do the pip lines the pages show name torch's range as pyproject.toml does, and only
    extras it defines; and do the pages that give the supported versions give pyproject's?"""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    ranges = {Requirement(d).name: d for d in project["dependencies"]}
    pips = [c for c in shown() if c.startswith("pip install")]
    torches = {re.search(r'"(torch[^"]*)"', c)[1] for c in pips if '"torch' in c}
    assert torches == {ranges["torch"]}
    extras = {e for c in pips for m in re.findall(r"\.\[([\w,]+)\]", c) for e in m.split(",")}
    assert extras and extras <= set(project["optional-dependencies"]), extras
    said = (
        f"Python {project['requires-python'].removeprefix('>=')}+, "
        f"torch {ranges['torch'].removeprefix('torch')} and "
        f"Triton {ranges['triton'].removeprefix('triton')}"
    )
    for each in (page(README), doc("install.md"), doc("student-guide.md")):
        assert said in " ".join(" ".join(each.lines).split()), each.name


def test_every_relative_link_resolves():
    """Does every relative link of the README and docs/ name a file of the tree, and each
    #anchor a heading of the page it points to?"""
    broken = []
    for each in pages():
        if each.name == STUDENT_README:  # its links point inside the bundle (test_bundle.py)
            continue
        here = (REPO / each.name).parent
        for target in each.links():
            if target.startswith("#"):
                if target[1:] not in each.anchors():
                    broken.append((each.name, target))
                continue
            if not docs_commands.relative(target):
                continue
            path, _, anchor = target.partition("#")
            file = (here / path).resolve()
            if not file.is_file() and not file.is_dir():
                broken.append((each.name, target))
            elif anchor and anchor not in page(file).anchors():
                broken.append((each.name, target))
    assert broken == []


def test_the_link_check_finds_a_broken_link():
    """Would a link to a missing page, or to a missing heading, be found?"""
    text = "# T\n\n[a](missing.md) [b](#no-such) [c](https://example.org) `[d](x.md)`\n"
    found = docs_commands.parse(text, "t.md")
    assert found.links() == ["missing.md", "#no-such", "https://example.org"]
    assert "no-such" not in found.anchors() and "t" in found.anchors()
    assert docs_commands.slug("The course secret") == "the-course-secret"
    assert docs_commands.slug("`check --json`: keys") == "check---json-keys"


POINTER = re.compile(r'(docs/[\w-]+\.md|(?<![\w/])README(?:\.md)?)(?:,? \\?"([A-Z][^"\\/]*)\\?")?')
"""A message's or a comment's pointer into the pages: the page, and the section if named."""
POINTING = [
    REPO / "nbgrader_config.py",
    REPO / "Makefile",
    REPO / ".ci" / "run",
    *sorted((REPO / "grader").rglob("*.py")),
    *sorted((REPO / "learning").rglob("*.py")),
    *sorted((REPO / "scripts").iterdir()),
]


def test_every_pointer_into_the_pages_names_a_page_and_a_section_that_exist():
    """Does every `docs/PAGE.md` (and README) that the code's messages and comments name
    exist, with the section named beside it ("Submission times", "The course secret")?"""
    seen, wrong = 0, []
    for path in POINTING:
        for target, title in POINTER.findall(path.read_text(errors="replace")):
            seen += 1
            file = REPO / ("README.md" if target.startswith("README") else target)
            if not file.is_file():
                wrong.append((path.name, target))
            elif title and title not in {h.title for h in page(file).headings}:
                wrong.append((path.name, target, title))
    assert seen >= 5 and wrong == []
