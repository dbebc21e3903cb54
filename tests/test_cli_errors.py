"""Bad input to every command: one line `<prog>: <message>`, exit status 2, nothing touched.

Each case runs a command's main() in-process on a folder of bad inputs, then checks that the
folder is byte for byte as it was. Bad input already covered next to its command (a missing
gradebook, an unknown student, bad --shapes and the like) is not repeated here.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from grader import bundle, cohort, course, demo, gpu_check, parallel, recheck
from learning.workshops import benchmark, plots
from learning.workshops.measuring.results import H200_SAMPLE

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "grader" / "reference.py"
COURSE_ID = "i1-strided-softmax"  # nbgrader_config.py's
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="tests the machine without CUDA")
not_root = pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")

COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "bundle": bundle.main,
    "gpu_check": gpu_check.main,
    "demo": demo.main,
    "cohort": cohort.main,
    "recheck": recheck.main,
    "parallel": parallel.main,
    "benchmark": benchmark.main,
    "plots": plots.main,
}


@pytest.fixture(scope="session")
def ps1_gradebook(tmp_path_factory) -> Path:
    """A gradebook that knows one assignment, ps1, and no students.

    It holds both course rows that opening it adds when missing: nbgrader_config.py's course
    id (grader.parallel) and nbgrader's default (grader.cohort), so that a command that only
    reads it leaves its bytes as they were.
    """
    from nbgrader.api import Gradebook

    path = tmp_path_factory.mktemp("gradebook") / "gradebook.db"
    with Gradebook(f"sqlite:///{path}", COURSE_ID) as gradebook:
        gradebook.add_assignment("ps1")
    Gradebook(f"sqlite:///{path}").close()
    return path


@pytest.fixture
def bad(tmp_path, ps1_gradebook) -> Path:
    """A folder of bad inputs, each named for what is wrong with it."""
    (tmp_path / "afile").write_text("a file where a folder belongs\n")
    (tmp_path / "notes.txt").write_text("notes that must survive\n")
    (tmp_path / "binary.json").write_bytes(b"\x80\x81\xff not text")
    (tmp_path / "rows.json").write_text(
        '{"schema": "i1-benchmark/1", "op": "strided_softmax", "impl": "x.py", "device": "d", '
        '"capability": "9.0", "dtype": "float32", "created": "now", "versions": {}, "rows": 5}\n'
    )
    (tmp_path / "old.zip").mkdir()
    (tmp_path / "course").mkdir()  # a folder with work in it, not a scratch course
    (tmp_path / "course" / "work.ipynb").write_text("{}\n")
    (tmp_path / "results" / "course").mkdir(parents=True)
    (tmp_path / "results" / "course" / "work.ipynb").write_text("{}\n")
    (tmp_path / "badconfig").mkdir()
    (tmp_path / "badconfig" / "nbgrader_config.py").write_text("c = get_config(\n")
    for name in ("broken", "ps1course"):
        (tmp_path / name).mkdir()
        shutil.copy(REPO / "nbgrader_config.py", tmp_path / name)
    (tmp_path / "broken" / "gradebook.db").write_bytes(b"not a database\n" * 100)
    shutil.copy(ps1_gradebook, tmp_path / "ps1course" / "gradebook.db")
    return tmp_path


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under `folder` with its bytes (None for a folder)."""
    return {
        str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes()
        for p in sorted(folder.rglob("*"))
    }


def run_bad(capsys, bad: Path, prog: str, args: list[str]) -> str:
    """Run `prog` on `args` ({bad}, {repo}, {sample} filled in); its one error line, checked."""
    argv = [a.format(bad=bad, repo=REPO, sample=H200_SAMPLE) for a in args]
    before = snapshot(bad)
    code = COMMANDS[prog](argv)
    out, err = capsys.readouterr()
    assert code == 2, err
    assert "Traceback" not in out + err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: "), err
    assert snapshot(bad) == before, "the command changed the folder it was given"
    return lines[0]


