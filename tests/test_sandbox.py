"""The grading sandbox: hostile scripts run inside it, and each attack fails.

Each test runs a small script under `grader.isolation.sandbox` next to a fake course (a gradebook, a
secret, other students' folders) and checks what the script could reach. Skipped where
bubblewrap is missing or cannot make namespaces.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader.grading import execute
from grader.grading.execute import SandboxedExecute
from grader.isolation import host, sandbox
from grader.isolation.limits import Limits
from grader.isolation.process import SandboxRun
from grader.isolation.sandbox import run_sandboxed, sandboxed
from grader.isolation.scratch import scratch
from learning.workshops.checking import bubblewrap, notebook_runner

CANARY = "i1-canary-secret-7f3a"


def _problem() -> str | None:
    """Why sandboxes cannot run here, or None."""
    try:
        sandbox.require_bwrap()
    except sandbox.SandboxUnavailable:
        return "needs bubblewrap (`bwrap`): apt-get install bubblewrap"
    with scratch() as work:
        run = run_sandboxed(["/bin/true"], work=work, timeout_s=30, gpu=False)
    if run.returncode != 0:
        return f"bwrap cannot make namespaces here: {run.output.decode(errors='replace')[-300:]}"
    return None


PROBLEM = None if os.environ.get(sandbox.UNSAFE_ENV) else _problem()
pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")


@pytest.fixture
def course(tmp_path: Path) -> Path:
    """A fake course folder: gradebook, secret, and every student-data folder."""
    root = tmp_path / f"course-{uuid.uuid4().hex[:6]}"
    files = [
        "gradebook.db",
        "nbgrader_config.py",
        "course_secret.txt",
        "grader/grading/hidden.py",
        "source/i1/strided_softmax.ipynb",
        "submitted/other/i1/strided_softmax.ipynb",
        "autograded/other/i1/strided_softmax.ipynb",
        "feedback/other/i1/strided_softmax.html",
    ]
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(CANARY)
    os.chmod(tmp_path, 0o755)  # readable by anyone on the host: only the sandbox stops it
    return root


def run_py(code: str, *args: str, timeout_s: float = 30, limits=sandbox.DEFAULT_LIMITS, **kw):
    """Run `code` with this Python in a fresh sandbox; its output as text, and the run."""
    with scratch(limits) as work:
        run = run_sandboxed(
            [sys.executable, "-c", code, *args],
            work=work,
            timeout_s=timeout_s,
            limits=limits,
            gpu=kw.pop("gpu", False),
            **kw,
        )
    return run.output.decode(errors="replace"), run


def alive_with(marker: str) -> list[int]:
    """Host processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "cmdline").read_text():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


READ_ALL = """
import json, sys
for path in json.loads(sys.argv[1]):
    try:
        open(path).read()
        print("GOT", path)
    except OSError as exc:
        print("DENIED", path, type(exc).__name__)
"""


def test_course_files_cannot_be_read(course):
    """Are the gradebook, the secret, other students' work and the repository's grader
    unreadable by absolute path?"""
    paths = [str(p) for p in course.rglob("*") if p.is_file()]
    repo = sandbox.REPO
    paths += [
        str(repo / n) for n in ("grader/reference.py", "grader/grading/hidden.py", "README.md")
    ]
    paths += [str(repo / "nbgrader_config.py"), "/root/.bash_history", "/etc/shadow"]
    output, run = run_py(READ_ALL, json.dumps(paths))
    assert run.returncode == 0, output
    assert not [line for line in output.splitlines() if line.startswith("GOT")], output
    assert output.count("DENIED") == len(paths), output


WALK = """
import json, os, sys
installed_roots = tuple(p.rstrip("/") + "/" for p in ["/usr", *json.loads(sys.argv[2])])
course_names = ("gradebook.db", "nbgrader_config.py", "submitted", "autograded", "feedback")
ours = ("course_secret.txt", "hidden.py", "reference.py", "trusted.py")
for top, dirs, files in os.walk("/"):
    if top == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    installed = (top + "/").startswith(installed_roots)  # other projects' files
    for name in files + dirs:
        path = os.path.join(top, name)
        if sys.argv[1] in path or name == "course_secret.txt" or "/grader" in path:
            print("FOUND", path)
        elif name in course_names and not installed:
            print("FOUND", path)
print("walked")
"""


