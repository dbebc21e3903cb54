"""The student bundle: what ships to students, and nothing that grades them.

    python -m grader.bundle [--course FOLDER] --out dist/i1-student.zip

The course's release notebook (from the course folder, default here: a course of one's own
ships its own release), this repository's `learning` package and ungraded notebooks, the
student's pages of docs/ (the student guide, the experiment and its results, GPU timing), a
student README, and a pyproject.toml and environment.yml of the student's side only (the
dependencies and the `student` extra: no nbgrader, grader packages or dev tools). Never
`grader/`, the source notebook, the gradebook or the course secret: `tests/test_bundle.py`
opens the archive and checks. A release that is not what the course's source generates (edited
since, or copied by hand with its solutions) is refused. An earlier archive at --out is only
replaced once the new one is complete.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
import zipfile
from pathlib import Path

import nbformat

from grader.course import ASSIGNMENT, NOTEBOOK, REPO
from learning.workshops.check import UsageError
from learning.workshops.paths import unwritable

STUDENT_DOCS = (
    "docs/student-guide.md",
    "docs/gpu-results.md",
    "docs/gpu-timing.md",
    "docs/queue.md",
)
"""The pages of docs/ a student reads; they link only to each other."""
SHIPPED = (
    "learning",
    "notebooks/setup_check.ipynb",
    "notebooks/address_explorer.ipynb",
    *STUDENT_DOCS,
)
"""What ships from this repository, whichever course the release comes from."""
RELEASE = Path("release") / ASSIGNMENT
"""What ships from the course folder."""
README = Path(__file__).with_name("student_README.md")
SKIPPED_PARTS = {"__pycache__", ".ipynb_checkpoints"}
STUDENT_EXTRA = "student"
PACKAGES = "learning*"
"""The one package tree a student installs."""
DESCRIPTION = "A Triton softmax over real tensor views: the I1 workshop and its checks."
"""The bundle's project description (this repository's names the nbgrader course)."""


MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN HIDDEN TESTS")


def shipped_files(course: Path = REPO) -> list[tuple[Path, str]]:
    """Every file the bundle copies, as (where it is, its name inside `i1-student/`)."""
    files = []
    for root, entry in [(REPO, Path(e)) for e in SHIPPED] + [(course, RELEASE)]:
        path = root / entry
        found = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in found:
            relative = file.relative_to(root)
            if not SKIPPED_PARTS & set(relative.parts):
                files.append((file, relative.as_posix()))
    return files


def student_pyproject(text: str) -> str:
    """The bundle's pyproject.toml from this repository's: the project, its dependencies and
    the student extra alone, installing only `learning`."""
    data = tomllib.loads(text)
    project = data["project"]
    lines = ["[build-system]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in data["build-system"].items()]
    lines += ["", "[project]"]
    for key in ("name", "version", "description", "readme", "requires-python"):
        value = DESCRIPTION if key == "description" else project[key]
        lines.append(f"{key} = {json.dumps(value)}")
    lines.append("dependencies = [")
    lines += [f"    {json.dumps(r)}," for r in project["dependencies"]]
    lines += ["]", "", "[project.optional-dependencies]"]
    lines.append(f"{STUDENT_EXTRA} = {json.dumps(project['optional-dependencies'][STUDENT_EXTRA])}")
    lines += ["", "[tool.setuptools.packages.find]", f"include = {json.dumps([PACKAGES])}"]
    data_files = {
        package: files
        for package, files in data["tool"]["setuptools"].get("package-data", {}).items()
        if package.split(".")[0] == "learning"
    }
    if data_files:
        lines += ["", "[tool.setuptools.package-data]"]
        lines += [f"{json.dumps(p)} = {json.dumps(f)}" for p, f in data_files.items()]
    return "\n".join(lines) + "\n"


def student_environment(environment: str, pyproject: str) -> str:
    """The bundle's environment.yml: this repository's channels and Python, with pip
    installing the student's side (`pyproject`'s dependencies and student extra) only."""
    head = environment.split("  - pip:\n")[0].splitlines()
    kept = [line for line in head if not line.startswith("#")]
    project = tomllib.loads(pyproject)["project"]
    wanted = project["dependencies"] + project["optional-dependencies"][STUDENT_EXTRA]
    lines = [
        "# The student's environment: conda env create -f environment.yml",
        "# torch comes from PyPI, the CUDA build. Without a GPU, take the CPU build (gigabytes",
        "# smaller):",
        "#   PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu \\",
        "#   conda env create -f environment.yml",
        *kept,
        "  - pip:",
        *[f"      - {requirement}" for requirement in wanted],
        "      - -e .",
    ]
    return "\n".join(lines) + "\n"


def release_problems(course: Path) -> list[str]:
    """Why the course's release is not what its source generates (empty when it is): cells
    added, removed or reordered, a cell that is neither a solution nor a hidden test edited
    since, or solution and hidden-test markers left in."""
    source = nbformat.read(course / "source" / ASSIGNMENT / NOTEBOOK, as_version=4).cells
    release = nbformat.read(course / RELEASE / NOTEBOOK, as_version=4).cells
    if len(source) != len(release):
        return [f"source has {len(source)} cells, the release {len(release)}"]
    problems = []
    for index, (mine, theirs) in enumerate(zip(source, release, strict=True)):
        meta = mine.metadata.get("nbgrader", {})
        if (mine.cell_type, meta.get("grade_id")) != (
            theirs.cell_type,
            theirs.metadata.get("nbgrader", {}).get("grade_id"),
        ):
            problems.append(f"cell {index} is another cell in the release")
        elif any(marker in theirs.source for marker in MARKERS):
            problems.append(f"cell {index} keeps its solution or hidden tests in the release")
        elif not meta.get("solution") and "### BEGIN HIDDEN TESTS" not in mine.source:
            if mine.source != theirs.source:
                problems.append(f"cell {index} was edited in source/ since")
    return problems


def differs_from_repository(course: Path) -> bool:
    """Whether the course's release notebook has other cells than this repository's."""
    if course.resolve() == REPO.resolve() or not (REPO / RELEASE / NOTEBOOK).is_file():
        return False
    mine, theirs = (
        [(c.cell_type, c.source) for c in nbformat.read(root / RELEASE / NOTEBOOK, 4).cells]
        for root in (course, REPO)
    )
    return mine != theirs


def check_course(course: Path) -> None:
    """UsageError unless `course` is a course folder whose release is what its source
    generates."""
    if not (course / "nbgrader_config.py").is_file():
        raise UsageError(
            f"--course {course}: no nbgrader_config.py, so not a course folder; run this from "
            "your course folder or name it with --course."
        )
    regenerate = f"run `nbgrader generate_assignment {ASSIGNMENT} --force` in {course}"
    if not (course / RELEASE / NOTEBOOK).is_file():
        raise UsageError(f"{course / RELEASE / NOTEBOOK} is missing; {regenerate} first.")
    if not (course / "source" / ASSIGNMENT / NOTEBOOK).is_file():
        raise UsageError(
            f"{course / 'source' / ASSIGNMENT / NOTEBOOK} is missing, so the release cannot be "
            "checked against it; restore the course's source."
        )
    problems = release_problems(course)
    if problems:
        raise UsageError(
            f"{course / RELEASE} is not what {course / 'source'} generates "
            f"({'; '.join(problems[:3])}); {regenerate}, then bundle again."
        )


def check_out(out: Path, course: Path = REPO) -> None:
    """UsageError unless `out` names a .zip that can be written, outside what ships."""
    if out.suffix.lower() != ".zip":
        raise UsageError(f"--out {out}: the bundle is a zip archive; name a file ending in .zip.")
    if out.is_dir():
        raise UsageError(
            f"--out {out} is a folder; name the archive, e.g. {out / 'i1-student.zip'}."
        )
    problem = unwritable(out.parent)
    if problem:
        raise UsageError(f"--out {out}: {problem}; choose another path.")
    shipping = {e: REPO / e for e in SHIPPED} | {"release": course / "release"}
    inside = [e for e, path in shipping.items() if out.resolve().is_relative_to(path.resolve())]
    if inside:
        raise UsageError(f"--out {out} is inside {inside[0]}/, which ships; write it elsewhere.")


def check_shipped() -> None:
    """UsageError when something that ships from this repository is missing."""
    missing = next((REPO / e for e in SHIPPED if not (REPO / e).exists()), None)
    if missing:
        raise UsageError(f"{missing} is missing; restore it with git before bundling.")


def build(out: Path, course: Path = REPO) -> Path:
    """Write the bundle of `course`'s release as a zip archive at `out`, inside a top folder
    `i1-student/`.

    The archive is written beside `out` first and renamed once complete, so a failure
    leaves an earlier archive at `out` as it was.
    """
    pyproject = student_pyproject((REPO / "pyproject.toml").read_text())
    environment = student_environment((REPO / "environment.yml").read_text(), pyproject)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    try:
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for path, name in shipped_files(course):
                archive.write(path, f"i1-student/{name}")
            archive.write(README, "i1-student/README.md")
            archive.writestr("i1-student/pyproject.toml", pyproject)
            archive.writestr("i1-student/environment.yml", environment)
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.bundle", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--course", default=".", help="the course folder whose release ships (default: here)"
    )
    parser.add_argument("--out", default="dist/i1-student.zip", help="the archive to write")
    args = parser.parse_args(argv)
    out, course = Path(args.out), Path(args.course).absolute()
    try:
        check_course(course)
        check_out(out, course)
        check_shipped()
        build(out, course)
    except UsageError as exc:
        print(f"bundle: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"bundle: cannot build {out}: {exc}.", file=sys.stderr)
        return 2
    if differs_from_repository(course):
        print(
            f"bundle: note: {course / RELEASE} differs from this repository's {RELEASE}; "
            f"the bundle ships {course}'s.",
            file=sys.stderr,
        )
    print(f"wrote {out} from {course / RELEASE} ({len(shipped_files(course)) + 3} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
