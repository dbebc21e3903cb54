"""The child process that runs a submission's jobs, one report line per event.

The parent (`isolation.Session`) starts it once per submission. It loads the submission's
definitions, says `loaded` (or `load-error`), then reads jobs, one JSON line each, from the
pipe `--job-fd` names and answers on the pipe `--report-fd` names, so whatever the
student's code prints cannot corrupt the report. A job either runs cases of an op (a
`result` event per case) or calls a plain function on inputs (one `answers` event, see
`calls`); every job ends with `done`. A crash or hang here costs the case or job in
progress, never the checker; an exception in the checks themselves is an `internal-error`
event, and the next case runs. Imports stay light here: `child_env` serves every command
that starts a child process.
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
    root = str(Path(__file__).resolve().parents[3])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONPATH=path, **extra)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("impl", help="the submission: a notebook or a .py file")
    parser.add_argument("--job-fd", type=int, required=True)
    parser.add_argument("--report-fd", type=int, required=True)
    parser.add_argument("--memory-limit", type=int, required=True)
    args = parser.parse_args()
    jobs = os.fdopen(args.job_fd, "r")
    report = os.fdopen(args.report_fd, "w", buffering=1)
    limit_memory(args.memory_limit)

    def emit(event: str, **fields) -> None:
        report.write(json.dumps({"event": event, **fields}) + "\n")
        report.flush()

    serve(Path(args.impl), (json.loads(line) for line in jobs), emit)


def serve(impl: Path, jobs, emit: Callable[..., None]) -> None:
    """Load `impl`, then run each job of `jobs`, reporting through `emit`."""
    from learning.workshops.contracts import default_device, describe_device, select_mode

    mode = select_mode(verbose=False)
    from learning.workshops.checking.loader import LoadError, function_in, load_module
    from learning.workshops.notebook.interpreter import first_configs, one_compile_per_shape

    first_configs()  # autotuned kernels: the first config, on a GPU as in the interpreter
    one_compile_per_shape()

    try:
        module = load_module(impl)
    except LoadError as exc:
        emit("load-error", detail=str(exc))
        return
    device = default_device()
    emit("loaded", mode=mode, device=describe_device(device))
    for job in jobs:
        try:
            run_job(function_in(module, impl, job["function"]), job, device, emit)
        except LoadError as exc:
            emit("missing", detail=str(exc))
        release_cached_memory(device)
        emit("done")


def release_cached_memory(device) -> None:
    """Give the GPU memory torch's allocator keeps cached back to the device before a job is
    done: the clean room replays the job's cases on the same GPU next, and a case that ran
    out of memory would otherwise leave it all held here."""
    if device.type == "cuda":
        import torch

        torch.cuda.empty_cache()


def run_job(fn, job: dict, device, emit: Callable[..., None]) -> None:
    """Run one job: cases of an op, or calls of a plain function."""
    if "cases" in job:
        run_cases(fn, job, device, emit)
    else:
        from learning.workshops.checking.calls import answer_calls

        emit("answers", answers=answer_calls(fn, job["calls"]))


def run_cases(fn, job: dict, device, emit: Callable[..., None]) -> None:
    """Run a job's cases, with what the interpreter did unlike a GPU told once each."""
    from learning.workshops.checking.cases import Case
    from learning.workshops.notebook.interpreter import NOTES

    told = len(NOTES)
    for spec in job["cases"]:
        spec = dict(spec)
        inputs = spec.pop("inputs")
        run_one(fn, job, Case(**spec), inputs, device, emit)
        for note in NOTES[told:]:
            emit("note", text=note)
        told = len(NOTES)


def run_one(fn, job: dict, case, spec_inputs: dict, device, emit: Callable[..., None]) -> None:
    """Run one case on the input the parent sent: its result with what the call returned
    and left (`seen`, which the parent judges), or an `internal-error` event when the checks
    themselves raised (run_case catches the student's exceptions, and `students_fault` those
    its objects raised in the checks); a dead GPU context ends the child."""
    from learning.workshops.checking import cases
    from learning.workshops.checking.exchange import Inputs, Observation
    from learning.workshops.checking.faults import describe, fault_site

    emit("start", case=case.name)
    seen = Observation()
    try:
        inputs = Inputs.from_wire(spec_inputs, device)
        result = cases.run_case(fn, job["op"], case, device, job["seed"], inputs, seen)
        error = None
    except Exception as exc:
        result, error = None, exc
    lost = context_lost(device)
    if lost:  # every later case would fail with it: end here, as a crash of this case
        print(f"the GPU context died in this case: {lost}", file=sys.stderr, flush=True)
        sys.exit(3)
    if error is not None and (blamed := students_fault(case, error)) is not None:
        result, error = blamed, None
    if error is not None:
        emit("internal-error", case=case.name, detail=describe(error), where=fault_site(error))
    else:
        emit("result", **result.to_event(), seen=seen.to_wire())


def students_fault(case, error: Exception):
    """The case failed by the student's code when `error`, raised in the checks, came through
    a frame of it (a method of an object the call gave back, run as the checks read it), or
    None: the checks failed on their own."""
    from learning.workshops.checking.raised import raised_text, student_line
    from learning.workshops.checking.records import CaseResult, Failure, Verdict

    if student_line(error) is None:
        return None
    said = f"the checks read what the call gave back, and your code {raised_text(error)}"
    return CaseResult.of(case, Verdict(Failure.EXCEPTION, said))


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
