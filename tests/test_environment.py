"""environment.yml and pyproject.toml agree, so conda and pip users get the same packages."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

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