CASES = [
    # bundle
    ("bundle", ["--out", "{bad}/bundle.tar"], "--out {bad}/bundle.tar: the bundle is a zip"),
    ("bundle", ["--out", "{bad}/old.zip"], "--out {bad}/old.zip is a folder"),
    ("bundle", ["--out", "{bad}/afile/i1.zip"], "{bad}/afile is a file, not a folder"),
    # gpu_check
    ("gpu_check", ["--out", "{bad}/afile"], "{bad}/afile is a file, not a folder"),
    ("gpu_check", ["--out", "{bad}/afile/gpu"], "{bad}/afile is a file, not a folder"),
    (
        "gpu_check",
        ["--out", "{bad}/gpu", "--skip", "tests", "check", "benchmark", "autograde", "shards"],
        "--skip names every step, so there is nothing to run",
    ),
    (
        "gpu_check",
        ["--out", "{bad}/results", "--skip", "tests", "check", "benchmark"],
        "scratch course in {bad}/results/course, which holds something else",
    ),
    pytest.param(
        "gpu_check",
        ["--out", "{bad}/gpu"],
        "no CUDA device and tests, benchmark, autograde, shards cannot run without one",
        marks=no_cuda,
        id="gpu_check-no-cuda",
    ),
    pytest.param(
        "gpu_check",
        ["--out", "{bad}/gpu", "--skip", "benchmark", "autograde", "shards"],
        "tests cannot run without one; run on a GPU machine, or skip them with "
        "--skip benchmark autograde shards tests.",
        marks=no_cuda,
        id="gpu_check-no-cuda-tests",
    ),
    # demo
    ("demo", ["--course", "{bad}/afile"], "--course {bad}/afile: {bad}/afile is a file"),
    (
        "demo",
        ["--course", "{bad}/scratch", "--report", "{bad}/afile/report"],
        "--report {bad}/afile/report: {bad}/afile is a file",
    ),
    ("demo", ["--course", "{bad}/scratch", "--workers", "0"], "--workers 0: autograde needs"),
    ("demo", ["--course", "{bad}/course"], "{bad}/course exists and is not a scratch course"),
    # cohort
    (
        "cohort",
        ["i1_strided_softmax", "--course", "{bad}/missing", "--out", "{bad}/report"],
        "no course folder at {bad}/missing",
    ),
    (
        "cohort",
        ["i1_strided_softmax", "--course", "{bad}/broken", "--out", "{bad}/report"],
        "cannot read the gradebook {bad}/broken/gradebook.db (file is not a database)",
    ),
    (
        "cohort",
        [
            "ps1",
            "--course",
            "{bad}/course",
            "--out",
            "{bad}/report",
            "--benchmark",
            "{bad}/binary.json",
        ],
        "bad --benchmark file: {bad}/binary.json is not text, so not a results file",
    ),
    (
        "cohort",
        [
            "ps1",
            "--course",
            "{bad}/course",
            "--out",
            "{bad}/report",
            "--benchmark",
            "{bad}/rows.json",
        ],
        "bad --benchmark file: {bad}/rows.json: rows must be a list",
    ),
    (
        "cohort",
        ["ps1", "--course", "{bad}/ps1course", "--out", "{bad}/afile"],
        "cannot write the report to {bad}/afile",
    ),
    # recheck
    ("recheck", ["nope", "--course", "{bad}/broken"], "unknown assignment 'nope'"),
    (
        "recheck",
        ["i1_strided_softmax", "--course", "{bad}/broken"],
        "cannot read the gradebook {bad}/broken/gradebook.db (file is not a database)",
    ),
    # parallel
    (
        "parallel",
        ["i1_strided_softmax", "--course", "{bad}/course"],
        "{bad}/course is not a course: it has no nbgrader_config.py",
    ),
    (
        "parallel",
        ["i1_strided_softmax", "--course", "{bad}/badconfig"],
        "{bad}/badconfig/nbgrader_config.py, line 1: syntax error",
    ),
    (
        "parallel",
        ["i1_strided_softmax", "--course", "{bad}/broken"],
        "cannot read the gradebook {bad}/broken/gradebook.db (file is not a database)",
    ),
    ("parallel", ["nope", "--course", "{bad}/ps1course"], "assignment 'nope' is not in the"),
    # benchmark
    (
        "benchmark",
        ["--impl", str(REFERENCE), "--output", "{bad}/course"],
        "--output {bad}/course is a folder",
    ),
    (
        "benchmark",
        ["--impl", str(REFERENCE), "--output", "{bad}/notes.txt"],
        "--output {bad}/notes.txt: results are JSON",
    ),
    (
        "benchmark",
        ["--impl", str(REFERENCE), "--output", "{bad}/afile/i1.json"],
        "{bad}/afile is a file, not a folder",
    ),
    # plots
    ("plots", ["{bad}/binary.json"], "{bad}/binary.json is not text, so not a results file"),
    ("plots", ["{bad}/rows.json"], "{bad}/rows.json: rows must be a list"),
    ("plots", ["{sample}", "--out", "{bad}/afile"], "cannot write the plots to {bad}/afile"),
    ("plots", ["{sample}", "--out", "{bad}/afile/plots"], "to {bad}/afile/plots (Not a dir"),
]


