"""pyproject.toml, environment.yml, the Makefile and CI install the same packages, torch and
Triton in the range learning.workshops accepts at import."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from learning.workshops import versions

REPO = Path(__file__).resolve().parents[1]


def names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[ ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_environment_matches_pyproject():
    """Does environment.yml's pip section list exactly the runtime and course packages?"""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = names(project["dependencies"] + project["optional-dependencies"]["course"])
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-e ." in pip, "environment.yml must install this repository"
    assert names([p for p in pip if p != "-e ."]) == wanted


def test_environment_python_satisfies_pyproject():
    """Is the conda Python version one that pyproject.toml allows?"""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    major, minor = map(int, python.removeprefix("python=").split(".")[:2])
    floor = tuple(map(int, project["requires-python"].removeprefix(">=").split(".")))
    assert (major, minor) >= floor


def test_pinned_versions_agree():
    """Where both files pin a version, is it the same pin?"""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    requirements = project["dependencies"] + project["optional-dependencies"]["course"]
    pins = {names([r]).pop(): r.replace(" ", "") for r in requirements}
    for entry in pip:
        if entry != "-e .":
            assert entry.replace(" ", "") == pins[names([entry]).pop()]


def test_supported_range_is_what_both_files_require():
    """Do pyproject.toml and environment.yml require exactly the torch and Triton range that
    learning.workshops accepts at import?"""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    for name in versions.SUPPORTED:
        assert versions.requirement(name) in project["dependencies"]
        assert versions.requirement(name) in pip


def test_ci_builds_the_environment_through_make_with_a_supported_torch():
    """Does CI build the environment as `make test` does, pinning a torch pyproject admits
    (2.13.0: the CPU build on CI's machines' disk) from the configured index?"""
    ci = (REPO / ".ci" / "run").read_text()
    pinned = re.search(r"^make test TORCH_INDEX= TORCH=torch==(\S+)$", ci, re.M)
    assert pinned, ci
    assert Version(pinned[1]) in SpecifierSet(versions.requirement("torch").removeprefix("torch"))


def dry_run_venv(torch_index: str) -> str:
    """What `make -n -B venv` would run, free of the variables an outer `make test` passes
    down (CI's TORCH=... reaches a nested make through MAKEFLAGS)."""
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}}
    made = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", "venv", f"TORCH_INDEX={torch_index}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return made.stdout


def test_make_falls_back_to_the_configured_index_when_the_cpu_index_fails():
    """When PyTorch's CPU index does not answer, does the venv recipe try the configured
    index instead of failing the build?"""
    made = dry_run_venv(versions.CPU_INDEX)
    assert f'|| .venv/bin/python -m pip install -q "{versions.requirement("torch")}"' in made


def test_make_installs_the_supported_torch():
    """Does the Makefile's .venv recipe install pyproject's torch range from the index given?"""
    made = dry_run_venv(versions.CPU_INDEX)
    assert f'--index-url {versions.CPU_INDEX} "{versions.requirement("torch")}"' in made


def test_make_leaves_out_the_slow_iri_format_checker():
    """Does the venv recipe remove rfc3987-syntax, and does nbformat then import without it
    (it built a parser for 2.3 s in every process that reads a notebook)?"""
    assert "pip uninstall -q -y rfc3987-syntax" in dry_run_venv(versions.CPU_INDEX)
    probe = "import sys, nbformat; print('rfc3987_syntax' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.split() == ["False"], done.stderr


def test_make_asks_a_silent_torch_index_once_then_takes_the_configured_one(tmp_path):
    """When the torch index accepts the connection and never answers, does the venv recipe give
    up after one 5 s request and install from the configured index (pip alone retried it for
    99.6 s, 5 tries of its 15 s timeout), saying so?"""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # connections queue in the backlog; nothing is ever read or written
    index = f"http://127.0.0.1:{silent.getsockname()[1]}/"
    recipe = dry_run_venv(index)
    step = recipe[recipe.index("if .venv") : recipe.index("\nfi\n") + 4]
    pip = tmp_path / "pip"
    pip.write_text('#!/bin/sh\necho "pip $*"\n')
    pip.chmod(0o755)
    step = step.replace(".venv/bin/python -m pip", str(pip)).replace(
        ".venv/bin/python", sys.executable
    )
    started = time.monotonic()
    done = subprocess.run(["sh", "-c", step], capture_output=True, text=True, timeout=60)
    seconds = time.monotonic() - started
    silent.close()
    torch = versions.requirement("torch")
    assert done.stdout.splitlines() == [
        f"torch: {index} gave no answer in one try of 5 s; the configured index then",
        f"pip install -q {torch}",
    ], done
    assert 4.5 < seconds < 10, seconds


def test_make_takes_the_configured_index_without_asking_when_torch_index_is_empty():
    """With TORCH_INDEX= (CI's choice), does the recipe install from the configured index and
    make no request first?"""
    recipe = dry_run_venv("")
    assert "urlopen" not in recipe and "--index-url" not in recipe, recipe
    assert f'.venv/bin/python -m pip install -q "{versions.requirement("torch")}"\n' in recipe


def test_gpu_check_warns_when_torch_would_load_from_source(monkeypatch, tmp_path):
    """Does the GPU check's table say when torch has no bytecode and this Python writes none
    (each grading process would import torch from source), and only then?"""
    import importlib.util

    from grader import gpu_check

    missing = tmp_path / "__pycache__" / "__init__.cpython-3.pyc"
    monkeypatch.setattr(importlib.util, "cache_from_source", lambda path: str(missing))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    (warning,) = gpu_check.bytecode_warning()
    assert "torch has no bytecode" in warning and "scripts/gpu_check.sh" in warning
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert gpu_check.bytecode_warning() == []
    missing.parent.mkdir()
    missing.write_bytes(b"")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert gpu_check.bytecode_warning() == []
