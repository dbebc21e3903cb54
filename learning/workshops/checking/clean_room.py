"""The clean room: a process that launches a submission's kernels, and runs nothing else of it.

The trusted side (`replay`) starts it, in a sandbox of its own where a grader has one, and
sends, one JSON line each on the pipe `--job-fd` names: first the kernels' source
(`kernel_source.KernelSource`: imports from triton and math, constants, undecorated `def`s),
which it loads and makes `triton.jit` functions of; then jobs, each a list of calls. A call
is the launches the submission's child recorded for one call of the student's function, with
buffers the trusted side chose: the inputs' storages (values the child never saw), and every
other buffer's size and fill. The room makes those launches in order and answers, on the
pipe `--report-fd` names, what the call left: the output view and the inputs' storages, as
the child's `exchange.Observation` would, so that `judge` judges them alike. A launch that
raises ends its call with a `replay-error`; the next call runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from learning.workshops.checking.child import context_lost, limit_memory

INTEGER_BYTES = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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

    serve((json.loads(line) for line in jobs), emit)


def serve(jobs, emit) -> None:
    """Load the kernels the first line sends, then replay each job's calls."""
    from learning.workshops.contracts import default_device, select_mode
    from learning.workshops.notebook.interpreter import one_compile_per_shape

    select_mode(verbose=False)
    one_compile_per_shape()
    try:
        kernels = load(next(jobs))
    except Exception as exc:  # the source is the trusted side's; a failure here is said
        emit("load-error", detail=f"{type(exc).__name__}: {exc}"[:300])
        return
    emit("loaded")
    device = default_device()
    for job in jobs:
        for call in job["calls"]:
            replay_call(kernels, call, device, emit)
            lost = context_lost(device)
            if lost:
                print(f"the GPU context died in a replay: {lost}", file=sys.stderr, flush=True)
                sys.exit(3)
        emit("done")


def load(spec: dict) -> dict:
    """The kernels of `spec` ({"source", "filename", "kernels": {name: jit options}}) as
    `triton.jit` functions, by name; their helpers find each other in the same module."""
    import importlib.util

    import triton

    from learning.workshops.checking.loader import DefinitionsLoader

    loader = DefinitionsLoader(spec["source"], spec["filename"])
    module_spec = importlib.util.spec_from_loader("clean_room_kernels", loader)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module
    loader.exec_module(module)
    for name, options in spec["kernels"].items():
        setattr(module, name, triton.jit(getattr(module, name), **options))
    return {name: getattr(module, name) for name in spec["kernels"]}


def replay_call(kernels: dict, call: dict, device, emit) -> None:
    """Make one call's launches on its buffers; emit what the call left, or why it failed."""
    from learning.workshops.checking.exchange import returned_to_wire, tensor_to_wire

    try:
        buffers, inputs = _buffers(call["buffers"], device)
        for launch in call["launches"]:
            kernel = kernels[launch["kernel"]]
            args = {name: _argument(v, buffers) for name, v in launch["args"].items()}
            kernel[tuple(launch["grid"])](**args, **launch["options"])
        output = _view(call["output"], buffers)
        left = {
            "returned": returned_to_wire(output),
            "storages": [tensor_to_wire(t) for t in inputs],
        }
    except Exception as exc:
        emit("replay-error", detail=_said(exc))
        return
    emit("replayed", call=left)


def _buffers(specs: list[dict], device) -> tuple[dict, list]:
    """Each buffer by its role, as an untyped storage; and the inputs' storage tensors."""
    import torch

    from learning.workshops.checking.exchange import tensor_from_wire

    buffers, inputs = {}, []
    for spec in specs:
        if "storage" in spec:
            tensor = tensor_from_wire(spec["storage"]).to(device)
            inputs.append(tensor)
            buffers[spec["role"]] = tensor.untyped_storage()
            continue
        raw = torch.empty(spec["nbytes"], dtype=torch.uint8, device=device)
        fill = spec.get("fill")
        if fill is None:
            raw.fill_(0xFF)  # NaN in every float dtype, -1 in every integer one
        else:
            raw.view(getattr(torch, INTEGER_BYTES[fill["size"]])).fill_(fill["bits"])
        buffers[spec["role"]] = raw.untyped_storage()
    return buffers, inputs


def _typed(storage, dtype_name: str, offset: int, shape, stride):
    import torch

    dtype = getattr(torch, dtype_name)
    size = torch.empty((), dtype=dtype).element_size()
    tensor = torch.empty(0, dtype=dtype, device=storage.device)
    return tensor.set_(storage, offset // size, shape, stride)


def _argument(value: dict, buffers: dict):
    """A recorded argument (`launch_record.Recording.encode`) on this room's buffers."""
    import torch
    import triton.language as tl

    if "tensor" in value:
        spec = value["tensor"]
        storage = buffers[spec["buffer"]]
        size = torch.empty((), dtype=getattr(torch, spec["dtype"])).element_size()
        count = (storage.nbytes() - spec["offset"]) // size
        return _typed(storage, spec["dtype"], spec["offset"], (count,), (1,))
    if "tl_dtype" in value:
        return tl.dtype(value["tl_dtype"])
    if "torch_dtype" in value:
        return getattr(torch, value["torch_dtype"])
    if "tuple" in value:
        return tuple(_argument(v, buffers) for v in value["tuple"])
    return value["value"]


def _view(spec: dict, buffers: dict):
    """The output view the student's function returned, over this room's buffer."""
    storage = buffers[spec["buffer"]]
    return _typed(storage, spec["dtype"], spec["offset"], spec["shape"], spec["stride"])


def _said(exc: BaseException) -> str:
    """What a launch raised, in one line (Triton's interpreter wraps it: the cause first)."""
    cause = exc.__cause__ or exc
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[0] if text else ''}"[:300]


if __name__ == "__main__":
    main()