def test_walking_the_filesystem_finds_no_course_file(course):
    """Does a walk from / find no gradebook, secret, grader or student folder at all?"""
    output, run = run_py(WALK, course.name, json.dumps(sandbox.python_paths()))
    assert run.returncode == 0 and "walked" in output, output
    assert "FOUND" not in output, output


WRITE_ALL = """
import json, os, sys
for path in json.loads(sys.argv[1]):
    try:
        with open(path, "w") as out:
            out.write("x")
        print("WROTE", path)
    except OSError as exc:
        print("DENIED", path, type(exc).__name__)
"""


def test_writes_land_only_in_work_and_tmp(course):
    """Can the sandbox write to /work and /tmp only (not the system, Python, learning/ or
    the course)?"""
    denied = ["/usr/x", f"{sys.prefix}/x", "/course/learning/x", "/x", "/etc/x", "/dev/shm/../x"]
    denied += [str(course / "gradebook.db"), str(sandbox.REPO / "grader" / "x.py")]
    allowed = ["/work/x", "/tmp/x", "/tmp/home/x", "/dev/shm/x"]
    output, run = run_py(WRITE_ALL, json.dumps(denied + allowed))
    assert sorted(line.split()[1] for line in output.splitlines() if "WROTE" in line) == sorted(
        allowed
    ), output
    assert (course / "gradebook.db").read_text() == CANARY


CONNECT = """
import socket, sys, time
started = time.monotonic()
for host, port in (("127.0.0.1", int(sys.argv[1])), ("1.1.1.1", 53), ("8.8.8.8", 443)):
    try:
        socket.create_connection((host, port), timeout=5)
        print("CONNECTED", host)
    except OSError as exc:
        print("DENIED", host, type(exc).__name__)
try:
    socket.getaddrinfo("example.com", 443)
    print("RESOLVED")
except OSError as exc:
    print("DENIED dns", type(exc).__name__)
print(f"seconds {time.monotonic() - started:.2f}")
"""


def test_network_is_unreachable_and_fails_fast():
    """Do a service on the host's loopback, public addresses and DNS all fail, at once?"""
    server = socket.create_server(("127.0.0.1", 0))
    server.setblocking(False)
    try:
        output, _ = run_py(CONNECT, str(server.getsockname()[1]))
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing reached the host's server
    finally:
        server.close()
    assert "CONNECTED" not in output and "RESOLVED" not in output, output
    assert output.count("DENIED") == 4, output
    assert float(output.split("seconds ")[1]) < 2, output


ENVIRON = """
import os, sys
print("ENV", sys.argv[1] in "".join(os.environ.values()) or "I1_CANARY" in os.environ)
for pid in os.listdir("/proc"):
    try:
        if pid.isdigit() and sys.argv[1].encode() in open(f"/proc/{pid}/environ", "rb").read():
            print("FOUND in", pid)
    except OSError:
        pass
"""


def test_grader_environment_is_not_visible(monkeypatch):
    """Is a variable of the grader's environment absent inside, from every process?"""
    monkeypatch.setenv("I1_CANARY", CANARY)
    output, _ = run_py(ENVIRON, CANARY)
    assert "ENV False" in output and "FOUND" not in output, output


def test_the_course_secret_in_the_environment_is_not_visible():
    """Is I1_COURSE_SECRET, in the grader's environment as the tests put it, absent inside?"""
    output, _ = run_py(ENVIRON, os.environ["I1_COURSE_SECRET"])
    assert "ENV False" in output and "FOUND" not in output, output


def test_user_has_no_privileges():
    """Is the sandbox's user not root, with no capabilities at all?"""
    code = "import os; print(os.getuid(), os.geteuid(), open('/proc/self/status').read())"
    output, _ = run_py(code)
    status = dict(line.split(":\t", 1) for line in output.splitlines()[1:] if ":\t" in line)
    assert output.split()[:2] == [str(bubblewrap.SANDBOX_UID)] * 2, output
    for cap in ("CapEff", "CapPrm", "CapInh", "CapAmb"):
        assert int(status[cap], 16) == 0, (cap, status[cap])


