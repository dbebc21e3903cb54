"""The student bundle ships the course and nothing that grades it."""

from __future__ import annotations

import os
import re
import zipfile

import nbformat
import pytest

from grader.bundle import build
from grader.course import ASSIGNMENT, NOTEBOOK, REPO
from grader.seeding import FILE as SECRET_FILE


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    path = build(tmp_path_factory.mktemp("bundle") / "i1-student.zip")
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def texts(bundle):
    """Each file's text; a notebook's is its cells' sources, as a reader sees them."""
    found = {}
    for name, data in bundle.items():
        text = data.decode("utf-8", errors="replace")
        if name.endswith(".ipynb"):
            text = "\n".join(cell.source for cell in nbformat.reads(text, as_version=4).cells)
        found[name] = text
    return found


def test_bundle_holds_what_students_need(bundle):
    """Does the bundle hold the release notebook, the learning package, the environment and a
    student README?"""
    names = set(bundle)
    assert f"i1-student/release/{ASSIGNMENT}/{NOTEBOOK}" in names
    assert "i1-student/learning/workshops/check.py" in names
    assert "i1-student/learning/workshops/measuring/data/h200_i1.json" in names
    assert {"i1-student/environment.yml", "i1-student/pyproject.toml"} <= names
    assert "python -m learning.workshops.check" in texts(bundle)["i1-student/README.md"]


def test_bundle_holds_no_instructor_files(bundle):
    """Are grader/, the source notebook, gradebooks, submissions and the cohort notebook absent?"""
    for name in bundle:
        assert "/grader/" not in name
        assert "/source/" not in name
        assert not re.search(r"gradebook\.db|/submitted/|/autograded/|/feedback/", name)
        assert "instructor" not in name


def test_bundle_holds_no_secret_or_hidden_spec(bundle):
    """Is the course secret nowhere (the tests' and this checkout's own, or any token like
    it), and no code that draws or runs hidden cases?"""
    assert not [name for name in bundle if SECRET_FILE in name]
    own = REPO / SECRET_FILE
    known = [os.environ["I1_COURSE_SECRET"]] + ([own.read_text().strip()] if own.is_file() else [])
    for name, text in texts(bundle).items():
        assert not [secret for secret in known if secret in text], name
        assert not re.search(r"\b[0-9a-fA-F]{64}\b", text), f"a 64-hex token in {name}"
        for word in (
            "hidden_cases",
            "expect_hidden",
            "course_secret",
            "grader.seeding",
            "from grader",
            "import grader",
        ):
            assert word not in text, f"{word} in {name}"


def test_bundle_holds_no_solution_text(bundle):
    """Do no two consecutive statements of any solution region appear in any bundled file?
    (Single lines such as `with device_context(x):` are public API usage; a leaked solution
    brings its neighbours along.)"""
    source = nbformat.read(REPO / "source" / ASSIGNMENT / NOTEBOOK, as_version=4)
    pairs = set()
    for cell in source.cells:
        region = re.search(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.S)
        if cell.cell_type == "code" and region:
            lines = [line.strip() for line in region.group(1).splitlines() if line.strip()]
            pairs |= {f"{a}\n{b}" for a, b in zip(lines, lines[1:], strict=False)}
    given = "\n".join(
        line.strip()
        for cell in source.cells
        if not cell.metadata.get("nbgrader", {}).get("solution")
        for line in cell.source.splitlines()
        if line.strip()
    )
    pairs = {pair for pair in pairs if pair not in given}  # the given launchers show these
    assert len(pairs) > 20, "found too few solution statements to look for"
    for name, text in texts(bundle).items():
        flat = "\n".join(line.strip() for line in text.splitlines() if line.strip())
        for pair in pairs:
            assert pair not in flat, f"solution lines {pair!r} in {name}"
