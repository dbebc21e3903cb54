"""The check command as a student runs it: exit codes, the text, --json, --hint, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from in_process import run_main

from grader.zoo import BUGS, write_bug
from grader.zoo.bug import REFERENCE

REPO = Path(__file__).resolve().parents[1]
RELEASE = REPO / "release" / "i1_strided_softmax" / "strided_softmax.ipynb"
SOURCE = REPO / "source" / "i1_strided_softmax" / "strided_softmax.ipynb"


def check(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """The check command run in this process from `cwd` (test_reference_passes_with_exit_zero
    runs it as a module, as students do)."""
    from learning.workshops.check import main

    return run_main(main, args, cwd)


def check_module(*args: str) -> subprocess.CompletedProcess:
    """`python -m learning.workshops.check` itself, in a new process."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "learning.workshops.check", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def bug(name: str, folder: Path) -> Path:
    return write_bug(next(b for b in BUGS if b.name == name), folder)


def test_reference_passes_with_exit_zero():
    """Run as students run it, does the reference pass every public case, exit 0, and say so?"""
    done = check_module("strided_softmax", "--impl", str(REFERENCE))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "All cases pass." in done.stdout
    assert "FAIL" not in done.stdout


def test_failure_exits_one_and_points_to_hint(tmp_path):
    """Does a failing implementation exit 1 and suggest --hint, without giving the hint?"""
    impl = bug("ignores-column-stride", tmp_path)
    os.utime(impl, (1_700_000_000, 1_700_000_000))  # saved long ago: an unsaved notebook?
    done = check("strided_softmax", "--impl", str(impl))
    first = done.stdout.splitlines()[0]
    assert first.startswith(f"strided_softmax from {impl}, saved 2023-11-1")
    assert "save your notebook first?" in first
    assert done.returncode == 1
    assert "FAIL  transpose" in done.stdout
    assert "Run again with --hint for a clue." in done.stdout
    assert "Hint [" not in done.stdout


def test_hint_names_its_id_and_evidence(tmp_path):
    """Does --hint print the hint id, its advice and the failing cases as evidence?"""
    done = check("strided_softmax", "--hint", "--impl", str(bug("pads-with-zero", tmp_path)))
    assert done.returncode == 1
    assert "Hint [padding]: Probabilities are too small" in done.stdout
    assert "evidence: contiguous:" in done.stdout
    assert "sums to" in done.stdout


def test_json_schema(tmp_path):
    """Does --json print one object with the documented keys and types?"""
    done = check("strided_softmax", "--json", "--impl", str(bug("pads-with-zero", tmp_path)))
    report = json.loads(done.stdout)
    assert {"op", "device", "passed", "cases", "hints", "seed", "mode", "impl"} <= set(report)
    assert report["saved"][:4].isdigit() and "T" in report["saved"]  # ISO 8601, local time
    assert report["op"] == "strided_softmax"
    assert report["passed"] is False
    assert report["mode"] == "interpreter"
    for case in report["cases"]:
        assert {"name", "passed", "detail", "failure"} <= set(case)
        assert isinstance(case["passed"], bool)
    assert [h["id"] for h in report["hints"]] == ["padding"]
    assert report["hints"][0]["evidence"]


def test_a_fresh_save_is_said_in_seconds():
    """Does the first line say how long ago the checked file was saved, in words?"""
    from learning.workshops.check import saved_words

    assert saved_words(1000.0, now=1012.0).endswith(", 12 s ago")
    assert saved_words(1000.0, now=1000.0 + 5 * 60).endswith(", 5 minutes ago")


def test_seed_repeats_a_run(tmp_path):
    """Does --seed reproduce the same case details?"""
    impl = str(bug("ignores-column-stride", tmp_path))
    first = json.loads(check("strided_softmax", "--json", "--seed", "7", "--impl", impl).stdout)
    again = json.loads(check("strided_softmax", "--json", "--seed", "7", "--impl", impl).stdout)
    assert [c["detail"] for c in first["cases"]] == [c["detail"] for c in again["cases"]]


