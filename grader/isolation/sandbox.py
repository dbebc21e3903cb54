"""Run a student's code under bubblewrap, where it reaches nothing but its own scratch folder.

What the sandbox sees: read-only, the system's `/usr` (and `/bin`, `/lib*` as the host lays
them out), the few `/etc` files a program needs, this Python's prefixes and packages at their
own paths (so `sys.executable` works), and `learning/` at `/course/learning`; read-write, the
caller's scratch folder at `/work` (its working directory), a fresh `/tmp` and `/dev/shm`;
on a CUDA machine the `/dev/nvidia*` nodes. Not the repository, not `grader/`, not the
gradebook, the secret or any course folder. It has its own PID, network (loopback only),
IPC, UTS and cgroup namespaces, a new session, no capabilities, the grader's environment
cleared, and it dies with its parent.

The user. Run as root (CI, a grading server), bwrap runs without a user namespace and the
sandboxed command starts through `setpriv` as the host's uid 65534, which owns nothing:
a user namespace made by root would map the sandbox's user to host root, and a bwrap run
as 65534 cannot bind a Python installed under `/root` (mode 700). Run as anyone else, bwrap
makes a user namespace (`--unshare-all`) with uid 65534 inside and further ones disabled.

Limits, each enforced by the kernel: a fresh pids, memory and cpu cgroup per sandbox under
this process's own, entered before bwrap starts (RLIMIT_NPROC of the sandbox user where no
pids cgroup can be made; `grader.isolation.cpu_share` where no cpu cgroup can); RLIMIT_DATA
per process, which leaves CUDA's mappings alone; RLIMIT_FSIZE; sized tmpfs mounts for
`/tmp`, `/dev/shm` and, from `scratch()`, `/work`. Memory and cores are this machine's share
divided among the workers grading on it (`grader.isolation.limits`).
`run_sandboxed` kills the whole sandbox on timeout: bwrap's PID namespace dies with its
first process, and whatever is left in the cgroups is killed before they are removed.

Start-up cost (`python -c pass`, median of 5, `test_start_overhead_is_small`): 27 ms bare,
48 ms sandboxed on 2 shared cores; 74 and 100 ms on the H200 machine; torch, CUDA and a
freshly compiled Triton kernel work inside.

No nbgrader here (`tests/test_layout.py`): what grades a notebook in this sandbox is
`grader.grading.execute`, and what checks a course before grading is
`grader.grading.readiness`.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import site
import sys
import tempfile
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path, PurePosixPath

import learning
from grader.isolation import bwrap as bubblewrap
from grader.isolation.cgroups import cpu_limited, sandbox_cgroups
from grader.isolation.host import SANDBOX_UID
from grader.isolation.host import privileged as _privileged
from grader.isolation.host import say_once as _say_once
from grader.isolation.limits import DEFAULT_LIMITS, Limits, MiB
from grader.isolation.process import SandboxRun, run_bounded

UNSAFE_ENV = "I1_UNSAFE_NO_SANDBOX"
UNSAFE_FLAG = "--unsafe-no-sandbox"
LEARNING = Path(learning.__file__).resolve().parent
REPO = Path(__file__).resolve().parents[2]
WORK = "/work"
COURSE = "/course"
HOME = "/tmp/home"
REPORT_FD = "{report_fd}"
"""An argv element `run_sandboxed` replaces with the number of its report pipe."""
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("ld.so.cache", "passwd", "group", "nsswitch.conf", "hosts", "localtime", "fonts")
COURSE_MARKS = ("gradebook.db", "nbgrader_config.py", "*/gradebook.db", "*/nbgrader_config.py")
"""Files that mark a folder (or its subfolder) as a course, as glob patterns."""
PASSED_ENV = ("LANG", "TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES", "NBGRADER_EXECUTION")
"""Variables of the grader's environment that the sandbox gets; nothing else passes."""


class SandboxUnavailable(Exception):
    """The sandbox cannot start here, or grading may not (`grader.grading.readiness` raises
    it too); the message says what to do."""


CPU_SHARE = Path(__file__).resolve().parent / "cpu_share.py"


def require_bwrap() -> str:
    """The path of a `bwrap` that has started a sandbox here (`grader.isolation.bwrap`: the
    system's or the environment's, checked once a process); raise SandboxUnavailable, saying
    what to do, without."""
    try:
        return bubblewrap.ready(_namespaces(_privileged()))
    except bubblewrap.BwrapUnavailable as exc:
        raise SandboxUnavailable(
            f"{exc} Or pass {UNSAFE_FLAG} to grade with no sandbox (student code can then "
            "read the gradebook, the hidden tests and the course secret)."
        ) from None


def unsafe_requested() -> bool:
    """Whether the instructor asked to grade without a sandbox (`--unsafe-no-sandbox`)."""
    return os.environ.get(UNSAFE_ENV) == "1"


