"""The child process that runs an implementation's cases, one report line per event.

The parent (`isolation.run_isolated`) sends a JSON job on stdin and reads events from a
dedicated pipe, so whatever the student's code prints cannot corrupt the report. A crash
or hang here costs the case in progress, never the checker; an exception in the checks
themselves is an `internal-error` event, and the next case runs. Imports stay light here:
`child_env` serves every command that starts a child process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path


def child_env(**extra: str) -> dict[str, str]:
    """This environment, with the folder that holds `learning` (and, in the course repo,
    `grader`) first on PYTHONPATH, so a child process imports the same code."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONPATH=path, **extra)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--report-fd", type=int, required=True)
    report = os.fdopen(parser.parse_args().report_fd, "w", buffering=1)
    job = json.load(sys.stdin)
    limit_memory(job["memory_limit"])

    def emit(event: str, **fields) -> None:
        report.write(json.dumps({"event": event, **fields}) + "\n")
        report.flush()

    run_job(job, emit)


def run_job(job: dict, emit: Callable[..., None]) -> None:
    """Load the job's implementation and run its cases, reporting each through `emit`."""
    from learning.workshops.contracts import default_device, describe_device, select_mode

    mode = select_mode(verbose=False)
    from learning.workshops.cases import Case
    from learning.workshops.interpreter import NOTES
    from learning.workshops.loader import LoadError, load_function

    try:
        fn = load_function(Path(job["impl"]), job["function"])
    except LoadError as exc:
        emit("load-error", detail=str(exc))
        return
    device = default_device()
    emit("loaded", mode=mode, device=describe_device(device))
    told = 0
    for spec in job["cases"]:
        run_one(fn, job, Case(**spec), device, emit)
        for note in NOTES[told:]:  # what the interpreter did unlike a GPU, once each
            emit("note", text=note)
        told = len(NOTES)


def run_one(fn, job: dict, case, device, emit: Callable[..., None]) -> None:
    """Run one case: its result, or an `internal-error` event when the checks themselves
    raised (run_case catches the student's exceptions); a dead GPU context ends the child."""
    from learning.workshops import cases
    from learning.workshops.faults import describe, fault_site

    emit("start", case=case.name)
    try:
        result, error = cases.run_case(fn, job["op"], case, device, job["seed"]), None
    except Exception as exc:
        result, error = None, exc
    lost = context_lost(device)
    if lost:  # every later case would fail with it: end here, as a crash of this case
        print(f"the GPU context died in this case: {lost}", file=sys.stderr, flush=True)
        sys.exit(3)
    if error is not None:
        emit("internal-error", case=case.name, detail=describe(error), where=fault_site(error))
    else:
        emit("result", **result.to_event())


def limit_memory(limit_bytes: int) -> None:
    """Cap this process's heap and private mappings, so a runaway allocation fails with an
    error here instead of pushing the machine into swap. Device memory is not counted."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_DATA, (limit_bytes, limit_bytes))
    except (ImportError, ValueError, OSError):  # no such limit here: the case timeout remains
        pass


def context_lost(device) -> str | None:
    """The sticky CUDA error (an illegal address, say) that left `device` unusable, or None."""
    import torch

    if device.type != "cuda":
        return None
    try:
        torch.cuda.synchronize(device)
    except Exception as exc:  # torch's AcceleratorError or RuntimeError, by version
        return str(exc).strip().splitlines()[0]
    return None


if __name__ == "__main__":
    main()