FORK_BOMB = """
import os, sys, time
count = 0
while True:
    try:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        count += 1
    except OSError as exc:
        print("forks", count, type(exc).__name__, flush=True)
        break
time.sleep(60)
"""


def test_fork_bomb_is_bounded_and_killed():
    """Does a fork bomb stop at the process limit, and die with the sandbox at its timeout?"""
    marker = f"bomb-{uuid.uuid4().hex}"
    limits = Limits(processes=40)
    output, run = run_py(FORK_BOMB, marker, timeout_s=4, limits=limits)
    assert run.timed_out, output
    forks = int(output.split("forks ")[1].split()[0])
    assert 10 < forks < limits.processes, output
    assert alive_with(marker) == []


FILL = """
import errno, os
def fill(path, limit_mb=64):
    written = 0
    try:
        with open(path, "wb") as out:
            while written < limit_mb:
                out.write(b"x" * 2**20)
                out.flush()
                written += 1
    except OSError as exc:
        return written, errno.errorcode[exc.errno]
    return written, "none"
print("big", *fill("/work/big"))
print("work", *fill("/work/a"), *fill("/work/b"), *fill("/work/c"))
print("tmp", *fill("/tmp/a"), *fill("/tmp/b"), *fill("/tmp/c"))
"""


def test_disk_filling_stops_at_the_limits():
    """Does one file stop at RLIMIT_FSIZE, and /work and /tmp at their tmpfs sizes, leaving
    the host's disk alone?"""
    limits = Limits(file_bytes=4 * sandbox.MiB, work_bytes=8 * sandbox.MiB, tmp_bytes=8 << 20)
    with scratch(limits) as work:
        run = run_sandboxed([sys.executable, "-c", FILL], work=work, timeout_s=30, limits=limits)
        host = os.statvfs(work)
    lines = {line.split()[0]: line.split()[1:] for line in run.output.decode().splitlines()}
    assert lines["big"] == ["4", "EFBIG"], lines
    assert sum(int(n) for n in lines["work"][::2]) <= 8 and "ENOSPC" in lines["work"], lines
    assert sum(int(n) for n in lines["tmp"][::2]) <= 8 and "ENOSPC" in lines["tmp"], lines
    if sandbox._privileged():  # the scratch folder is a tmpfs of work_bytes on the host
        assert host.f_blocks * host.f_frsize <= limits.work_bytes


DAEMON = """
import os, subprocess, sys
if os.fork() == 0:
    os.setsid()
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", sys.argv[1]])
    os._exit(0)
os.wait()
print("left a daemon behind")
"""


def test_background_process_dies_with_the_sandbox():
    """Is a setsid, double-forked process dead once run_sandboxed returns?"""
    marker = f"daemon-{uuid.uuid4().hex}"
    output, run = run_py(DAEMON, marker)
    assert "left a daemon" in output and not run.timed_out, output
    assert alive_with(marker) == []


def test_background_process_dies_with_a_plain_sandboxed_command(tmp_path):
    """Without run_sandboxed, does the PID namespace alone end what the command left?"""
    marker = f"daemon-{uuid.uuid4().hex}"
    with scratch() as work:
        command = sandboxed([sys.executable, "-c", DAEMON, marker], work=work, gpu=False)
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert "left a daemon" in done.stdout, done.stderr
    deadline = time.monotonic() + 2
    while alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive_with(marker) == []


def test_report_pipe_reaches_the_sandboxed_child():
    """Does a pipe passed with pass_fds reach the command inside, at the same number?"""
    read_fd, write_fd = os.pipe()
    code = "import os, sys; os.write(int(sys.argv[1]), b'through the pipe')"
    with scratch() as work:
        command = sandboxed([sys.executable, "-c", code, str(write_fd)], work=work, gpu=False)
        child = subprocess.Popen(command, pass_fds=(write_fd,))
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as report:
            assert report.read() == b"through the pipe"
        assert child.wait(timeout=30) == 0


