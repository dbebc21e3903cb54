"""Facts about the host a sandbox starts from, and the one way to warn its instructor."""

from __future__ import annotations

import os
import sys
from pathlib import Path

SANDBOX_UID = 65534
"""The sandbox's user and group (nobody/nogroup): on the host, when run as root, as well."""
CAP_SYS_ADMIN = 21
_told: set[str] = set()


def say_once(text: str) -> None:
    """Write `text` on stderr, once per process: a warning the instructor must see."""
    if text not in _told:
        _told.add(text)
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def privileged() -> bool:
    """Whether this process is root with CAP_SYS_ADMIN: bwrap then needs no user namespace."""
    if os.geteuid() != 0:
        return False
    status = Path("/proc/self/status").read_text()
    caps = next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff"))
    return bool(int(caps, 16) >> CAP_SYS_ADMIN & 1)
