"""What the sandbox sees of the course's code is one folder, `learning/`, bound whole: every
module in it imports there on its own, with no part of `grader/` on any path."""

from __future__ import annotations

import sys

from grader.isolation.sandbox import run_sandboxed
from grader.isolation.scratch import scratch
from tests.sandboxing import needs_sandbox

IMPORT_ALL = """\
import importlib, pkgutil, sys
import learning
names = [m.name for m in pkgutil.walk_packages(learning.__path__, "learning.")]
failed = []
for name in names:
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print("modules", len(names))
print("failed", failed)
print("grader", [m for m in sys.modules if m == "grader" or m.startswith("grader.")])
"""


@needs_sandbox
def test_every_learning_module_imports_alone_in_the_sandbox():
    """Do the modules the sandboxed children run (the check's child, the timing's server) and
    every other module of `learning/` import in the sandbox, where `grader/` is absent?"""
    with scratch() as work:
        run = run_sandboxed([sys.executable, "-c", IMPORT_ALL], work=work, timeout_s=120)
    output = run.output.decode(errors="replace")
    assert run.returncode == 0, output
    lines = dict(line.split(" ", 1) for line in output.splitlines() if " " in line)
    assert int(lines["modules"]) > 30, output
    assert lines["failed"] == "[]", output
    assert lines["grader"] == "[]", output
