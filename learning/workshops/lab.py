"""Start JupyterLab as a student uses it: nbgrader's instructor-only panels left out.

    python -m learning.workshops.lab [JUPYTER LAB ARGUMENTS ...]

The course environment installs nbgrader for everyone, and its JupyterLab extension shows
instructors' tools (Create Assignment, Course List, Formgrader) beside the students' own
(Assignments, Validate). This command runs `jupyter lab` with one more configuration folder,
made for this run only, that turns the instructors' tools off; nothing in the environment
changes, so an instructor's `jupyter lab` keeps them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

INSTRUCTOR_PLUGINS = (
    "@jupyter/nbgrader:create-assignment",
    "@jupyter/nbgrader:course-list",
    "@jupyter/nbgrader:menu",
)
"""nbgrader's JupyterLab plugins for instructors; students keep assignment-list and
validate-assignment."""
INSTRUCTOR_SERVER_EXTENSIONS = (
    "nbgrader.server_extensions.formgrader",
    "nbgrader.server_extensions.course_list",
)


def write_student_config(folder: Path) -> None:
    """A Jupyter configuration folder that disables the instructors' plugins and server
    extensions (JUPYTER_CONFIG_PATH takes it before the environment's own)."""
    (folder / "labconfig").mkdir(parents=True, exist_ok=True)
    disabled = {name: True for name in INSTRUCTOR_PLUGINS}
    (folder / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": disabled}, indent=1)
    )
    extensions = {name: False for name in INSTRUCTOR_SERVER_EXTENSIONS}
    (folder / "jupyter_server_config.json").write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": extensions}}, indent=1)
    )


def student_env(folder: Path) -> dict[str, str]:
    """This environment with `folder` first on JUPYTER_CONFIG_PATH."""
    paths = [str(folder), os.environ.get("JUPYTER_CONFIG_PATH", "")]
    return dict(os.environ, JUPYTER_CONFIG_PATH=os.pathsep.join(p for p in paths if p))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    with tempfile.TemporaryDirectory(prefix="i1-student-jupyter-") as folder:
        write_student_config(Path(folder))
        command = [sys.executable, "-m", "jupyter", "lab", *args]
        try:
            return subprocess.run(command, env=student_env(Path(folder))).returncode
        except KeyboardInterrupt:  # JupyterLab got the same Ctrl-C and stops itself
            return 130


if __name__ == "__main__":
    sys.exit(main())