def _tool(name: str) -> str:
    """The path of a util-linux tool the sandbox needs, or SandboxUnavailable naming it."""
    path = shutil.which(name)
    if path is None:
        raise SandboxUnavailable(
            f"the sandbox needs `{name}`, which is not on PATH: install the Debian package "
            f"`util-linux`, or pass {UNSAFE_FLAG} to grade with no sandbox."
        )
    return path


@lru_cache(maxsize=1)
def cuda_available() -> bool:
    """Whether this process sees a CUDA device: then the sandbox gets the NVIDIA nodes."""
    import torch

    return torch.cuda.is_available()


def sandboxed(
    argv: Sequence[str],
    *,
    work: Path,
    gpu: bool | None = None,
    env: dict[str, str] | None = None,
    limits: Limits = DEFAULT_LIMITS,
    cgroups: Sequence[Path] = (),
    extra: Sequence[tuple[Path, str]] = (),
) -> list[str]:
    """The command that runs `argv` sandboxed in `work` (seen as /work); `argv` itself, with
    a loud warning, when the instructor passed --unsafe-no-sandbox (run it in `work`).

    `cgroups` (from `sandbox_cgroups`) are entered before bwrap starts; without any, the
    sandbox user's RLIMIT_NPROC bounds its processes instead. `extra` binds more host
    folders read-only, each at the path given."""
    if unsafe_requested():
        _say_once(
            f"WARNING: {UNSAFE_ENV}=1 ({UNSAFE_FLAG}): student code runs WITHOUT A SANDBOX and "
            "can read the gradebook, the hidden tests and the course secret."
        )
        return list(argv)
    bwrap = require_bwrap()
    privileged = _privileged()
    gpu = cuda_available() if gpu is None else gpu
    return [
        *_outside(limits, cgroups),
        bwrap,
        *_namespaces(privileged),
        *_filesystem(Path(work), gpu, limits, extra),
        *_environment(env),
        "--",
        *_drop_to_sandbox_user(privileged),
        *argv,
    ]


def inside(work: Path, path: Path) -> str:
    """Where the sandbox sees `path`, a file in the scratch folder `work`."""
    relative = Path(path).resolve().relative_to(Path(work).resolve())
    if unsafe_requested():
        return str(Path(work).resolve() / relative)
    return str(PurePosixPath(WORK) / relative)


def _outside(limits: Limits, cgroups: Sequence[Path]) -> list[str]:
    """What runs before bwrap, on the host: enter the cgroups; without a cpu cgroup, hold
    the sandbox to its cores with `grader.isolation.cpu_share`; make it the OOM killer's
    first choice; then set the rlimits (no raising its priority: RLIMIT_NICE 0)."""
    rlimits = [_tool("prlimit"), f"--data={limits.memory_bytes}", "--core=0", "--nice=0"]
    rlimits.append(f"--fsize={limits.file_bytes}")
    if not any((c / "pids.max").exists() for c in cgroups):
        rlimits.append(f"--nproc={limits.processes}")
    if limits.cpu_s is not None:
        rlimits.append(f"--cpu={limits.cpu_s}")
    rlimits = [*_oom_first(), *rlimits, "--"]
    if not cpu_limited(cgroups):
        rlimits = [sys.executable, "-I", str(CPU_SHARE), f"--cores={limits.cpu_cores:g}", "--"] + (
            rlimits
        )
    if not cgroups:
        return rlimits
    enter = 'for f; do [ "$f" = -- ] && break; echo $$ >"$f" || exit 125; shift; done; shift'
    procs = [str(c / "cgroup.procs") for c in cgroups]
    return ["/bin/sh", "-c", enter + '; exec "$@"', "sh", *procs, "--", *rlimits]


def _oom_first() -> list[str]:
    """`choom` setting the sandbox's oom_score_adj to 1000 (it cannot lower it), so that
    when memory runs out the kernel kills a sandbox, not the grader; nothing without choom."""
    path = shutil.which("choom")
    return [path, "-n", "1000", "--"] if path else []


