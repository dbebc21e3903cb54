"""Whether this machine can sandbox student code: the tests that need bubblewrap skip without.

`bwrap` need not be on PATH: grading finds the system's or the environment's own
(`grader.isolation.bwrap`), so the tests ask the grader, not `shutil.which`."""

from __future__ import annotations

import functools

import pytest

from grader.isolation import sandbox


@functools.cache
def sandbox_missing() -> str | None:
    """Why no sandbox can start here, or None when one can."""
    try:
        sandbox.require_bwrap()
    except sandbox.SandboxUnavailable as exc:
        return str(exc)
    return None


needs_sandbox = pytest.mark.skipif(
    sandbox_missing() is not None, reason="needs a working bubblewrap (grader.isolation.bwrap)"
)
