"""Start JupyterLab as a student uses it: nbgrader's instructor-only panels left out, and the
course's notebooks opening unmodified.

    python -m learning.workshops.lab [JUPYTER LAB ARGUMENTS ...]

The course's environment (the `course` extra: instructors, and the tests) installs nbgrader,
whose JupyterLab extension shows instructors' tools (Create Assignment, Course List,
Formgrader) beside the students' own (Assignments, Validate); the student extra installs no
nbgrader at all, and then there is nothing to hide. This command runs `jupyter lab` with one
more configuration folder, made for this run only, that turns the instructors' tools off;
nothing in the environment changes, so an instructor's `jupyter lab` keeps them.

JupyterLab rewrites a notebook's kernel metadata (kernelspec, language_info) to what its
kernel reports as it opens, and marks the notebook modified when that differs in any field,
the Python version's patch number included. The course's notebooks carry what the kernel of
the course's environment reports (tests/test_lab.py checks every field but that patch number),
so on that Python they open unmodified even in a plain `jupyter lab`, and on another they
would not. So before starting, this command gives the notebooks in the folder it serves (down to
`DEPTH`) that use the `python3` kernel the metadata that kernel reports, when that kernel is
this Python; cells are not touched.

The lab's terminals get the environment its notebooks' kernels run in. Left alone, Jupyter
starts a login shell whenever its own output is not a terminal (a launcher, a log file), and a
login shell's /etc/profile resets PATH: `python` is then the system's, VIRTUAL_ENV still names
the course's environment, and every course command fails with "No module named 'learning'".
So terminals run bash (not as a login shell), which reads ~/.bashrc and then gets back
`TERMINAL_ENV` as the lab has it, this Python's folder first on PATH.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

INSTRUCTOR_PLUGINS = (
    "@jupyter/nbgrader:create-assignment",
    "@jupyter/nbgrader:course-list",
    "@jupyter/nbgrader:formgrader",
    "@jupyter/nbgrader:menu",
)
"""nbgrader's JupyterLab plugins for instructors (the formgrader's opens its tab from a
`?formgrader=true` address, onto a server extension this lab does not load); students keep
assignment-list and validate-assignment."""
INSTRUCTOR_SERVER_EXTENSIONS = (
    "nbgrader.server_extensions.formgrader",
    "nbgrader.server_extensions.course_list",
)


TERMINAL_ENV = (
    "PATH",
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "CONDA_SHLVL",
    "CONDA_PROMPT_MODIFIER",
)
"""What decides which Python a shell's `python` is and what it imports: shell start-up files
change these (/etc/profile's PATH, a `conda activate` in ~/.bashrc), and a lab terminal gets
them back as the lab has them (unset where the lab has them unset)."""
TERMINAL_RC = "terminal_bashrc"
"""The lab terminals' bash start-up file, in the lab's configuration folder."""


def terminal_rc(env: dict[str, str]) -> str:
    """A bash start-up file: ~/.bashrc as an interactive bash reads it (Debian's bash reads
    /etc/bash.bashrc itself first), then `env`'s `TERMINAL_ENV` put back."""
    lines = [
        "# The course lab's terminals (learning.workshops.lab): your ~/.bashrc, then the",
        "# environment the notebooks' kernels run in.",
        "if [ -f ~/.bashrc ]; then . ~/.bashrc; fi",
    ]
    for name in TERMINAL_ENV:
        value = env.get(name)
        lines.append(f"unset {name}" if value is None else f"export {name}={shlex.quote(value)}")
    return "\n".join(lines) + "\n"


def terminal_command(rc: Path) -> list[str]:
    """The lab terminals' shell: bash reading `rc`, interactive and not a login shell; without
    bash, the user's shell, also not a login shell."""
    bash = shutil.which("bash")
    if bash is None:
        return [os.environ.get("SHELL") or "sh", "-i"]
    return [bash, "--rcfile", str(rc), "-i"]


def write_student_config(folder: Path, env: dict[str, str] | None = None) -> None:
    """A Jupyter configuration folder that disables the instructors' plugins and server
    extensions, and gives terminals `env`'s Python (default: `student_env`'s), with its start-up
    file (JUPYTER_CONFIG_PATH takes the folder before the environment's own)."""
    env = student_env(folder) if env is None else env
    (folder / TERMINAL_RC).write_text(terminal_rc(env))
    (folder / "labconfig").mkdir(parents=True, exist_ok=True)
    disabled = {name: True for name in INSTRUCTOR_PLUGINS}
    (folder / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": disabled}, indent=1)
    )
    extensions = {name: False for name in INSTRUCTOR_SERVER_EXTENSIONS}
    server = {
        "jpserver_extensions": extensions,
        "terminado_settings": {"shell_command": terminal_command(folder / TERMINAL_RC)},
    }
    (folder / "jupyter_server_config.json").write_text(json.dumps({"ServerApp": server}, indent=1))


DEPTH = 3
"""How many folders down notebooks get their kernel metadata matched."""


def kernel_metadata() -> dict | None:
    """The kernelspec and language_info JupyterLab writes into a notebook opened with the
    `python3` kernel, when that kernel runs this Python; None when it does not (its
    language_info is then unknown without starting it) or there is no such kernel."""
    from ipykernel.ipkernel import IPythonKernel
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec("python3")
    except NoSuchKernel:
        return None
    program = spec.argv[0] if spec.argv else ""
    if (
        program not in ("python", "python3")
        and Path(program).resolve() != Path(sys.executable).resolve()
    ):
        return None
    return {
        "kernelspec": {
            "display_name": spec.display_name,
            "language": spec.language,
            "name": "python3",
        },
        "language_info": dict(IPythonKernel.language_info),
    }


def match_kernel_metadata(root: Path, metadata: dict) -> list[Path]:
    """Give the python3 notebooks under `root` (down to `DEPTH`, hidden folders skipped)
    `metadata`'s keys where theirs differ; the notebooks rewritten."""
    import nbformat

    changed = []
    for depth in range(DEPTH + 1):
        for path in sorted(root.glob("/".join(["*"] * depth + ["*.ipynb"]))):
            if any(part.startswith(".") for part in path.relative_to(root).parts):
                continue
            try:
                notebook = nbformat.read(path, as_version=nbformat.NO_CONVERT)
            except Exception:  # not a notebook nbformat reads: JupyterLab will say so
                continue
            kernel = notebook.metadata.get("kernelspec", {}).get("name")
            wanted = {k: v for k, v in metadata.items() if notebook.metadata.get(k) != v}
            if kernel == "python3" and wanted:
                notebook.metadata.update(wanted)
                nbformat.write(notebook, path)
                changed.append(path)
    return changed


def served_folder(args: list[str]) -> Path:
    """The folder `jupyter lab args` serves: --ServerApp.root_dir or --notebook-dir, else
    the working folder."""
    names = ("--ServerApp.root_dir", "--notebook-dir", "--ServerApp.notebook_dir")
    for index, arg in enumerate(args):
        name, _, value = arg.partition("=")
        if name in names:
            folder = value or (args[index + 1] if index + 1 < len(args) else "")
            return Path(folder).expanduser()
    return Path.cwd()


def student_env(folder: Path) -> dict[str, str]:
    """This environment with `folder` first on JUPYTER_CONFIG_PATH and this Python's folder
    first on PATH (so a terminal's or a `!python` cell's `python` is the kernels'), and
    VIRTUAL_ENV naming this Python's virtual environment, activated or not (unset outside
    one)."""
    paths = [str(folder), os.environ.get("JUPYTER_CONFIG_PATH", "")]
    env = dict(os.environ, JUPYTER_CONFIG_PATH=os.pathsep.join(p for p in paths if p))
    here = os.path.dirname(sys.executable)  # not resolved: a venv's bin/python is a link
    path = env.get("PATH", "").split(os.pathsep)
    if path[:1] != [here]:
        env["PATH"] = os.pathsep.join([here, *filter(None, path)])
    if sys.prefix != sys.base_prefix:
        env["VIRTUAL_ENV"] = sys.prefix
    else:  # another environment's name would mislead
        env.pop("VIRTUAL_ENV", None)
    return env


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    if os.geteuid() == 0 and "--allow-root" not in args:  # a container's user, as a rule
        print("note: running as root, so JupyterLab gets --allow-root", file=sys.stderr)
        args = [*args, "--allow-root"]
    metadata = kernel_metadata()
    if metadata is not None:
        match_kernel_metadata(served_folder(args), metadata)
    with tempfile.TemporaryDirectory(prefix="i1-student-jupyter-") as folder:
        env = student_env(Path(folder))
        write_student_config(Path(folder), env)
        command = [sys.executable, "-m", "jupyter", "lab", *args]
        server = subprocess.Popen(command, env=env)
        # Stopping is JupyterLab's to do (it shuts its kernels down): Ctrl-C reaches it from
        # the terminal, a SIGTERM to this command is passed on.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, lambda signum, frame: server.send_signal(signum))
        return server.wait()


if __name__ == "__main__":
    sys.exit(main())