def test_solved_notebook_is_checked(tmp_path):
    """Can a student check their notebook directly, demo cells and all?"""
    source = nbformat.read(SOURCE, as_version=4)
    path = tmp_path / "strided_softmax.ipynb"
    nbformat.write(source, path)
    done = check("strided_softmax", cwd=tmp_path)  # found without --impl
    assert done.returncode == 0, done.stdout + done.stderr
    assert "strided_softmax.ipynb" in done.stdout


def test_untouched_release_notebook_fails_cleanly():
    """Does the unfinished release notebook fail its cases instead of crashing the checker?"""
    done = check("strided_softmax", "--hint", "--impl", str(RELEASE))
    assert done.returncode == 1
    assert "raised NotImplementedError" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def partly_solved(folder: Path, *grade_ids: str) -> Path:
    """The release notebook with the cells `grade_ids` solved, the rest still stubs."""
    notebook = nbformat.read(RELEASE, as_version=4)
    solved = nbformat.read(SOURCE, as_version=4)
    by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in solved.cells}
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") in grade_ids:
            cell.source = by_id[cell.metadata["nbgrader"]["grade_id"]].source
    path = folder / "strided_softmax.ipynb"
    nbformat.write(notebook, path)
    return path


def test_an_unfinished_notebook_says_which_pass_to_start_with(tmp_path):
    """With passes 2 and 3 still stubs, does the pass 3 check name both, and the check of
    pass 2 to run first?"""
    path = partly_solved(tmp_path, "addresses", "pass1")
    done = check("strided_softmax", "--impl", str(path))
    assert done.returncode == 1
    assert (
        "Unfinished: pass 2 (softmax_kernel), pass 3 (strided_softmax). Start with pass 2 and "
        "its own check: python -m learning.workshops.check softmax_kernel --hint --impl "
        "strided_softmax.ipynb"
    ) in done.stdout


def test_the_unfinished_pass_being_checked_is_not_sent_to_its_own_check(tmp_path):
    """With only pass 3 a stub, does its own check say to finish it and run again, instead
    of naming the command just run?"""
    path = partly_solved(tmp_path, "addresses", "pass1", "pass2")
    done = check("strided_softmax", "--hint", "--impl", str(path))
    assert done.returncode == 1
    assert (
        "Next: pass 3 (strided_softmax) is not written yet; finish it, then run this check again."
    ) in done.stdout
    assert "Unfinished:" not in done.stdout
    assert "Start with" not in done.stdout


def test_other_ops_are_checked():
    """Does the check run pass 1 alone (copy_rows) from the reference?"""
    done = check("copy_rows", "--impl", str(REFERENCE))
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("strided_softmax", "--impl", "missing.py"), "--impl missing.py: no such file"),
        (("softmax_please", "--impl", str(REFERENCE)), "unknown op 'softmax_please'"),
        (("strided_softmax", "--impl", "pyproject.toml"), "expected a .py file or a notebook"),
    ],
)
def test_usage_errors_exit_two_with_one_line(args, message):
    """Does a usage error print one line naming the problem and exit 2?"""
    done = check(*args)
    assert done.returncode == 2
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


def test_missing_default_file_names_both_candidates(tmp_path):
    """Without --impl in an empty folder, does it say which files it looked for?"""
    done = check("strided_softmax", cwd=tmp_path)
    assert done.returncode == 2
    assert "found neither strided_softmax.py nor strided_softmax.ipynb" in done.stderr


def _bundled_notebook(root: Path) -> Path:
    """The release notebook where the student bundle puts it below its root, the folder the
    lab's terminal opens in; its path relative to `root`."""
    from grader.bundle import shipped_files

    (name,) = [name for _, name in shipped_files() if name.endswith("/strided_softmax.ipynb")]
    (root / name).parent.mkdir(parents=True)
    (root / name).write_text(RELEASE.read_text())
    return Path(name)


