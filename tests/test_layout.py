"""The grader's layout follows the trust line: the isolation primitives import no nbgrader,
no grading module outgrows one job, and the layout table of docs/architecture.md is the tree's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import docs_commands

REPO = Path(__file__).resolve().parents[1]
GRADING = REPO / "grader" / "grading"
ISOLATION = REPO / "grader" / "isolation"
MOST_LINES = 500


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")


def test_no_module_is_over_500_lines():
    """Is every module under learning/ and grader/ at most 500 lines long?"""
    modules = [*(REPO / "learning").rglob("*.py"), *(REPO / "grader").rglob("*.py")]
    long = {
        p.relative_to(REPO).as_posix(): n
        for p in modules
        if (n := len(p.read_text().splitlines())) > MOST_LINES
    }
    assert not long, f"over {MOST_LINES} lines, split by job: {long}"


def test_isolation_imports_no_nbgrader():
    """Imported alone, in a fresh interpreter, does each module of grader/isolation/ leave
    nbgrader (and nbformat, nbclient, traitlets) unimported?"""
    names = [f"grader.isolation.{p.stem}" for p in _modules(ISOLATION)]
    assert "grader.isolation.sandbox" in names and "grader.isolation.bwrap" in names
    script = (
        "import importlib, sys\n"
        "importlib.import_module(sys.argv[1])\n"
        "banned = ('nbgrader', 'nbformat', 'nbclient', 'traitlets')\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & set(banned))))\n"
    )
    pulled = {}
    for name in names:
        done = subprocess.run(
            [sys.executable, "-c", script, name],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
        )
        assert done.returncode == 0, f"{name} does not import alone: {done.stderr}"
        if done.stdout.strip():
            pulled[name] = done.stdout.split()
    assert not pulled, f"isolation modules that pull in nbgrader's stack: {pulled}"


LAYOUT = docs_commands.doc("architecture.md").section("Layout")
"""The layout table of docs/architecture.md."""


def layout_rows() -> dict[str, str]:
    """The table's rows: each path of a row's first column, with the row's second column."""
    rows = {}
    for line in LAYOUT.lines:
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        if len(cells) == 2 and cells[0] not in ("path", "---"):
            rows |= dict.fromkeys(re.findall(r"`([^`]+)`", cells[0]), cells[1])
    return rows


def packages() -> list[Path]:
    """Every package of learning/ and grader/ (a folder with an __init__.py)."""
    return sorted(
        p.parent for root in ("learning", "grader") for p in REPO.glob(f"{root}/**/__init__.py")
    )


def test_every_path_of_the_layout_exists():
    """Does every path in the layout table's first column name a file or folder of the tree?"""
    rows = layout_rows()
    assert len(rows) > 10, rows
    assert [path for path in rows if not (REPO / path).exists()] == []


def test_the_layout_names_every_module():
    """Does the layout table name every module of each package of learning/ and grader/, in
    that package's row or in a row of its own, and give every package below the top a row of
    its own or a mention in its parent's row (`shapes/`)?"""
    rows = layout_rows()
    unnamed = {}
    for package in packages():
        folder = f"{package.relative_to(REPO).as_posix()}/"
        if folder not in rows:
            if package.parent == REPO:  # learning/ holds only workshops/, which has its row
                assert [p.name for p in package.glob("*.py")] == ["__init__.py"]
                continue
            parent = rows.get(f"{package.parent.relative_to(REPO).as_posix()}/", "")
            assert f"`{package.name}/`" in parent, f"the layout has no row for {folder}"
            continue
        named = set(re.findall(r"`(\w+)`", rows[folder]))
        missing = [
            p.stem
            for p in package.glob("*.py")
            if p.stem not in named
            and p.stem not in ("__init__", "__main__")
            and f"{folder}{p.name}" not in rows
        ]
        if missing:
            unnamed[folder] = sorted(missing)
    assert unnamed == {}, f"modules the layout table does not name, by row: {unnamed}"
