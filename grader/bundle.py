"""The student bundle: what ships to students, and nothing that grades them.

    python -m grader.bundle --out dist/i1-student.zip

Release notebooks, the `learning` package, the ungraded notebooks, the environment and a
student README. Never `grader/`, the source notebook, the gradebook or the secret seed:
`tests/test_bundle.py` opens the archive and checks.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

from grader.course import REPO

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


def build(out: Path) -> Path:
    """Write the bundle as a zip archive at `out`, inside a top folder `i1-student/`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for relative in shipped_files():
            archive.write(REPO / relative, f"i1-student/{relative}")
        archive.write(README, "i1-student/README.md")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="dist/i1-student.zip", help="the archive to write")
    args = parser.parse_args(argv)
    path = build(Path(args.out))
    print(f"wrote {path} ({len(shipped_files()) + 1} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
