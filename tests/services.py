"""Private services for the multi-machine tests (tests/test_postgres.py, tests/test_slurm.py):
a PostgreSQL cluster and a one-node Slurm cluster, each in a temporary folder of its own, on
free loopback ports, stopped and deleted when the block ends. Nothing system-wide is touched:
no systemd, no /etc, no default ports.

Both come from Debian's packages (`postgresql`; `slurm-wlm` and `munge`), which `.ci/run`
installs. Without them the tests skip and say what to install, unless I1_REQUIRE_SERVICES=1
(set by `.ci/run`), which turns the skip into a failure so CI cannot pass without running them.

    python tests/services.py postgres   # start one and print its URL until Ctrl-C
    python tests/services.py slurm      # a Slurm cluster too; prints its SLURM_CONF
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REQUIRE_ENV = "I1_REQUIRE_SERVICES"
"""Set to 1 (CI) to fail, not skip, when a service's packages are missing."""
PG_USER = "postgres"
"""The cluster's superuser, and Debian's PostgreSQL account: initdb refuses to run as root,
so root runs it as this user (as `nobody` where there is no such account)."""
PG_BINDIR_ENV = "I1_PG_BINDIR"
"""A folder with initdb, pg_ctl and createdb to use instead of Debian's (on a machine without
the package: the GPU recipe, scripts/gpu_shards.sh, unpacks them from a wheel)."""


class ServiceUnavailable(Exception):
    """The service's packages are not installed here; the message says what to install."""


def unavailable(reason: str) -> None:
    """Skip the calling test with `reason`, or fail it when I1_REQUIRE_SERVICES=1."""
    import pytest

    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1: CI must run this test)")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait(ready, what: str, log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
            raise RuntimeError(f"{what} did not start within {timeout:g} s; its log:\n{tail}")
        time.sleep(0.2)


def _private_folder(prefix: str, owner: str | None = None) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    if owner is not None:
        user = pwd.getpwnam(owner)
        os.chown(folder, user.pw_uid, user.pw_gid)
    return folder


@dataclass(frozen=True)
class Postgres:
    """A running private PostgreSQL cluster: trust authentication on 127.0.0.1:port."""

    bindir: Path
    port: int
    as_user: tuple[str, ...]

    def url(self, database: str) -> str:
        """A plain `postgresql://` URL, as an instructor would write it (no driver named)."""
        return f"postgresql://{PG_USER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, database: str) -> str:
        """A new, empty database; its URL."""
        subprocess.run(
            [str(self.bindir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port)]
            + ["-U", PG_USER, database],
            check=True,
            capture_output=True,
        )
        return self.url(database)


@contextlib.contextmanager
def postgres() -> Iterator[Postgres]:
    """A PostgreSQL cluster of Debian's newest installed version, started for the block."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    if os.environ.get(PG_BINDIR_ENV):
        found = [str(Path(os.environ[PG_BINDIR_ENV]) / "initdb")]
    if not found:
        raise ServiceUnavailable(
            "no PostgreSQL server here: install Debian's `postgresql` (apt-get install -y "
            "postgresql; .ci/run does)"
        )
    bindir = Path(found[-1]).parent
    as_user: tuple[str, ...] = ()
    owner = None
    if os.geteuid() == 0:  # initdb and postgres refuse root
        owner = PG_USER if _account(PG_USER) else "nobody"
        as_user = ("runuser", "-u", owner, "--")
    folder = _private_folder("i1-postgres-", owner)
    data, log, port = folder / "data", folder / "server.log", free_port()

    def run(*command: str) -> None:
        subprocess.run([*as_user, *command], check=True, capture_output=True, cwd=folder)

    try:
        run(str(bindir / "initdb"), "-D", str(data), "-U", PG_USER, "-A", "trust", "--no-sync")
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        run(str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w", "start")
        yield Postgres(bindir, port, as_user)
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(
                [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                capture_output=True,
                cwd=folder,
            )
        shutil.rmtree(folder, ignore_errors=True)


def _account(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _version(path: str) -> tuple[int, ...]:
    name = Path(path).parents[1].name
    return tuple(int(part) for part in name.split(".") if part.isdigit())


SLURM_CONF = """\
ClusterName=i1test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser={user}
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={folder}/munge.socket
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
MinJobAge=600
GresTypes=gpu
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory} Gres=gpu:{gpus} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""
GRES_CONF = "AutoDetect=off\nNodeName={host} Name=gpu File={folder}/gpu[0-{last}]\n"
"""Stand-in GPUs: character devices that are /dev/null (Slurm wants a device per GPU), so
the batch script's `--gres=gpu:1` is scheduled as on a real GPU node. Slurm sets the job's
CUDA_VISIBLE_DEVICES; with no CUDA device torch sees none and the grader runs kernels in
Triton's interpreter."""