def test_torch_runs_inside():
    """Does torch import and multiply matrices in the sandbox?"""
    output, run = run_py("import torch; print((torch.ones(2, 3) @ torch.ones(3, 2)).sum().item())")
    assert run.returncode == 0 and output.strip().endswith("12.0"), output


def test_learning_imports_and_grader_does_not():
    """Is the student-side package importable inside and the instructor's not?"""
    code = (
        "import learning.workshops.checking.views as v; print('learning', v.__file__)\n"
        "try:\n    import grader\n    print('grader', grader.__file__)\n"
        "except ImportError:\n    print('no grader')"
    )
    output, _ = run_py(code)
    assert (
        "learning /course/learning/workshops/checking/views.py" in output and "no grader" in output
    )


def test_course_folders_are_never_bound(course, monkeypatch):
    """Are the repository, the temporary folder and a course on sys.path or PYTHONPATH kept
    out of the paths the sandbox binds?"""
    monkeypatch.setattr(sys, "path", [*sys.path, str(course), str(course.parent), "/tmp"])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(course), str(course.parent)]))
    bound = sandbox.python_paths()
    assert any(sys.base_prefix.startswith(p) for p in [*bound, *bubblewrap.SYSTEM_DIRS]), bound
    for hidden in (course, course.parent, Path("/tmp"), sandbox.REPO, sandbox.REPO / "grader"):
        assert str(hidden) not in bound


def test_missing_bwrap_names_the_package(tmp_path, monkeypatch):
    """Without bwrap on PATH or in the environment, does grading refuse, naming the package
    and the unsafe flag?"""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(bubblewrap, "packaged", lambda: None)
    monkeypatch.delenv(sandbox.UNSAFE_ENV, raising=False)
    with pytest.raises(sandbox.SandboxUnavailable) as error:
        sandboxed(["python3"], work=tmp_path)
    assert "`bubblewrap`" in str(error.value) and sandbox.UNSAFE_FLAG in str(error.value)


def test_unsafe_flag_runs_unwrapped_with_one_warning(tmp_path, monkeypatch, capsys):
    """With I1_UNSAFE_NO_SANDBOX=1, is the command returned as it is, with one loud warning?"""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv(sandbox.UNSAFE_ENV, "1")
    monkeypatch.setattr(host, "_told", set())
    assert sandboxed(["python3", "-c", "pass"], work=tmp_path) == ["python3", "-c", "pass"]
    assert sandboxed(["true"], work=tmp_path) == ["true"]
    warning = capsys.readouterr().err
    assert warning.count("WITHOUT A SANDBOX") == 1, warning


def _notebook(*sources: str) -> nbformat.NotebookNode:
    nb = new_notebook(cells=[new_markdown_cell("# A tiny notebook")])
    nb.cells += [new_code_cell(source) for source in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    return nb


def _execute(tmp_path: Path, nb, **traits):
    folder = tmp_path / "autograded" / "student" / "i1"
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / "tiny.ipynb")
    resources = {"metadata": {"path": str(folder)}, "unique_key": "tiny"}
    return SandboxedExecute(timeout=30, startup_timeout=60, **traits).preprocess(nb, resources)


def test_sandboxed_execute_brings_outputs_back(tmp_path):
    """Do a tiny notebook's outputs come back onto its cells, the error cell with its error
    and the hidden region neither run nor removed from the graded notebook?"""
    hidden = "assert x == 1\n### BEGIN HIDDEN TESTS\nraise AssertionError('hidden ran')\n"
    hidden += "### END HIDDEN TESTS"
    env = "os.environ['NBGRADER_EXECUTION'], os.environ['I1_CASES_RUN_OUTSIDE']"
    nb = _notebook(f"import os\nx = 1\nprint(os.getcwd(), {env})",
                   "raise ValueError('boom')", hidden)  # fmt: skip
    nb, resources = _execute(tmp_path, nb)
    first, error, test = nb.cells[1:]
    assert [o.text for o in first.outputs] == ["/work autograde 1\n"]
    assert [(o.output_type, o.ename, o.evalue) for o in error.outputs] == [
        ("error", "ValueError", "boom")
    ]
    assert test.outputs == [] and test.execution_count == 3
    assert test.source == hidden
    assert resources["i1_sandbox"]["result"] == "ok", resources["i1_sandbox"]


