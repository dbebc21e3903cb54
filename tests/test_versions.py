"""torch and Triton outside the supported range are refused at import, with the fix."""

from __future__ import annotations

import importlib
import sys
from importlib import metadata
from pathlib import Path

import nbformat
import pytest
import triton

import learning.workshops
from learning.workshops import versions

SETUP_CHECK = Path(__file__).resolve().parents[1] / "notebooks" / "setup_check.ipynb"


def fake_versions(monkeypatch: pytest.MonkeyPatch, **installed: str) -> None:
    """Make `installed` the only distributions `importlib.metadata` knows (its versions)."""

    def version(distribution: str) -> str:
        if distribution not in installed:
            raise metadata.PackageNotFoundError(distribution)
        return installed[distribution]

    monkeypatch.setattr(versions.metadata, "version", version)


@pytest.mark.parametrize(
    ("torch", "triton"),
    [("2.11.0", "3.6.0"), ("2.13.0+cpu", "3.9.0"), ("2.13.0a0+git1234abc", "3.9.9")],
)
def test_supported_versions_pass(monkeypatch, torch, triton):
    """Do the range's ends and local builds (+cpu, +git) pass the check?"""
    fake_versions(monkeypatch, torch=torch, triton=triton)
    versions.check()


def test_pytorch_triton_counts_as_triton(monkeypatch):
    """Is a nightly's pytorch-triton 3.6.0+git1234 read as Triton 3.6 and accepted?"""
    fake_versions(monkeypatch, torch="2.12.0", **{"pytorch-triton": "3.6.0+git1234"})
    versions.check()


@pytest.mark.parametrize(
    ("name", "torch", "triton"),
    [
        ("triton", "2.13.0", "3.5.1"),
        ("triton", "2.13.0", "3.10.0"),
        ("triton", "2.13.0", "3.10.0rc1"),
        ("torch", "2.10.0+cpu", "3.9.0"),
        ("torch", "2.14.0", "3.9.0"),
    ],
)
def test_unsupported_version_names_it_the_range_and_the_fix(monkeypatch, name, torch, triton):
    """Is a too old or too new version refused with its version, the range and pip's command?"""
    fake_versions(monkeypatch, torch=torch, triton=triton)
    with pytest.raises(versions.UnsupportedVersion) as raised:
        versions.check()
    text = str(raised.value)
    found = {"torch": torch, "triton": triton}[name]
    assert f"{name} {found} is installed" in text
    assert "torch>=2.11,<2.14 and triton>=3.6,<3.10" in text
    assert f'{sys.executable} -m pip install "{versions.requirement(name)}"' in text
    assert "\n" not in text


def test_torch_fix_names_the_cpu_index(monkeypatch):
    """Does the fix for torch say where the CPU build comes from?"""
    fake_versions(monkeypatch, torch="2.9.1", triton="3.9.0")
    with pytest.raises(versions.UnsupportedVersion, match="whl/cpu"):
        versions.check()


def test_both_wrong_are_named_in_one_message(monkeypatch):
    """Are a missing Triton and an old torch both named, each with its command?"""
    fake_versions(monkeypatch, torch="2.10.0")
    with pytest.raises(versions.UnsupportedVersion) as raised:
        versions.check()
    text = str(raised.value)
    assert "torch 2.10.0 is installed and triton is not installed" in text
    assert 'pip install "torch>=2.11,<2.14"' in text
    assert 'pip install "triton>=3.6,<3.10"' in text


def test_unreadable_version_is_refused(monkeypatch):
    """Is a version with no release numbers refused rather than guessed?"""
    fake_versions(monkeypatch, torch="2.13.0", triton="unknown")
    with pytest.raises(versions.UnsupportedVersion, match="triton unknown is installed"):
        versions.check()


@pytest.mark.parametrize(
    ("version", "numbers"),
    [("3.6.0+git1234", (3, 6, 0)), ("2.13.0+cpu", (2, 13, 0)), ("3.10", (3, 10)), ("x", None)],
)
def test_release_reads_the_release_numbers(version, numbers):
    """Are local and pre-release parts left out of the compared numbers?"""
    assert versions.release(version) == numbers


def test_importing_the_package_checks(monkeypatch):
    """Does importing learning.workshops itself refuse an unsupported Triton?"""
    fake_versions(monkeypatch, torch="2.13.0", triton="3.3.1")
    with pytest.raises(versions.UnsupportedVersion, match="triton 3.3.1 is installed"):
        importlib.reload(learning.workshops)


def run_setup_versions(monkeypatch, capsys, triton_version: str) -> tuple[dict, str]:
    """The setup check's versions cell, run with Triton reporting `triton_version`: its
    names and what it printed."""
    monkeypatch.setattr(triton, "__version__", triton_version)
    cell = next(c for c in nbformat.read(SETUP_CHECK, 4).cells if c.get("id") == "versions")
    namespace: dict = {}
    exec(cell.source, namespace)
    return namespace, capsys.readouterr().out


def test_the_setup_check_states_the_supported_ranges(monkeypatch, capsys):
    """Does notebooks/setup_check.ipynb check torch and Triton against the ranges the package
    enforces (pyproject.toml's), and pass the installed ones?"""
    namespace, out = run_setup_versions(monkeypatch, capsys, triton.__version__)
    ranges = {name: (low, high) for name, _, low, high in namespace["checks"]}
    assert {name: ranges[name] for name in versions.SUPPORTED} == versions.SUPPORTED
    assert namespace["too_old"] == []
    assert "too " not in out


@pytest.mark.parametrize(
    ("version", "status", "too_old"),
    [
        ("3.5.1", "too old, need >=3.6,<3.10", ["triton"]),
        ("3.10.0", "too new, need >=3.6,<3.10", []),
        ("3.6.0", "ok", []),
    ],
)
def test_the_setup_check_warns_outside_the_range(monkeypatch, capsys, version, status, too_old):
    """Does the setup check flag a Triton below 3.6 or from 3.10 on, saying which range it
    needs, and still count only a too old one as one to upgrade?"""
    namespace, out = run_setup_versions(monkeypatch, capsys, version)
    assert f"triton  {version:<14} {status}\n" in out
    assert namespace["too_old"] == too_old
