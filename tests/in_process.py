"""Command-line entry points run in the test's own process: the command's exit status and
output without the Python start and torch import a new process costs (about 2 s each)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from collections.abc import Callable
from pathlib import Path


def run_main(
    main: Callable[[list[str]], int], args: tuple[str, ...], cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """`main(args)` run from `cwd`, as a CompletedProcess (an argparse exit is its status)."""
    out, err, previous = io.StringIO(), io.StringIO(), Path.cwd()
    os.chdir(cwd or previous)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        os.chdir(previous)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())
