"""Execute a notebook as nbgrader's Execute does, and write the result to a pipe.

    python -m learning.workshops.checking.notebook_runner IN.ipynb --report-fd N [--timeout S]
        [--startup-timeout S]

The sandboxed half of grading (`grader.grading.execute.SandboxedExecute` runs it): a fresh
`python3` kernel (the native ipykernel one) runs every cell in the notebook's folder, errors
allowed, and the executed notebook goes to file descriptor N, never to stdout, which the
student's code shares. An error reply with no matching error output gets one, as nbgrader's
`Execute.on_cell_executed` adds it, so scores come out the same. A kernel that dies, or any
other failure, leaves an error on the cell where it happened and on every code cell after
it: no test cell passes without having run.
"""

from __future__ import annotations

import argparse
import ctypes
import os
from pathlib import Path

import nbformat
from nbformat import NotebookNode

KERNEL = "python3"
CASES_RUN_OUTSIDE = "I1_CASES_RUN_OUTSIDE"
"""Set to 1 where the grader's sandbox runs a notebook: the trusted side runs every test
cell's cases itself and replaces the cell's outputs, so the notebook's own `expect_cases`
runs none (where no sandbox runs it, as when a course's config did not load, it does)."""
TIMEOUT_ERROR = {
    "ename": "CellTimeoutError",
    "evalue": "",
    "traceback": ["\x1b[0;31mCellTimeoutError\x1b[0m: No reply from kernel before timeout"],
}
"""nbgrader's `Execute.error_on_timeout`: the error a cell that ran out of time gets."""
DEAD_KERNEL = {
    "ename": "DeadKernelError",
    "evalue": "Kernel died",
    "traceback": ["DeadKernelError: Kernel died"],
}
"""nbclient's words for a kernel that died: the error a cell gets when no result came back."""
NO_TRACEBACK = "ERROR: An error occurred while showtraceback was disabled"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--report-fd", type=int, required=True)
    parser.add_argument("--timeout", type=int, default=30, help="seconds per cell; 0: none")
    parser.add_argument("--startup-timeout", type=int, default=60)
    args = parser.parse_args(argv)
    hide_from_kernel()
    path = args.notebook.resolve()
    nb = nbformat.read(path, as_version=4)
    execute(nb, path.parent, args.timeout, args.startup_timeout)
    with os.fdopen(args.report_fd, "w", encoding="utf-8") as report:
        nbformat.write(nb, report)


def execute(nb: NotebookNode, folder: Path, timeout_s: int, startup_timeout_s: int) -> None:
    """Run every cell of `nb` in a fresh kernel started in `folder`, as nbgrader's Execute."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient

    native = KernelSpecManager(kernel_dirs=[])  # ipykernel's own spec: this Python
    client = NotebookClient(
        nb,
        km=AsyncKernelManager(kernel_name=KERNEL, kernel_spec_manager=native),
        timeout=timeout_s if timeout_s > 0 else None,
        startup_timeout=startup_timeout_s,
        allow_errors=True,
        interrupt_on_timeout=True,
        raise_on_iopub_timeout=True,
        error_on_timeout=TIMEOUT_ERROR,
        on_cell_executed=record_reply_error,
        resources={"metadata": {"path": str(folder)}},
    )
    index = 0
    try:
        with client.setup_kernel():
            info = client.wait_for_reply(client.kc.kernel_info())
            nb.metadata["language_info"] = info["content"]["language_info"]
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index, store_history=True)
            index = len(nb.cells)
    except Exception as exc:
        error = dict(ename=type(exc).__name__, evalue=str(exc))
        fail_from(nb, index, {**error, "traceback": [f"{error['ename']}: {error['evalue']}"]})


def record_reply_error(cell: NotebookNode, execute_reply: dict, **_) -> None:
    """Add the reply's error to the cell when no error output has its name (a timeout, say),
    as nbgrader's `Execute.on_cell_executed` does."""
    content = execute_reply["content"]
    if content["status"] != "error":
        return
    if any(o.output_type == "error" and o.ename == content["ename"] for o in cell.outputs):
        return
    traceback = content["traceback"] or [NO_TRACEBACK]
    cell.outputs.append(
        nbformat.v4.new_output(
            "error", ename=content["ename"], evalue=content["evalue"], traceback=traceback
        )
    )


def fail_from(nb: NotebookNode, start: int, error: dict) -> None:
    """Give the code cell at `start` and every one after it `error`: none of them passes."""
    for cell in nb.cells[start:]:
        if cell.cell_type == "code":
            cell.outputs.append(nbformat.v4.new_output("error", **error))


def hide_from_kernel() -> None:
    """Make this process undumpable, so the kernel (the same user) can neither trace it nor
    open its report pipe through /proc."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):  # not Linux: the sandbox is not either
        pass


if __name__ == "__main__":
    main()
