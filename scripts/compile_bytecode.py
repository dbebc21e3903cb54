"""Compile the bytecode of the packages grading imports, once, where Python writes none itself.

    python3 scripts/compile_bytecode.py

A Python told to write no bytecode (PYTHONDONTWRITEBYTECODE, as on the H200 host) over
packages installed without it (`pip install --no-compile`, or an image built that way)
compiles every module it imports from source, in every process: `import torch` took 4.2 s
there each time, and one graded submission starts five such processes (the notebook's
kernel, the check children, the two timing servers). Bytecode written once, here, is read by
all of them, inside the sandbox too. Packages whose folders are not writable are named and
left as they are. Only the standard library: it runs before anything else is installed.
"""

from __future__ import annotations

import compileall
import importlib.util
import os
import sys
import time
from pathlib import Path

PACKAGES = (
    "torch",
    "triton",
    "numpy",
    "matplotlib",
    "PIL",
    "IPython",
    "ipykernel",
    "jupyter_client",
    "jupyter_core",
    "nbformat",
    "nbconvert",
    "nbclient",
    "nbgrader",
    "sqlalchemy",
    "traitlets",
    "zmq",
    "tornado",
    "jinja2",
    "learning",
    "grader",
)
"""The top-level packages a grading imports: torch's stack, Jupyter's, nbgrader's, the course's."""


def package_folder(name: str) -> Path | None:
    """The folder of the installed package `name`, or None when it is not installed."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def main() -> int:
    started = time.monotonic()
    compiled, skipped = [], []
    for name in PACKAGES:
        folder = package_folder(name)
        if folder is None:
            continue
        if not os.access(folder, os.W_OK):
            skipped.append(name)
            continue
        compileall.compile_dir(folder, quiet=2, workers=0)  # files that never import stay silent
        compiled.append(name)
    print(f"bytecode for {len(compiled)} packages in {time.monotonic() - started:.0f} s")
    if skipped:
        print(f"not writable, left as installed: {', '.join(skipped)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
