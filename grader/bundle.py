"""The student bundle: what ships to students, and nothing that grades them.

    python -m grader.bundle --out dist/i1-student.zip

Release notebooks, the `learning` package, the ungraded notebooks, the environment and a
student README. Never `grader/`, the source notebook, the gradebook or the course secret:
`tests/test_bundle.py` opens the archive and checks. An earlier archive at --out is only
replaced once the new one is complete.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

from grader.course import ASSIGNMENT, REPO
from learning.workshops.check import UsageError
from learning.workshops.paths import unwritable

SHIPPED = (
    "release",
    "learning",
    "notebooks/setup_check.ipynb",
    "notebooks/address_explorer.ipynb",
    "environment.yml",
    "pyproject.toml",
)
README = Path(__file__).with_name("student_README.md")
SKIPPED_PARTS = {"__pycache__", ".ipynb_checkpoints"}


def shipped_files() -> list[Path]:
    """Every file the bundle holds, relative to the repository."""
    files = []
    for entry in SHIPPED:
        path = REPO / entry
        found = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        files += [p.relative_to(REPO) for p in found if not SKIPPED_PARTS & set(p.parts)]
    return files


def check_out(out: Path) -> None:
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
    inside = [e for e in SHIPPED if out.resolve().is_relative_to(REPO / e)]
    if inside:
        raise UsageError(f"--out {out} is inside {inside[0]}/, which ships; write it elsewhere.")


def check_shipped() -> None:
    """UsageError when something that ships is missing from the repository."""
    missing = next((REPO / e for e in SHIPPED if not (REPO / e).exists()), None)
    if missing == REPO / "release":
        raise UsageError(
            f"{missing} is missing; run `nbgrader generate_assignment {ASSIGNMENT}` first."
        )
    if missing:
        raise UsageError(f"{missing} is missing; restore it with git before bundling.")


def build(out: Path) -> Path:
    """Write the bundle as a zip archive at `out`, inside a top folder `i1-student/`.

    The archive is written beside `out` first and renamed once complete, so a failure
    leaves an earlier archive at `out` as it was.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    try:
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for relative in shipped_files():
                archive.write(REPO / relative, f"i1-student/{relative}")
            archive.write(README, "i1-student/README.md")
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.bundle", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", default="dist/i1-student.zip", help="the archive to write")
    args = parser.parse_args(argv)
    out = Path(args.out)
    try:
        check_out(out)
        check_shipped()
        build(out)
    except UsageError as exc:
        print(f"bundle: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"bundle: cannot build {out}: {exc}.", file=sys.stderr)
        return 2
    print(f"wrote {out} ({len(shipped_files()) + 1} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
