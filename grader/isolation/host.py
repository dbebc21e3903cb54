"""The one way to warn the instructor a sandbox starts for: once a process, on stderr. (Facts
about the host a sandbox starts from, its user and whether it runs as root, are
`learning.workshops.checking.bubblewrap`'s, which the student's check shares.)"""

from __future__ import annotations

import sys

_told: set[str] = set()


def say_once(text: str) -> None:
    """Write `text` on stderr, once per process: a warning the instructor must see."""
    if text not in _told:
        _told.add(text)
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