@pytest.mark.parametrize("prog, args, message", CASES)
def test_bad_input_gives_one_line_and_exit_2(capsys, bad, prog, args, message):
    """Does the command exit 2 with one line naming what is wrong, and touch nothing?"""
    line = run_bad(capsys, bad, prog, args)
    assert message.format(bad=bad) in line


@not_root
@pytest.mark.parametrize(
    "prog, args",
    [
        ("bundle", ["--out", "{bad}/locked/i1.zip"]),
        ("gpu_check", ["--out", "{bad}/locked/gpu"]),
        ("demo", ["--course", "{bad}/scratch", "--report", "{bad}/locked/report"]),
        ("benchmark", ["--impl", str(REFERENCE), "--output", "{bad}/locked/i1.json"]),
    ],
)
def test_an_unwritable_folder_is_named(capsys, bad, prog, args):
    """Is an output under a folder the user cannot write to refused before any work?"""
    (bad / "locked").mkdir(mode=0o555)
    try:
        line = run_bad(capsys, bad, prog, args)
    finally:
        (bad / "locked").chmod(0o755)
    assert f"{bad}/locked is not writable" in line


def test_bundle_refuses_to_write_into_what_ships(capsys, bad):
    """Is an archive inside release/ refused, so that it never ships itself?"""
    line = run_bad(capsys, bad, "bundle", ["--out", "{repo}/release/i1.zip"])
    assert "is inside release/, which ships" in line
    assert not (REPO / "release" / "i1.zip").exists()


def test_bundle_without_a_release_says_how_to_make_one(capsys, bad):
    """Does a course folder without its release name it and the nbgrader command that makes
    it?"""
    (bad / "nbgrader_config.py").write_text("c = get_config()\n")
    line = run_bad(capsys, bad, "bundle", ["--course", "{bad}", "--out", "{bad}/dist/i1.zip"])
    release = bad / "release" / course.ASSIGNMENT / course.NOTEBOOK
    assert line == (
        f"bundle: {release} is missing; run `nbgrader generate_assignment "
        f"{course.ASSIGNMENT} --force` in {bad} first."
    )


def test_a_failed_bundle_leaves_the_earlier_archive(capsys, bad, monkeypatch):
    """When a shipped file cannot be read, is the earlier archive kept, with no partial file?"""
    (bad / "dist").mkdir()
    (bad / "dist" / "i1.zip").write_bytes(b"the earlier archive")
    missing = (Path("no/such/file.py"), "no/such/file.py")
    monkeypatch.setattr(bundle, "shipped_files", lambda course: [missing])
    line = run_bad(capsys, bad, "bundle", ["--out", "{bad}/dist/i1.zip"])
    assert line.startswith(f"bundle: cannot build {bad}/dist/i1.zip: ")
    assert "no/such/file.py" in line


def test_gpu_check_rejects_an_unknown_step(capsys, bad):
    """Is a step --skip does not know refused by argparse (exit 2) with the steps it knows?"""
    with pytest.raises(SystemExit) as exit_:
        gpu_check.main(["--out", str(bad / "gpu"), "--skip", "bencmark"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert "invalid choice: 'bencmark'" in err
    assert "'tests', 'check', 'benchmark', 'autograde'" in err
    assert not (bad / "gpu").exists()


@no_cuda
def test_gpu_check_runs_check_alone_without_cuda(capsys, tmp_path, monkeypatch):
    """Without CUDA, does skipping the steps that need it leave `check` to run?"""
    monkeypatch.setattr(gpu_check, "checks", lambda out: [f"check ran into {out.name}"])
    code = gpu_check.main(["--out", str(tmp_path / "gpu"), "--skip", "tests", "benchmark"])
    assert code == 2  # autograde and shards still need CUDA
    assert "autograde, shards cannot run without one" in capsys.readouterr().err
    code = gpu_check.main(
        ["--out", str(tmp_path / "gpu"), "--skip", "tests", "benchmark", "autograde", "shards"]
    )
    assert code == 0
    assert capsys.readouterr().out == "check ran into gpu\n"
    assert (tmp_path / "gpu" / "summary.txt").read_text() == "check ran into gpu\n"
