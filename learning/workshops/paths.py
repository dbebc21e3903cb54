"""Checks on the paths a command is given, made before it writes anything."""

from __future__ import annotations

import os
from pathlib import Path


def unwritable(folder: Path) -> str | None:
    """Why files cannot be written in `folder` (made first if need be); None when they can."""
    existing = folder
    while not os.path.exists(existing):
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    return None
