"""The grader's layout follows the trust line: the isolation primitives import no nbgrader,
no grading module outgrows one job, and the README's layout table names every module."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GRADING = REPO / "grader" / "grading"
ISOLATION = REPO / "grader" / "isolation"
MOST_LINES = 500


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")


def test_no_grading_module_is_over_500_lines():
    """Is every module under grader/grading/ at most 500 lines long?"""
    long = {
        p.name: n for p in _modules(GRADING) if (n := len(p.read_text().splitlines())) > MOST_LINES
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


def test_the_readme_layout_names_every_module():
    """Does the README's layout table name every module of grader/grading/ and
    grader/isolation/ in that folder's row?"""
    readme = (REPO / "README.md").read_text()
    layout = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    for folder in (GRADING, ISOLATION):
        row = next(
            (line for line in layout.splitlines() if line.startswith(f"| `grader/{folder.name}/`")),
            None,
        )
        assert row is not None, f"README's layout table has no row for grader/{folder.name}/"
        named = set(re.findall(r"`(\w+)`", row))
        missing = [p.stem for p in _modules(folder) if p.stem not in named]
        assert not missing, f"README's grader/{folder.name}/ row does not name {missing}"
