"""A course folder of one's own, outside this repository, for a term of real students.

    python -m grader.make_course FOLDER
    python -m grader.make_course --retie FOLDER

FOLDER (new, or an empty folder) gets this repository's `nbgrader_config.py` and
`source/i1_strided_softmax/`, a `.gitignore` that keeps the students' data and the course
secret out of any repository the course folder is kept in, the record that ties it to the
checkout whose code grades it (`i1_course.json`, `grader.course_tie`: the grading commands
refuse another checkout or version) and `scripts/slurm_autograde.sbatch`, the repository's
Slurm script with that checkout and its Python filled in, so that the guide's `sbatch` line
runs as written from FOLDER. `--retie` ties an existing course to the checkout that runs
the command instead, on purpose, says what changed, and fills the script in again.

Everything else is the instructor guide's term (docs/instructor-guide.md,
"A term, in order"), run from FOLDER: the secret, the roster, the due date, the release
(generated from FOLDER's source, which is the instructor's to edit) and the student bundle
(`python -m grader.bundle`, which ships FOLDER's release). The code (`grader`, `learning`)
stays this repository's: FOLDER's config imports it, so it must be importable from FOLDER (an
installed environment: `pip install -e ".[course]"`, as `make venv` does); the command says where
FOLDER's nbgrader will import it from, and that checkout is the one the course is tied to.

Refused, with nothing written: a folder inside this repository (its students' work would sit
in this checkout), a folder that is not empty, and an environment where FOLDER's config could
not import the course's code.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from grader.course import ASSIGNMENT, REPO
from grader.course_folder import not_a_course
from grader.course_tie import RECORD, Tie, retie, this_code, write_tie
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
    "# extensions and the grades for the LMS: student ids and scores",
    "/extensions.json",
    "/grades*.csv",
    "/canvas_*.csv",
    "# the class GPU queue's tokens (python -m grader.queue tokens)",
    "/queue_tokens.json",
    "/queue_tokens.csv",
    f"/{SECRET_FILE}",
    "/dist/",
    "/reports/",
)
"""FOLDER's .gitignore."""
BATCH_SCRIPT = Path("scripts") / "slurm_autograde.sbatch"
"""The Slurm script, at the same path in this repository and in a course folder."""
BATCH_DEFAULTS = (("REPO=${I1_REPO:-", "checkout"), ("PYTHON=${I1_PYTHON:-", "python"))
"""The script's lines whose defaults a course's copy fills in, with the Tie field of each."""
BATCH_NOTE = (
    "# This course's copy, written by `python -m grader.make_course` (and `--retie`): submit it\n"
    "# from the course folder; I1_REPO and I1_PYTHON default to the checkout the course is tied\n"
    "# to (i1_course.json) and its Python.\n"
)
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


def batch_script(tie: Tie, script: str) -> str:
    """`script` (the Slurm script's text) with the checkout and Python defaults of `tie`."""
    lines = script.splitlines(keepends=True)
    for start, field in BATCH_DEFAULTS:
        at = [i for i, line in enumerate(lines) if line.startswith(start)]
        if len(at) != 1:
            raise CourseFolderError(f"{BATCH_SCRIPT} has no single line starting {start!r}")
        lines[at[0]] = f"{start}{shlex.quote(getattr(tie, field))}}}\n"
    if BATCH_NOTE not in script:
        lines.insert(1, BATCH_NOTE)
    return "".join(lines)


def write_batch_script(folder: Path, tie: Tie) -> None:
    """FOLDER's Slurm script: its own copy, refilled (its #SBATCH edits kept), else the
    repository's, filled in."""
    path = folder / BATCH_SCRIPT
    script = path.read_text() if path.is_file() else (REPO / BATCH_SCRIPT).read_text()
    path.parent.mkdir(exist_ok=True)
    path.write_text(batch_script(tie, script))
    path.chmod(0o755)


def tied_code(folder: Path) -> Tie:
    """The code FOLDER's nbgrader imports (the checkout that holds its `grader`), run by this
    Python; CourseFolderError when it cannot import it."""
    return this_code(Path(imported_from(folder)[0]).parent)


def make_course(folder: Path) -> Path:
    """Make the course folder (see the module's docstring); CourseFolderError when refused."""
    check_folder(folder)
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        tie = tied_code(folder)
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
    write_tie(folder, tie)
    write_batch_script(folder, tie)
    return folder


def retie_course(folder: Path) -> str:
    """Tie the course FOLDER to the code its nbgrader imports now; what changed, one line."""
    problem = not_a_course(folder)
    if problem:
        raise CourseFolderError(problem)
    if folder.resolve().is_relative_to(REPO.resolve()):
        raise CourseFolderError(
            f"{folder} is inside this repository ({REPO}), which grades with its own code and "
            "needs no record; --retie is for a course folder outside it."
        )
    checkout = Path(imported_from(folder)[0]).parent
    said = retie(folder, checkout)
    write_batch_script(folder, this_code(checkout))
    return f"{said} {BATCH_SCRIPT} now runs that checkout."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.make_course", description=__doc__.splitlines()[0]
    )
    parser.add_argument("folder", help="the new course folder, outside this repository")
    parser.add_argument(
        "--retie",
        action="store_true",
        help=f"tie the existing course FOLDER ({RECORD}) to the checkout this Python imports "
        "there, on purpose: its grading commands then use that code, and refuse the old one",
    )
    args = parser.parse_args(argv)
    folder = Path(args.folder).expanduser()
    if args.retie:
        try:
            print(retie_course(folder))
        except (CourseFolderError, OSError) as exc:
            print(f"make_course: {exc}", file=sys.stderr)
            return 2
        return 0
    try:
        make_course(folder)
        code = imported_from(folder)
    except CourseFolderError as exc:
        print(f"make_course: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"make_course: cannot make {folder}: {exc}", file=sys.stderr)
        return 2
    print(
        f"Made the course folder {folder}: {CONFIG}, source/{ASSIGNMENT}/, .gitignore, "
        f"{RECORD} (the checkout that grades it) and {BATCH_SCRIPT}."
    )
    print(f"Its nbgrader imports the course's code from {' and '.join(dict.fromkeys(code))}.")
    print(NEXT.format(folder=folder, guide=GUIDE, term=TERM, assignment=ASSIGNMENT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