@dataclass(frozen=True)
class Slurm:
    """A running one-node Slurm cluster; `env` points Slurm's commands at it."""

    folder: Path
    env: dict[str, str]
    node: str

    def run(self, *command: str, **kw) -> subprocess.CompletedProcess:
        """Run a Slurm command against this cluster (`env` adds to the cluster's)."""
        env = {**self.env, **kw.pop("env", {})}
        return subprocess.run(command, env=env, capture_output=True, text=True, **kw)


@contextlib.contextmanager
def slurm(cpus: int | None = None, gpus: int = 2) -> Iterator[Slurm]:
    """Munge, slurmctld and slurmd in the foreground as this process's children, on one node
    named after this host with `cpus` cores (default: all) and `gpus` count-only GPUs."""
    needed = ("munged", "slurmctld", "slurmd", "sbatch")
    missing = [name for name in needed if shutil.which(name, path=_sbin_path()) is None]
    if missing:
        raise ServiceUnavailable(
            f"no Slurm here ({', '.join(missing)} missing): install Debian's `slurm-wlm` and "
            "`munge` (apt-get install -y slurm-wlm munge; .ci/run does)"
        )
    if os.geteuid() != 0:
        raise ServiceUnavailable("a private Slurm cluster needs root here (slurmd runs jobs)")
    folder = _private_folder("i1-slurm-")
    (folder / "state").mkdir()
    (folder / "spool").mkdir()
    host = socket.gethostname().split(".")[0]
    conf = folder / "slurm.conf"
    conf.write_text(
        SLURM_CONF.format(
            host=host,
            folder=folder,
            ctld_port=free_port(),
            slurmd_port=free_port(),
            user=pwd.getpwuid(os.geteuid()).pw_name,
            cpus=cpus or os.cpu_count() or 1,
            memory=1000,
            gpus=gpus,
        )
    )
    (folder / "gres.conf").write_text(GRES_CONF.format(host=host, folder=folder, last=gpus - 1))
    for index in range(gpus):
        os.mknod(folder / f"gpu{index}", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    key = folder / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o400)
    env = dict(os.environ, SLURM_CONF=str(conf), PATH=_sbin_path())
    daemons: list[subprocess.Popen] = []

    def start(*command: str, log: str) -> None:
        with open(folder / log, "ab") as out:
            daemons.append(
                subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=folder)
            )

    try:
        start(
            "munged",
            "--foreground",
            "--force",
            f"--socket={folder / 'munge.socket'}",
            f"--key-file={key}",
            f"--pid-file={folder / 'munged.pid'}",
            f"--log-file={folder / 'munged.log'}",
            f"--seed-file={folder / 'munged.seed'}",
            log="munged.out",
        )
        _wait(lambda: (folder / "munge.socket").exists(), "munged", folder / "munged.log")
        start("slurmctld", "-D", "-i", "-f", str(conf), log="slurmctld.out")
        start("slurmd", "-D", "-f", str(conf), "-N", host, log="slurmd.out")
        cluster = Slurm(folder, env, host)

        def idle() -> bool:
            for daemon in daemons:
                if daemon.poll() is not None:
                    raise RuntimeError(
                        f"{daemon.args[0]} exited with status {daemon.returncode}; logs in "
                        f"{folder}:\n{_logs(folder)}"
                    )
            state = cluster.run("sinfo", "-h", "-N", "-o", "%T").stdout.strip()
            return state in ("idle", "mixed")

        _wait(idle, "the Slurm node", folder / "slurmctld.log")
        yield cluster
    finally:
        for daemon in reversed(daemons):
            if daemon.poll() is None:
                daemon.send_signal(signal.SIGTERM)
                try:
                    daemon.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    daemon.kill()
                    daemon.wait()
        if not os.environ.get("I1_KEEP_SLURM"):
            shutil.rmtree(folder, ignore_errors=True)


def _sbin_path() -> str:
    """PATH with the sbin folders, where Debian puts the daemons, and this Python's bin."""
    parts = [str(Path(sys.executable).parent), *os.environ.get("PATH", "").split(os.pathsep)]
    parts += ["/usr/local/sbin", "/usr/sbin", "/sbin"]
    return os.pathsep.join(dict.fromkeys(p for p in parts if p))


def _logs(folder: Path) -> str:
    return "\n".join(
        f"--- {log.name} ---\n{log.read_text(errors='replace')[-2000:]}"
        for log in sorted(folder.glob("*.log")) + sorted(folder.glob("*.out"))
    )


def main(argv: list[str]) -> int:
    """Start the service, print how to reach it, and run until interrupted or terminated
    (either stops it cleanly)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    which = argv[0] if argv else "postgres"
    with contextlib.ExitStack() as stack:
        database = stack.enter_context(postgres())
        print("I1_GRADEBOOK_URL=" + database.create_database("i1"), flush=True)
        if which == "slurm":
            cluster = stack.enter_context(slurm())
            print("SLURM_CONF=" + cluster.env["SLURM_CONF"], flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