def test_from_the_bundle_root_the_notebooks_folder_and_impl_are_named(tmp_path):
    """Run from the bundle's root (where the lab's terminal opens), does the one-line error
    name the folder that holds the notebook and the exact --impl that checks it?"""
    notebook = _bundled_notebook(tmp_path)
    done = check("strided_softmax", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"check: found neither strided_softmax.py nor strided_softmax.ipynb in {tmp_path}; "
        f"{notebook.parent.as_posix()}/ holds strided_softmax.ipynb: run python -m "
        f"learning.workshops.check strided_softmax --impl {notebook.as_posix()}"
    ]
    assert (tmp_path / done.stderr.split("--impl ")[1].strip()).is_file()


def test_a_pass_check_beside_the_notebook_names_it(tmp_path):
    """In the notebook's folder, where pass 1's default file (copy_rows.py) is absent, does
    the error point at the notebook beside it?"""
    (tmp_path / "strided_softmax.ipynb").write_text(RELEASE.read_text())
    done = check("copy_rows", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().endswith(
        "this folder holds strided_softmax.ipynb: run python -m learning.workshops.check "
        "copy_rows --impl strided_softmax.ipynb"
    )


def test_the_search_below_is_bounded_and_skips_hidden_folders(tmp_path):
    """Is a notebook in a hidden folder, or deeper than the search goes, left unnamed?"""
    from learning.workshops.check import SEARCH_DEPTH

    for folder in [".ipynb_checkpoints", "/".join("d" * (SEARCH_DEPTH + 1))]:
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "strided_softmax.ipynb").write_text("{}")
    done = check("strided_softmax", cwd=tmp_path)
    assert done.stderr.strip().endswith(
        "run from the folder that holds your work or pass --impl FILE."
    )


def test_with_both_files_here_one_line_says_which_is_checked(tmp_path):
    """With strided_softmax.py beside strided_softmax.ipynb, does one line say that the .py
    is checked and how to check the notebook, and does the report's first line name it?"""
    (tmp_path / "strided_softmax.ipynb").write_text(RELEASE.read_text())
    (tmp_path / "strided_softmax.py").write_text(
        "def strided_softmax(x, num_warps=4):\n    raise ValueError('not yet')\n"
    )
    done = check("strided_softmax", "--sandbox", "off", cwd=tmp_path)
    assert done.stderr.splitlines()[0] == (
        "check: both strided_softmax.py and strided_softmax.ipynb are here; checking "
        "strided_softmax.py (to check the notebook instead, pass --impl strided_softmax.ipynb)"
    )
    assert done.stdout.startswith("strided_softmax from strided_softmax.py, saved ")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("def strided_softmax(x, num_warps=4):\n    return (\n", "syntax error"),
        ("import torch\n", "does not define a function strided_softmax"),
        ("raise RuntimeError('boom')\n", "raised RuntimeError while loading"),
    ],
)
def test_broken_implementations_exit_two(tmp_path, text, message):
    """Does an implementation that cannot load give one clear line and exit 2?"""
    path = tmp_path / "strided_softmax.py"
    path.write_text(text)
    done = check("strided_softmax", "--impl", str(path))
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_malformed_notebook_exits_two(tmp_path):
    """Does a notebook that is not JSON give one clear line and exit 2?"""
    path = tmp_path / "strided_softmax.ipynb"
    path.write_text("{not json")
    done = check("strided_softmax", "--impl", str(path))
    assert done.returncode == 2
    assert "is not a readable notebook" in done.stderr


def test_autotune_in_the_interpreter_is_said_once(tmp_path):
    """Does the report say, once, that the interpreter ran the first autotune config?"""
    from grader.zoo.bug import base_path
    from learning.workshops.check import format_report, run_check
    from learning.workshops.contracts import interpreter_active

    if not interpreter_active():
        pytest.skip("a GPU times the configs itself")
    report = run_check("strided_softmax", base_path("autotuned"), seed=1)
    assert report.passed and len(report.notes) == 1
    assert "first of 4" in report.notes[0]
    assert format_report(report, True).count("note: ") == 1