def _namespaces(privileged: bool) -> list[str]:
    """Namespaces, session and capabilities: see the module's docstring for the two modes."""
    common = ["--hostname", "sandbox", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if privileged:  # setpriv needs these three to become uid 65534 and drop the bounding set
        keep = ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
        unshare = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
        return [*unshare, "--unshare-cgroup-try", *common, *keep]
    ids = ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    return ["--unshare-all", "--unshare-user", "--disable-userns", *ids, *common]


def _drop_to_sandbox_user(privileged: bool) -> list[str]:
    """As root, start the command as the host's uid 65534, with no way back to privilege."""
    if not privileged:
        return []
    ids = [f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups"]
    drop = ["--no-new-privs", "--inh-caps=-all", "--bounding-set=-all"]
    return [_tool("setpriv"), *ids, *drop, "--"]


class _Mounts:
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


def _filesystem(
    work: Path, gpu: bool, limits: Limits, extra: Sequence[tuple[Path, str]] = ()
) -> list[str]:
    """Every mount of the sandbox: system, Python, `learning/`, extras, scratch, devices."""
    mounts = _Mounts()
    for name in SYSTEM_DIRS:
        if os.path.islink(name):
            mounts.add("--symlink", os.readlink(name), name)
        elif os.path.isdir(name):
            mounts.add("--ro-bind", name, name)
    for name in ETC_FILES:
        mounts.add("--ro-bind-try", f"/etc/{name}", f"/etc/{name}")
    mounts.args += ["--proc", "/proc", "--dev", "/dev"]
    mounts.made.update({"/proc", "/dev"})
    mounts.tmpfs("/tmp", limits.tmp_bytes)
    mounts.tmpfs("/dev/shm", 64 * MiB)
    mounts.args += ["--perms", "1777", "--dir", HOME]
    mounts.add("--bind", work.resolve(), WORK)
    # After the scratch folder: a Python environment inside a folder named like it (a
    # project's .venv under /work, say) is then bound over it, not hidden by it.
    for path in python_paths():
        mounts.add("--ro-bind", path, path)
    mounts.add("--ro-bind", LEARNING, f"{COURSE}/learning")
    for source, dest in extra:
        mounts.add("--ro-bind", Path(source).resolve(), dest)
    if gpu:
        for node in nvidia_nodes():
            mounts.add("--dev-bind", node, node)
    return [*mounts.args, "--chdir", WORK]


def nvidia_nodes() -> list[str]:
    """The NVIDIA device nodes of this machine (`/dev/nvidia*`, `/dev/nvidia-caps`)."""
    return sorted(str(p) for p in Path("/dev").glob("nvidia*"))


def python_paths() -> list[str]:
    """Where this Python's files live: its prefixes, its site-packages and PYTHONPATH's
    folders, less the system directories and anything that could show the course. The
    sandbox binds them read-only at the same paths; other sys.path entries (a script's
    folder, the working directory, a test runner's additions) are not bound."""
    entries = [sys.base_prefix, sys.prefix, sys.base_exec_prefix, sys.exec_prefix]
    entries += [*site.getsitepackages(), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    found = sorted({os.path.abspath(e) for e in entries if e and os.path.exists(e)})
    kept: list[str] = []
    for path in found:
        if _under(path, [*SYSTEM_DIRS, *kept]) or _exposes_course(Path(path)):
            continue
        kept.append(path)
    return kept


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _exposes_course(path: Path) -> bool:
    """Whether binding `path` could show the course: the repository or anything in it but a
    virtual environment, a parent of the repository, of the working directory or of the
    temporary folder, or a folder that holds a gradebook or an nbgrader config (or whose
    subfolder does)."""
    for root in (REPO, Path.cwd().resolve(), Path(tempfile.gettempdir()).resolve()):
        if path == root or path in root.parents:
            return True
    if path.is_relative_to(REPO):
        return not any(path.is_relative_to(p) for p in (sys.prefix, sys.exec_prefix))
    return path.is_dir() and any(next(path.glob(mark), None) for mark in COURSE_MARKS)


def inside_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The sandbox's whole environment: a fixed set, a few of the grader's, and `extra`."""
    bound = set(python_paths())
    passed_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p in bound]
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": HOME,
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.pathsep.join([COURSE, *passed_path]),
        "PYTHONNOUSERSITE": "1",
        "MPLBACKEND": "Agg",
        "TRITON_CACHE_DIR": "/tmp/triton",
    }
    env.update({name: os.environ[name] for name in PASSED_ENV if name in os.environ})
    env.update(extra or {})
    return env


def _environment(extra: dict[str, str] | None) -> list[str]:
    args = ["--clearenv"]
    for name, value in inside_env(extra).items():
        args += ["--setenv", name, value]
    return args


def run_sandboxed(
    argv: Sequence[str],
    *,
    work: Path,
    timeout_s: float | None,
    report_limit_bytes: int | None = None,
    output_limit_bytes: int = MiB,
    limits: Limits = DEFAULT_LIMITS,
    **kw,
) -> SandboxRun:
    """Run `argv` sandboxed in `work` until it ends or `timeout_s` passes; nothing it started
    outlives this call. An argv element equal to REPORT_FD becomes the number of a pipe
    whose bytes come back as `report`. `kw` goes to `sandboxed` (gpu, env)."""
    started = time.monotonic()
    read_fd, write_fd = os.pipe() if report_limit_bytes is not None else (None, None)
    argv = [str(write_fd) if a == REPORT_FD else a for a in argv]
    with sandbox_cgroups(limits) as cgroups:
        command = sandboxed(argv, work=work, limits=limits, cgroups=cgroups, **kw)
        env = dict(os.environ, **(kw.get("env") or {})) if unsafe_requested() else None
        run = run_bounded(
            command,
            cwd=work,
            deadline=None if timeout_s is None else started + timeout_s,
            report=(read_fd, write_fd),
            limits_bytes=(output_limit_bytes, report_limit_bytes),
            env=env,
        )
    return dataclasses.replace(run, seconds=time.monotonic() - started)
