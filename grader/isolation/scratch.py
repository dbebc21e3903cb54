"""A sandbox's scratch folder, and reading back what a sandbox wrote there.

As root the folder is a tmpfs of the sandbox's size owned by its user; the files it leaves
are read without following a link or blocking on a FIFO put in their place.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import lru_cache
from pathlib import Path

from grader.isolation.limits import DEFAULT_LIMITS, Limits
from learning.workshops.checking.bubblewrap import SANDBOX_UID, privileged


@contextmanager
def scratch(limits: Limits = DEFAULT_LIMITS, prefix: str = "i1-sandbox-") -> Iterator[Path]:
    """A fresh scratch folder for one sandbox's /work, removed afterwards. As root it is a
    tmpfs of `limits.work_bytes` owned by the sandbox's user, so a student filling it fills
    neither the disk nor more memory than that; otherwise a plain folder (RLIMIT_FSIZE only)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    mounted = False
    try:
        mounted = privileged() and _mount_tmpfs(folder, limits.work_bytes)
        folder.chmod(0o755)
        if privileged():  # the sandbox runs as the host's uid 65534
            os.chown(folder, SANDBOX_UID, SANDBOX_UID)
        yield folder
    finally:
        if mounted:
            _libc().umount2(str(folder).encode(), 2)  # MNT_DETACH
        remove_tree(folder)


def remove_tree(folder: Path) -> None:
    """Remove `folder` and everything in it, even folders a sandbox made unreadable or
    unwritable (mode 000): each is made its owner's again first, never through a symlink.
    Call it once nothing runs in there any more."""
    with suppress(OSError):
        os.chmod(folder, 0o700)
    for top, dirs, _ in os.walk(folder):  # top-down: a folder is opened before it is listed
        for name in dirs:
            path = os.path.join(top, name)
            with suppress(OSError):
                if stat.S_ISDIR(os.lstat(path).st_mode):
                    os.chmod(path, 0o700)
    shutil.rmtree(folder, ignore_errors=True)


@lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _mount_tmpfs(folder: Path, size_bytes: int) -> bool:
    """Mount a tmpfs of `size_bytes` on `folder` (no devices, no setuid); False if refused."""
    flags = 0x2 | 0x4  # MS_NOSUID | MS_NODEV
    options = f"size={size_bytes},mode=0755".encode()
    return _libc().mount(b"tmpfs", str(folder).encode(), b"tmpfs", flags, options) == 0