def test_a_dead_kernel_fails_the_student_as_nbgrader_does(tmp_path):
    """When the student's code kills the kernel, is the notebook refused with why, as
    nbgrader's own Execute refuses it (nbgrader then reports that student, grades the rest)?"""
    from nbclient.exceptions import DeadKernelError

    with pytest.raises(DeadKernelError, match="killed the kernel"):
        _execute(tmp_path, _notebook("x = 1", "import os; os._exit(1)", "x"))


def test_submission_copy_skips_links_and_hidden_tests(course, tmp_path):
    """Does the scratch copy hold the submitted files, but no symlink's target and no other
    notebook's hidden tests?"""
    folder = course / "autograded" / "other" / "i1"
    (folder / "data.txt").write_text("mine")
    (folder / "link.txt").symlink_to(course / "gradebook.db")
    (folder / "linked").symlink_to(course / "grader", target_is_directory=True)
    other = _notebook("ok = 1\n### BEGIN HIDDEN TESTS\nsecret = 2\n### END HIDDEN TESTS")
    nbformat.write(other, folder / "other.ipynb")
    work = tmp_path / "work"
    work.mkdir()
    skipped = execute.copy_submission(folder, work, limit_bytes=1 << 20)
    assert sorted(p.name for p in work.rglob("*")) == sorted(
        ["data.txt", "other.ipynb", "strided_softmax.ipynb"]
    )
    assert skipped == ["link.txt"]  # a linked folder is not entered at all
    assert "secret" not in (work / "other.ipynb").read_text()


def test_a_missing_result_is_unusable():
    """When no executed notebook comes back, is the result refused with the reason?"""
    nb = _notebook("x = 1", "x")
    run = SandboxRun(returncode=-9, timed_out=True, seconds=5.0, output=b"", report=b"")
    assert execute.read_result(run, len(nb.cells)) == (None, "timed out")
    run = SandboxRun(returncode=1, timed_out=False, seconds=1.0, output=b"", report=b"")
    assert execute.read_result(run, len(nb.cells)) == (None, "no executed notebook (exit status 1)")


def test_runner_timeout_error_is_nbgraders():
    """Does the runner give a timed-out cell the very error nbgrader's Execute gives?"""
    assert notebook_runner.TIMEOUT_ERROR == SandboxedExecute().error_on_timeout


def _median_s(command: list[str]) -> float:
    times = []
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run(command, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def test_start_overhead_is_small():
    """Does the sandbox add little to starting a process (median of 5, printed)?"""
    bare = [sys.executable, "-c", "pass"]
    with sandbox.sandbox_cgroups() as cgroups, scratch() as work:
        wrapped = sandboxed(bare, work=work, gpu=False, cgroups=cgroups)
        inside_s, outside_s = _median_s(wrapped), _median_s(bare)
    print(f"python -c pass: {outside_s * 1e3:.1f} ms bare, {inside_s * 1e3:.1f} ms sandboxed")
    assert inside_s - outside_s < 0.5


TRITON_ADD = """
import torch, triton, triton.language as tl

@triton.jit
def add_one(x, y, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offsets, tl.load(x + offsets, mask=offsets < n) + 1, mask=offsets < n)

x = torch.arange(1000.0, device="cuda")
y = torch.empty_like(x)
add_one[(4,)](x, y, 1000, BLOCK=256)
print("triton", bool((y == x + 1).all()), torch.cuda.get_device_name())
"""


@pytest.mark.gpu
@pytest.mark.skipif(not sandbox.nvidia_nodes(), reason="needs a CUDA device")
def test_cuda_and_triton_work_inside():
    """On a CUDA machine, do torch and a freshly compiled Triton kernel run in the sandbox?"""
    with scratch() as work:
        (work / "add_one.py").write_text(TRITON_ADD)  # Triton reads a kernel's source file
        command = [sys.executable, "add_one.py"]
        run = run_sandboxed(command, work=work, timeout_s=120, gpu=True)
    output = run.output.decode(errors="replace")
    assert run.returncode == 0 and "triton True" in output, output
