"""Run a student's code under bubblewrap, where it reaches nothing but its own scratch folder.

What the sandbox sees: read-only, the system's `/usr` (and `/bin`, `/lib*` as the host lays
them out), the few `/etc` files a program needs, this Python's prefixes and packages at their
own paths (so `sys.executable` works), and `learning/` at `/course/learning`; read-write, the
caller's scratch folder at `/work` (its working directory), a fresh `/tmp` and `/dev/shm`;
on a CUDA machine the `/dev/nvidia*` nodes. Not the repository, not `grader/`, not the
gradebook, the secret or any course folder. It has its own PID, network (loopback only),
IPC, UTS and cgroup namespaces, a new session, no capabilities, the grader's environment
cleared, and it dies with its parent.

The user: run as root (CI, a grading server), the sandboxed command starts through
`setpriv` as the host's uid 65534, which owns nothing; run as anyone else, bwrap makes a user
namespace with uid 65534 inside. That, the namespaces, the system mounts and which bwrap runs
are `learning.workshops.checking.bubblewrap`'s, shared with the student's check; what this
sandbox binds beyond them, its limits and its environment are grading's own.

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
import sys
import tempfile
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path, PurePosixPath

import learning
from grader.isolation import bwrap as bubblewrap
from grader.isolation.cgroups import cpu_limited, sandbox_cgroups
from grader.isolation.host import say_once as _say_once
from grader.isolation.limits import DEFAULT_LIMITS, Limits, MiB
from grader.isolation.process import SandboxRun, run_bounded
from learning.workshops.checking.bubblewrap import (
    as_sandbox_user,
    namespaces,
    nvidia_nodes,
    system_mounts,
)
from learning.workshops.checking.bubblewrap import privileged as _privileged
from learning.workshops.checking.bubblewrap import python_paths as _python_paths

UNSAFE_ENV = "I1_UNSAFE_NO_SANDBOX"
UNSAFE_FLAG = "--unsafe-no-sandbox"
LEARNING = Path(learning.__file__).resolve().parent
REPO = Path(__file__).resolve().parents[2]
WORK = "/work"
COURSE = "/course"
HOME = "/tmp/home"
REPORT_FD = "{report_fd}"
"""An argv element `run_sandboxed` replaces with the number of its report pipe."""
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
    """Namespaces, session and capabilities (`bubblewrap.namespaces`: the module's docstring
    says which, as root and not)."""
    return namespaces(privileged)


def _drop_to_sandbox_user(privileged: bool) -> list[str]:
    """As root, start the command as the host's uid 65534, with no way back to privilege."""
    return as_sandbox_user(_tool("setpriv")) if privileged else []


def _filesystem(
    work: Path, gpu: bool, limits: Limits, extra: Sequence[tuple[Path, str]] = ()
) -> list[str]:
    """Every mount of the sandbox: system, Python, `learning/`, extras, scratch, devices."""
    mounts = system_mounts()
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


def python_paths() -> list[str]:
    """Where this Python's files live (`bubblewrap.python_paths`), less anything that could
    show the course; the sandbox binds them read-only at the same paths."""
    return _python_paths(_exposes_course)


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
