"""A course folder of one's own, outside this repository, for a term of real students.

    python -m grader.make_course FOLDER

FOLDER (new, or an empty folder) gets this repository's `nbgrader_config.py` and
`source/i1_strided_softmax/`, and a `.gitignore` that keeps the students' data and the course
secret out of any repository the course folder is kept in. Everything else is the instructor
guide's term (docs/instructor-guide.md, "A term, in order"), run from FOLDER: the secret,
the roster, the due date, the release (generated from FOLDER's source, which is the
instructor's to edit) and the student bundle (`python -m grader.bundle`, which ships FOLDER's
release). The code (`grader`, `learning`)
stays this repository's: FOLDER's config imports it, so it must be importable from FOLDER (an
installed environment: `pip install -e ".[course]"`, as `make venv` does); the command says
where FOLDER's nbgrader will import it from.

Refused, with nothing written: a folder inside this repository (its students' work would sit
in this checkout), a folder that is not empty, and an environment where FOLDER's config could
not import the course's code.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from grader.course import ASSIGNMENT, REPO
from grader.seeding import FILE as SECRET_FILE

CONFIG = "nbgrader_config.py"
IGNORED = (
    "# nbgrader's student data and the course secret: never committed (the gradebook holds the",
    "# hidden tests; the secret draws them)",
    "/submitted/",
    "/autograded/",
    "/feedback/",
    "/downloaded/",
    "gradebook.db",
    "/.nbgrader.log",
    "/grading_log/",
    "/reviews/",
    f"/{SECRET_FILE}",
    "/dist/",
    "/reports/",
)
"""FOLDER's .gitignore."""
GUIDE = REPO / "docs" / "instructor-guide.md"
TERM = "A term, in order"
"""The instructor guide and its section whose block is a term's commands, in order."""
NEXT = (
    'Next, from {folder}: the term in {guide} ("{term}"), from\n'
    "`python -m grader.seeding new --course .` to `nbgrader export`. Edit source/{assignment}/\n"
    "first if you want: the release and the student bundle are generated from this folder's."
)


class CourseFolderError(Exception):
    """The folder cannot become a course; the message says why and what to do."""


def imported_from(folder: Path) -> list[str]:
    """Where `nbgrader` run in `folder` gets `grader` and `learning` from (its config imports
    both); CourseFolderError when this Python cannot import them there."""
    probe = "import grader, learning; print(grader.__file__); print(learning.__file__)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=folder, capture_output=True, text=True)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise CourseFolderError(
            f"outside this repository, {sys.executable} cannot import the course's code "
            f"({said}), so nbgrader could not load the course's config; install it, e.g. "
            f'`pip install -e "{REPO}[course]"` (make venv does), or export PYTHONPATH={REPO}.'
        )
    return [str(Path(p).parent) for p in done.stdout.split()]


def check_folder(folder: Path) -> None:
    """CourseFolderError unless `folder` may become a course: outside this repository, new or
    empty."""
    where = folder.resolve()
    if where.is_relative_to(REPO.resolve()):
        raise CourseFolderError(
            f"{folder} is inside this repository ({REPO}), which is a course already; choose a "
            "folder outside it, e.g. ~/i1-course, so students' work never sits in a git checkout."
        )
    if where.exists() and not where.is_dir():
        raise CourseFolderError(f"{folder} is a file; name a new or empty folder.")
    if where.is_dir() and any(where.iterdir()):
        raise CourseFolderError(
            f"{folder} is not empty; name a new or empty folder (a course's students' work is "
            "never overwritten)."
        )


def make_course(folder: Path) -> Path:
    """Make the course folder (see the module's docstring); CourseFolderError when refused."""
    check_folder(folder)
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        imported_from(folder)
    except CourseFolderError:
        if made:
            folder.rmdir()
        raise
    shutil.copy(REPO / CONFIG, folder / CONFIG)
    shutil.copytree(
        REPO / "source" / ASSIGNMENT,
        folder / "source" / ASSIGNMENT,
        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"),
    )
    (folder / ".gitignore").write_text("\n".join(IGNORED) + "\n")
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.make_course", description=__doc__.splitlines()[0]
    )
    parser.add_argument("folder", help="the new course folder, outside this repository")
    args = parser.parse_args(argv)
    folder = Path(args.folder).expanduser()
    try:
        make_course(folder)
        code = imported_from(folder)
    except CourseFolderError as exc:
        print(f"make_course: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"make_course: cannot make {folder}: {exc}", file=sys.stderr)
        return 2
    print(f"Made the course folder {folder}: {CONFIG}, source/{ASSIGNMENT}/, .gitignore.")
    print(f"Its nbgrader imports the course's code from {' and '.join(dict.fromkeys(code))}.")
    print(NEXT.format(folder=folder, guide=GUIDE, term=TERM, assignment=ASSIGNMENT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
