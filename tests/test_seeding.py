"""The course secret lives outside git: made by a command, read by every grading, refused
when missing or malformed, and found nowhere in the repository, the release or the bundle."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from grader import course, parallel, recheck
from grader.grading import readiness
from grader.grading.hidden import Draw, course_draw, hidden_cases
from grader.grading.trusted import draw_for, submission_draw
from grader.isolation import sandbox
from grader.seeding import ENV, FILE, MissingSecret, course_folder, course_secret, main

REPO = Path(__file__).resolve().parents[1]
TOKEN = re.compile(r"\b[0-9a-fA-F]{64}\b")


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    """A course folder (its nbgrader_config.py) with no secret, and no I1_COURSE_SECRET."""
    folder = tmp_path / "course"
    folder.mkdir()
    shutil.copy(REPO / "nbgrader_config.py", folder)
    monkeypatch.delenv(ENV)
    return folder


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def command(root: Path) -> str:
    return f"python -m grader.seeding new --course {root}"


def test_new_writes_a_secret_only_its_owner_reads(root, capsys):
    """Does `new` write 64 hex characters, mode 0600, say where, and how to rotate?"""
    assert main(["new", "--course", str(root)]) == 0
    path = root / FILE
    assert mode(path) == 0o600
    assert re.fullmatch(r"[0-9a-f]{64}\n", path.read_text())
    assert course_secret(root) == path.read_text().strip()
    out = capsys.readouterr().out
    assert f"Wrote the course secret {path} (mode 0600)." in out
    assert "--force" in out and "between cohorts" in out and "regrade" in out
    assert path.read_text().strip() not in out  # never printed


def test_new_refuses_to_overwrite_without_force(root, capsys):
    """Is an existing secret kept unless --force, which replaces it (rotation), still 0600?"""
    assert main(["new", "--course", str(root)]) == 0
    first = (root / FILE).read_text()
    (root / FILE).chmod(0o644)
    capsys.readouterr()
    assert main(["new", "--course", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"secret: {root / FILE} already exists") and "--force" in err
    assert len(err.splitlines()) == 1
    assert (root / FILE).read_text() == first
    assert main(["new", "--course", str(root), "--force"]) == 0
    assert f"Replaced the course secret {root / FILE}" in capsys.readouterr().out
    assert (root / FILE).read_text() != first and mode(root / FILE) == 0o600
    assert sorted(p.name for p in root.iterdir()) == sorted([FILE, "nbgrader_config.py"])


def test_new_defaults_to_here_and_refuses_a_folder_that_is_no_course(
    root, tmp_path, monkeypatch, capsys
):
    """Does `new` write into the current folder, and refuse one with no nbgrader_config.py?"""
    monkeypatch.chdir(root)
    assert main(["new"]) == 0
    assert (root / FILE).is_file()
    monkeypatch.chdir(tmp_path)
    assert main(["new"]) == 2
    assert "is not a course folder (it has no nbgrader_config.py)" in capsys.readouterr().err
    assert not (tmp_path / FILE).exists()


def test_the_command_runs_as_documented(root):
    """Does `python -m grader.seeding new --course DIR` work as a command?"""
    done = subprocess.run(
        [sys.executable, "-m", "grader.seeding", "new", "--course", str(root)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != ENV},
    )
    assert done.returncode == 0, done.stderr
    assert mode(root / FILE) == 0o600


def test_a_missing_secret_names_the_file_and_the_command(root):
    """Without a secret, is MissingSecret one line naming the file and the command?"""
    with pytest.raises(MissingSecret) as info:
        course_secret(root)
    message = str(info.value)
    assert f"no course secret at {root / FILE}" in message
    assert command(root) in message and "\n" not in message


@pytest.mark.parametrize("text", ["10440278426185\n", "", "zz" * 32, "ab" * 33])
def test_a_malformed_secret_is_refused(root, text):
    """Is a file that is not 64 hex characters refused, naming the command?"""
    (root / FILE).write_text(text)
    with pytest.raises(MissingSecret, match="not 64 hex characters") as info:
        course_secret(root)
    assert command(root) in str(info.value) and "\n" not in str(info.value)


def test_the_environment_overrides_the_file_and_is_checked(root, monkeypatch):
    """Does I1_COURSE_SECRET win over the file, and is a malformed one refused too?"""
    main(["new", "--course", str(root)])
    monkeypatch.setenv(ENV, "AB" * 32)
    assert course_secret(root) == "ab" * 32
    monkeypatch.setenv(ENV, "not-a-number")
    with pytest.raises(MissingSecret, match=f"^{ENV} is set but is not 64 hex characters"):
        course_secret(root)


def test_the_course_is_found_from_a_folder_inside_it(root):
    """Is the course around a subfolder (source/<assignment>) the one with the config?"""
    inner = root / "source" / "i1"
    inner.mkdir(parents=True)
    assert course_folder(inner) == root
    assert course_folder(root.parent) == root.parent


def test_grading_reads_the_secret_of_the_course_it_runs_in(root, tmp_path):
    """Does a submission's draw come from its own course's secret file?"""
    other = tmp_path / "other"
    shutil.copytree(root, other)
    for folder in (root, other):
        main(["new", "--course", str(folder)])
    resources = {"nbgrader": {"student": "ada", "assignment": "a", "db_url": None}}
    ours = submission_draw(resources, root)
    assert ours == Draw(course_secret(root), "ada", "")
    assert ours.key != submission_draw(resources, other).key
    assert course_draw(root).secret == (root / FILE).read_text().strip()


def test_changing_the_secret_changes_the_hidden_cases(root, capsys):
    """Does rotating the secret draw other hidden cases, and keeping it the same ones?"""
    main(["new", "--course", str(root)])
    before = hidden_cases("strided_softmax", course_draw(root))
    assert hidden_cases("strided_softmax", course_draw(root)) == before
    main(["new", "--course", str(root), "--force"])
    assert hidden_cases("strided_softmax", course_draw(root)) != before


def test_a_scratch_course_gets_a_fresh_secret_of_its_own(tmp_path, monkeypatch):
    """Does new_course make a secret (0600) in the scratch course, a new one each time?"""
    monkeypatch.setattr(course, "nbgrader", lambda *args, **kwargs: None)  # no release needed
    monkeypatch.delenv(ENV)
    scratch = course.new_course(tmp_path / "scratch")
    first = course_secret(scratch)
    assert mode(scratch / FILE) == 0o600
    assert course_secret(course.new_course(scratch)) != first


@pytest.fixture
def no_secret(tmp_path, monkeypatch) -> Path:
    """A scratch course whose secret was removed; nbgrader must not be reached."""

    def nbgrader(root, *args, **kwargs):
        if args[:1] == ("autograde",):
            raise AssertionError("nbgrader autograde ran without a course secret")

    monkeypatch.setattr(course, "nbgrader", nbgrader)
    root = course.new_course(tmp_path / "scratch")
    (root / FILE).unlink()
    monkeypatch.delenv(ENV)
    monkeypatch.delenv(sandbox.UNSAFE_ENV, raising=False)
    return root


def test_grading_refuses_without_the_secret(no_secret):
    """Do ready_to_grade and autograde refuse, naming the command, even when unsandboxed?"""
    for unsafe in (False, True):
        with pytest.raises(sandbox.SandboxUnavailable) as info:
            readiness.ready_to_grade(no_secret, unsafe)
        assert command(no_secret) in str(info.value)
    assert sandbox.UNSAFE_ENV not in os.environ
    with pytest.raises(course.CourseError) as info:
        course.autograde(no_secret)
    assert str(info.value).startswith(f"no course secret at {no_secret / FILE}")
    assert command(no_secret) in str(info.value)
    with pytest.raises(MissingSecret):
        draw_for(None, "a", "ada", no_secret)


def test_the_grading_commands_refuse_without_the_secret(no_secret, capsys):
    """Do parallel and recheck exit 2 with one line naming the command?"""
    (no_secret / "gradebook.db").write_bytes(b"")  # recheck looks for one first
    runs = {
        "parallel": lambda: parallel.main([course.ASSIGNMENT, "--course", str(no_secret)]),
        "recheck": lambda: recheck.main([course.ASSIGNMENT, "--course", str(no_secret)]),
    }
    for prog, run in runs.items():
        assert run() == 2, prog
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"{prog}: no course secret at "), lines
        assert command(no_secret) in lines[0]


def committed_files() -> list[Path]:
    """The files git tracks, and those it would add (untracked, not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [REPO / name for name in listed.split("\0") if name and (REPO / name).is_file()]


def known_secrets() -> list[str]:
    """The tests' secret, and this checkout's own when it has one."""
    own = REPO / FILE
    return [os.environ[ENV]] + ([own.read_text().strip()] if own.is_file() else [])


def test_no_secret_in_the_repository():
    """Is the secret file git-ignored, and does no committed file hold a secret or a token
    like one (the old committed seed file is gone)?"""
    ignored = subprocess.run(["git", "check-ignore", "-q", FILE], cwd=REPO)
    assert ignored.returncode == 0, f"{FILE} is not git-ignored"
    files = committed_files()
    names = {str(p.relative_to(REPO)) for p in files}
    assert FILE not in names and "grader/secret_seed.txt" not in names
    known = known_secrets()
    for path in files:
        text = path.read_bytes().decode(errors="replace")
        assert not [secret for secret in known if secret in text], path
        if "secret" in path.name:
            assert not TOKEN.search(text), f"{path} holds a 64-hex token"


def test_no_secret_in_the_release():
    """Does nothing under release/ hold a secret or a token like one?"""
    files = [p for p in (REPO / "release").rglob("*") if p.is_file()]
    assert files
    known = known_secrets()
    for path in files:
        assert FILE not in path.name
        text = path.read_bytes().decode(errors="replace")
        assert not [secret for secret in known if secret in text], path
        assert not TOKEN.search(text), f"a 64-hex token in {path}"
